"""JavaScript / lodash value semantics the MVU rules rest on: `_.toPath`, `_.get/has/set/unset`, `_.merge`,
`Number()`, `JSON.stringify`, `toPrecision(12)`, `_.isEqual`.

Rules: lodash 4 (`stringToPath`, `baseGet`, `baseSet`, `baseMerge`) and ECMAScript `Number()` as MagVarUpdate
calls them (src/function/update_variables.ts). Values are JSON values in Python form (dict, list, str, int,
float, bool, None); a JS `NaN`/`Infinity` becomes None, as `JSON.stringify` stores it.
"""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

__all__ = ["MISSING", "clone", "js_equal", "js_number", "js_stringify", "lodash_get", "lodash_has", "lodash_merge",
           "lodash_set", "lodash_unset", "precision12", "to_number", "to_path"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""JavaScript `undefined` where it differs from `null` (a missing key)."""

# lodash `rePropName` (_stringToPath.js), in Python's syntax.
_PROP = re.compile(r"""[^.\[\]]+|\[(?:(-?\d+(?:\.\d+)?)|(["'])((?:(?!\2)[^\\]|\\.)*?)\2)\]"""
                   r"""|(?=(?:\.|\[\])(?:\.|\[\]|$))""")
_ESCAPE = re.compile(r"\\(\\)?")
_PLAIN = re.compile(r"^\w*$")
_DEEP = re.compile(r"\.|\[(?:[^\[\]]*|([\"'])(?:(?!\1)[^\\]|\\.)*?\1)\]")


def to_path(path: str) -> list[str]:
    """lodash `_.toPath(path)`: 'a.b[0]["x y"]' → ['a', 'b', '0', 'x y'] (segments are strings)."""
    out: list[str] = []
    if path.startswith("."):
        out.append("")
    for m in _PROP.finditer(path):
        number, quote, sub = m.group(1), m.group(2), m.group(3)
        if quote:
            out.append(_ESCAPE.sub(r"\1", sub))
        elif number is not None:
            out.append(number)
        else:
            out.append(m.group(0))
    return out


def _cast_path(obj: Any, path: str | list[str]) -> list[str]:
    """lodash `castPath`: a string is one key when it is plain, or when it is itself a key of `obj`."""
    if isinstance(path, list):
        return [str(p) for p in path]
    if _PLAIN.match(path) or not _DEEP.search(path) or (isinstance(obj, dict) and path in obj):
        return [path]
    return to_path(path)


def _index(key: str) -> int | None:
    return int(key) if key.isdigit() else None


def _child(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return value.get(key, MISSING)
    if isinstance(value, list):
        i = _index(key)
        if i is not None and i < len(value):
            return value[i]
        if key == "length":
            return len(value)
        return MISSING
    if isinstance(value, str):
        i = _index(key)
        if i is not None and i < len(value):
            return value[i]
        if key == "length":
            return len(value)
    return MISSING


def lodash_get(obj: Any, path: str | list[str], default: Any = MISSING) -> Any:
    """`_.get(obj, path, default)`; '' reads the key '' (as lodash does)."""
    value = obj
    for key in _cast_path(obj, path):
        if value is None or value is MISSING:
            return default
        value = _child(value, key)
        if value is MISSING:
            return default
    return default if value is MISSING else value


def lodash_has(obj: Any, path: str | list[str]) -> bool:
    """`_.has(obj, path)`: every segment is an own key (array indexes within bounds)."""
    value = obj
    keys = _cast_path(obj, path)
    if not keys:
        return False
    for key in keys:
        if isinstance(value, dict):
            if key not in value:
                return False
            value = value[key]
        elif isinstance(value, list):
            i = _index(key)
            if i is None or i >= len(value):
                return False
            value = value[i]
        else:
            return False
    return True


def lodash_set(obj: Any, path: str | list[str], value: Any) -> Any:
    """`_.set(obj, path, value)` in place: missing containers are created (an array when the next key is an
    index), a primitive on the way is replaced by one. Returns `obj`."""
    keys = _cast_path(obj, path)
    target = obj
    for n, key in enumerate(keys):
        last = n == len(keys) - 1
        if last:
            _assign(target, key, value)
            break
        nxt = _child(target, key)
        if not isinstance(nxt, (dict, list)):
            nxt = [] if _index(keys[n + 1]) is not None else {}
            _assign(target, key, nxt)
        target = nxt
    return obj


def _assign(target: Any, key: str, value: Any) -> None:
    if isinstance(target, list):
        i = _index(key)
        if i is None:
            return  # a named property on an array: JSON drops it
        while len(target) <= i:
            target.append(None)  # a hole: JSON.stringify writes null
        target[i] = value
    elif isinstance(target, dict):
        target[key] = value


def lodash_unset(obj: Any, path: str | list[str]) -> bool:
    """`_.unset(obj, path)`: delete the last key (an array element becomes a hole, i.e. null)."""
    keys = _cast_path(obj, path)
    if not keys:
        return True
    parent = lodash_get(obj, keys[:-1]) if len(keys) > 1 else obj
    key = keys[-1]
    if isinstance(parent, dict):
        parent.pop(key, None)
    elif isinstance(parent, list):
        i = _index(key)
        if i is not None and i < len(parent):
            parent[i] = None
    return True


def lodash_merge(target: Any, *sources: Any, arrays_replace: bool = False) -> Any:
    """`_.merge(target, ...sources)` in place: plain objects and arrays merge key by key / index by index, a
    source `undefined` never overwrites. `arrays_replace`: MVU's `correctlyMerge` (a source array replaces)."""
    for source in sources:
        _merge_into(target, source, arrays_replace)
    return target


def _merge_into(target: Any, source: Any, arrays_replace: bool) -> None:
    items = source.items() if isinstance(source, dict) else enumerate(source) if isinstance(source, list) else ()
    for key, value in items:
        if value is MISSING:
            continue
        current = target.get(key, MISSING) if isinstance(target, dict) else (
            target[key] if isinstance(target, list) and key < len(target) else MISSING)
        if isinstance(value, list) and arrays_replace:
            new: Any = copy.deepcopy(value)
        elif isinstance(value, (dict, list)):
            # the target's own container is merged into in place; anything else starts fresh
            kind = dict if isinstance(value, dict) else list
            new = current if isinstance(current, kind) else kind()
            _merge_into(new, value, arrays_replace)
        else:
            new = value
        if isinstance(target, dict):
            target[key] = new
        elif isinstance(target, list):
            while len(target) <= key:
                target.append(None)
            target[key] = new


def clone(value: Any) -> Any:
    """klona: a deep copy."""
    return copy.deepcopy(value)


def js_number(value: float | int) -> int | float | None:
    """A JS number as stored: integral floats become int, NaN/±Infinity become None (JSON.stringify: null)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        if value.is_integer() and abs(value) < 2 ** 53:
            return int(value)
    return value


def precision12(value: float | int) -> int | float | None:
    """`parseFloat(x.toPrecision(12))`: rounded to 12 significant digits."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return js_number(float(f"{value:.12g}")) if value != 0 else 0


_HEX = re.compile(r"^[+-]?0[xX][0-9a-fA-F]+$|^0[bB][01]+$|^0[oO][0-7]+$")
_DECIMAL = re.compile(r"^[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|Infinity)$")


def to_number(value: Any) -> float | int | None:
    """ECMAScript `Number(value)` (None stands for NaN / ±Infinity, which JSON stores as null)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return js_number(value)
    if isinstance(value, str):
        text = value.strip(" \t\n\r\v\f\u00a0\ufeff\u2028\u2029")
        if not text:
            return 0
        if _HEX.match(text):
            if text[0] in "+-":
                return None  # Number("-0x1") is NaN
            return int(text, 0)
        if _DECIMAL.match(text):
            return js_number(float(text.replace("Infinity", "inf")))
        return None
    if isinstance(value, list):
        if not value:
            return 0
        if len(value) == 1:
            return to_number(js_string(value[0]))
        return None
    return None  # objects, undefined


def js_string(value: Any) -> str:
    """`String(value)` for a JSON value (arrays join with ',', objects are '[object Object]')."""
    if value is None:
        return "null"
    if value is MISSING:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_stringify(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join("" if v is None or v is MISSING else js_string(v) for v in value)
    return "[object Object]"


def js_stringify(value: Any) -> str:
    """`JSON.stringify(value)`: compact, non-ASCII kept; a float prints as JS prints it ("1e+21", "0.1")."""
    if value is MISSING:
        return "undefined"
    if isinstance(value, float):
        number = js_number(value)
        if number is None:
            return "null"
        if isinstance(number, int):
            return str(number)
        if number.is_integer() and abs(number) < 1e21:  # JS prints integers whole below 1e21
            return str(int(number))
        text = repr(number)
        if "e" in text:
            mantissa, exp = text.split("e")
            return f"{mantissa}e{'+' if not exp.startswith('-') else '-'}{exp.lstrip('+-').lstrip('0') or '0'}"
        return text
    if isinstance(value, list):
        return "[" + ",".join("null" if v is MISSING else js_stringify(v) for v in value) + "]"
    if isinstance(value, dict):
        from tavern_tui.mvu.yamlfmt import js_keys  # JavaScript's key order: array indexes first

        items = {str(k): v for k, v in value.items()}
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{js_stringify(items[k])}"
                              for k in js_keys(items) if items[k] is not MISSING) + "}"
    return json.dumps(value, ensure_ascii=False)


def js_equal(a: Any, b: Any) -> bool:
    """`_.isEqual` on JSON values (true is not 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(js_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(js_equal(a[k], b[k]) for k in a)
    return bool(a == b)
