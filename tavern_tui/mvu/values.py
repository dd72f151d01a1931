"""MVU's value readers: `parseCommandValue` (a command's value argument), `parseString` (JSON-patch bodies and
[InitVar] contents) and `trimQuotesAndBackslashes`.

Rules: MagVarUpdate src/function/update_variables.ts:23-27, :86-173 and util/common.ts:27-67 (semantics file
§4). The JavaScript pieces are replaced by kept libraries or a closed evaluator: `JSON.parse` → `json`, a JS
object/array literal → `json5` (single quotes, bare keys, trailing commas; no expressions inside), mathjs
`evaluate` → `evaluate_math` (numbers, + - * / % ^, parentheses, ranges `a:b`, the Math/mathjs functions and
constants cards use; nothing else is ever executed), `YAML.parse` → PyYAML with the YAML 1.2 core schema
(`yes`/`no` stay strings, no sexagesimals or dates, as the JS `yaml` package reads them), `jsonrepair` →
`json_repair`.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import re
from typing import Any

import json5
import json_repair
import yaml

from tavern_tui.mvu.jsutil import MISSING, js_number, precision12

__all__ = ["MAX_TEXT", "MAX_VALUES", "ParseError", "TooManyValues", "evaluate_math", "parse_command_value",
           "parse_string", "trim_quotes", "yaml_load"]


class ParseError(ValueError):
    """A text is none of YAML, JSON5 or (repaired) JSON (`parse_string`)."""


_TRIM = re.compile(r"^[\\\"'` ]*(.*?)[\\\"'` ]*\Z")


def trim_quotes(text: str) -> str:
    """`trimQuotesAndBackslashes`: leading/trailing backslashes, quotes, backticks and spaces removed. As in JS,
    nothing is removed from a text holding a line break (the pattern's `.` stops at it)."""
    if not isinstance(text, str):
        return text
    m = _TRIM.match(text)
    return m.group(1) if m else text


class _Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader resolving plain scalars by the YAML 1.2 core schema (what the JS `yaml` reads)."""


_Yaml12Loader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
        ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
        ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
        ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
        ("tag:yaml.org,2002:float",
         r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
         "-+0123456789."),
        ("tag:yaml.org,2002:merge", r"^(?:<<)$", "<")):
    _Yaml12Loader.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))


def _int12(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    text = loader.construct_scalar(node)
    return int(text, 8) if text.startswith("0o") else int(text, 0) if text.startswith("0x") else int(text)


_Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _int12)


MAX_VALUES = 200_000
"""Most values (objects, arrays, scalars) one parsed YAML/JSON5 text may expand to (ours): YAML aliases
share a node, so a few lines of anchors (`b: [*a, *a, …]`, billion-laughs style) name billions of values."""


MAX_TEXT = 256_000
"""Longest text (characters) `parse_string` reads (ours): the YAML reader is pure Python (~3.5 s per million
characters); MVU's `[InitVar]` data and a reply's JSON patch are a few kilobytes."""


class TooManyValues(yaml.YAMLError, ValueError):
    """A parsed text expands to more than `MAX_VALUES` values (caught wherever YAML or JSON5 errors are)."""

    def __init__(self) -> None:
        super().__init__(f"expands to more than {MAX_VALUES} values (YAML aliases repeat their anchor); refused")


def yaml_load(text: str) -> Any:
    """One YAML 1.2 document (core schema, merge keys) as JSON values.

    Raises:
        yaml.YAMLError: not YAML; `TooManyValues` when aliases expand it past `MAX_VALUES` values.
    """
    value = yaml.load(text, Loader=_Yaml12Loader)  # noqa: S506 - a SafeLoader subclass
    return _jsonable(value)


def _jsonable(value: Any, budget: list[int] | None = None) -> Any:
    """`value` as a JSON tree, shared (aliased) parts copied; `TooManyValues` past `MAX_VALUES` values."""
    if budget is None:
        budget = [MAX_VALUES]
    budget[0] -= 1
    if budget[0] < 0:
        raise TooManyValues
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, bool) else ("true" if k else "false"): _jsonable(v, budget)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v, budget) for v in value]
    if isinstance(value, float):
        return js_number(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return str(value)


# -- the mathjs stand-in -----------------------------------------------------------------------------------

class _NotMath(Exception):
    pass


_FUNCS: dict[str, Any] = {
    "sqrt": math.sqrt, "abs": abs, "floor": math.floor, "ceil": math.ceil, "round": lambda x, n=0: round(x, int(n)),
    "min": min, "max": max, "pow": pow, "exp": math.exp, "log": lambda x, b=None: math.log(x) if b is None
    else math.log(x, b), "log10": math.log10, "log2": math.log2, "sin": math.sin, "cos": math.cos, "tan": math.tan,
    "asin": math.asin, "acos": math.acos, "atan": math.atan, "atan2": math.atan2, "sign": lambda x: (x > 0) - (x < 0),
    "trunc": math.trunc, "fix": math.trunc, "cbrt": lambda x: math.copysign(abs(x) ** (1 / 3), x), "mod": math.fmod,
    "hypot": math.hypot, "random": None, "sum": lambda *a: sum(a), "mean": lambda *a: sum(a) / len(a),
}
_CONSTS = {"pi": math.pi, "PI": math.pi, "e": math.e, "E": math.e, "tau": math.tau, "Infinity": math.inf,
           "LN2": math.log(2), "LN10": math.log(10), "SQRT2": math.sqrt(2)}
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.Mod: math.fmod}
_MAX_POWER = 10_000  # ours: a huge power never hangs the step


def _eval_node(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval_node(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval_node(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        left, right = _eval_node(node.left), _eval_node(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_POWER:
            raise _NotMath
        if isinstance(node.op, ast.Div) and right == 0:
            return math.inf if left > 0 else -math.inf if left < 0 else math.nan
        return _BIN[type(node.op)](left, right)
    if isinstance(node, ast.Name) and node.id in _CONSTS:
        return _CONSTS[node.id]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("Math", "math"):
        if node.attr in _CONSTS:
            return _CONSTS[node.attr]
    if isinstance(node, ast.Call) and not node.keywords:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else (
            func.attr if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id in ("Math", "math") else None)
        impl = _FUNCS.get(name) if name else None
        if impl is None:
            raise _NotMath
        return impl(*[_eval_node(a) for a in node.args])
    raise _NotMath


_RANGE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*:\s*(-?\d+(?:\.\d+)?)\s*$")
_LEADING_ZEROS = re.compile(r"(?<![\w.])0+(?=\d)")
_MATH_CHARS = re.compile(r"^[\w\s.+\-*/%^(),]*$")


def evaluate_math(text: str) -> Any:
    """mathjs `evaluate(text)` for what a reply's value can hold, or MISSING when mathjs would throw or give a
    non-number. A number is rounded to 12 significant digits; a range `a:b` is a matrix, given as its string
    (`'[9, 10, 11]'`), as MVU stores matrices. Never executes anything."""
    m = _RANGE.match(text)
    if m:
        start, end = float(m.group(1)), float(m.group(2))
        if end - start > 10_000:
            return MISSING
        values = []
        x = start
        while x <= end:
            values.append(x)
            x += 1
        return "[" + ", ".join(_fmt(v) for v in values) + "]"
    if not _MATH_CHARS.match(text) or not text.strip():
        return MISSING
    try:
        # mathjs reads 09 as 9 (Python refuses leading zeros)
        source = _LEADING_ZEROS.sub("", text.replace("^", "**").strip())
        tree = ast.parse(source, mode="eval")
        value = _eval_node(tree)
    except (SyntaxError, _NotMath, TypeError, ValueError, OverflowError, ZeroDivisionError, RecursionError):
        return MISSING
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return MISSING
    return precision12(value)


def _fmt(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def parse_command_value(text: Any) -> Any:
    """`parseCommandValue`: literals, JSON, JS object/array literal, mathjs, YAML, else the text unquoted.
    `undefined` is returned as MISSING."""
    if not isinstance(text, str):
        return text
    trimmed = text.strip()
    literal = {"true": True, "false": False, "null": None, "undefined": MISSING}
    if trimmed in literal:
        return literal[trimmed]
    try:
        return _strict_json(trimmed)
    except ValueError:
        if (trimmed.startswith("{") and trimmed.endswith("}")) or (trimmed.startswith("[") and trimmed.endswith("]")):
            try:
                result = json5.loads(trimmed)
                if isinstance(result, (dict, list)):
                    return _jsonable(result)
            except (ValueError, TypeError, RecursionError):
                pass
    number = evaluate_math(trimmed)
    if number is not MISSING:
        return number
    try:
        return yaml_load(trimmed)
    except (yaml.YAMLError, RecursionError):
        pass
    return trim_quotes(text)


def _strict_json(text: str) -> Any:
    def bad_constant(name: str) -> Any:
        raise ValueError(name)
    value = json.loads(text, parse_constant=bad_constant)
    return _jsonable(value)


_JSON_FIRST = re.compile(r"^[\[{]")


def parse_string(content: str) -> Any:
    """`parseString` (util/common.ts): YAML unless it starts with `[`/`{`, then JSON5, then repaired JSON, then
    YAML for JSON-looking text.

    Raises:
        ParseError: every reader failed (the message names each reader's complaint), or the text expands past
            `MAX_VALUES` values (`TooManyValues`), or is longer than `MAX_TEXT` characters.
    """
    if len(content) > MAX_TEXT:
        raise ParseError(f"{len(content)} characters, above the {MAX_TEXT} this reader accepts; refused")
    json_first = bool(_JSON_FIRST.match(content.lstrip()))
    errors: list[str] = []
    if not json_first:
        try:
            return yaml_load(content)
        except TooManyValues as exc:  # valid YAML, refused: no other reader should guess at it
            raise ParseError(f"YAML: {exc}") from None
        except (yaml.YAMLError, RecursionError) as exc:
            errors.append(f"YAML: {exc}")
    try:
        return _jsonable(json5.loads(content))
    except TooManyValues as exc:
        raise ParseError(f"JSON5: {exc}") from None
    except (ValueError, TypeError, RecursionError) as exc:
        errors.append(f"JSON5: {exc}")
    try:
        repaired = json_repair.repair_json(content, return_objects=True)
        if repaired != "" and (isinstance(repaired, (dict, list)) or content.strip()):
            return _jsonable(repaired)
        errors.append("JSON: nothing to repair")
    except Exception as exc:  # noqa: BLE001 - the repairer's own errors are many kinds
        errors.append(f"JSON: {exc}")
    if json_first:
        try:
            return yaml_load(content)
        except TooManyValues as exc:
            raise ParseError(f"YAML: {exc}") from None
        except (yaml.YAMLError, RecursionError) as exc:
            errors.append(f"YAML: {exc}")
    raise ParseError("not valid YAML/JSON/JSON5: " + "; ".join(errors))
