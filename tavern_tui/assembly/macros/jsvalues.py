"""JavaScript value semantics for the variable macros: SillyTavern's `variables.js` stores JS values.

Numbers print like `Number#toString`, `Number(value)` coerces strings, and the variable store's
get/add follow `getLocalVariable`/`addLocalVariable` (ST 1.18 `variables.js`, `MacroEngine.normalizeMacroResult`).
"""

from __future__ import annotations

import json
import math
import re

__all__ = ["js_string", "to_number", "var_add", "var_get"]

_JS_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_JS_RADIX = re.compile(r"0(?:([xX])([0-9a-fA-F]+)|([oO])([0-7]+)|([bB])([01]+))")


def _to_number(value: object) -> float:
    """JavaScript `Number(value)`; lists and dicts count as NaN (ST coerces some arrays; we do not)."""
    if value is None:
        return 0.0
    if isinstance(value, bool | int | float):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if not isinstance(value, str):
        return math.nan
    s = value.strip().strip("\ufeff")
    if not s:
        return 0.0
    if _JS_DECIMAL.fullmatch(s):
        return float(s)
    if s in ("Infinity", "+Infinity", "-Infinity"):
        return -math.inf if s[0] == "-" else math.inf
    m = _JS_RADIX.fullmatch(s)
    if m:
        digits, base = (m.group(2), 16) if m.group(1) else (m.group(4), 8) if m.group(3) else (m.group(6), 2)
        try:
            return float(int(digits, base))
        except OverflowError:
            return math.inf
    return math.nan


def to_number(value: object) -> float:
    """JavaScript `Number(value)` (NaN for what does not parse)."""
    return _to_number(value)


def _js_number(x: float) -> str:
    """JavaScript `String(number)`: `5` not `5.0`, `1e+21`, `1e-7`, `0.000001`."""
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) < 2**53:
        return str(x)
    try:
        x = float(x)
    except OverflowError:
        return "Infinity" if x > 0 else "-Infinity"
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp = repr(abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    n = len(whole) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        e = n - 1
        body = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + body


def _jsonable(value: object) -> object:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def js_string(value: object) -> str:
    """What a macro prints for a value (MacroEngine.normalizeMacroResult): objects become JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _js_number(value)
    try:
        return json.dumps(_jsonable(value), ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _store_number(x: float) -> int | float:
    return int(x) if x.is_integer() and abs(x) < 2**53 else x


def var_get(store: dict[str, object], name: str) -> object:
    """variables.js getLocalVariable: missing ⇒ "", numeric strings ⇒ numbers."""
    if name not in store:
        return ""
    value = store[name]
    if isinstance(value, str) and not value.strip():
        return value  # `value.trim() === ''` keeps blank strings as they are
    number = _to_number(value)
    if math.isnan(number):
        return value if value else ""
    return number


def var_add(store: dict[str, object], name: str, value: str | int) -> object:
    """variables.js addLocalVariable: JSON array ⇒ push; both numeric ⇒ add; else string append."""
    current = var_get(store, name) or 0
    if isinstance(current, str):
        try:
            parsed = json.loads(current, parse_float=lambda t: _store_number(float(t)))
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, list):
            parsed.append(value)
            store[name] = js_string(parsed)
            return parsed
    increment = _to_number(value)
    if math.isnan(increment) or math.isnan(_to_number(current)):
        result = js_string(current or "") + js_string(value)
        store[name] = result
        return result
    total = _to_number(current) + increment
    if math.isnan(total):
        return ""
    store[name] = _store_number(total)
    return total
