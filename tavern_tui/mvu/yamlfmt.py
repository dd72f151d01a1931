"""`YAML.stringify(value, {blockQuote: 'literal'})` of the `yaml` npm package (2.x, its default options) for JSON
values: what Tavern Helper's `{{format_*_variable::path}}` prints (JS-Slash-Runner src/function/macro_like.ts
`applyFormatVariable`).

Rules, as that library's stringifier applies them with its defaults (core schema, `indent: 2`, `indentSeq: true`,
`lineWidth: 80`, `minContentWidth: 20`, `doubleQuotedMinMultiLineLength: 40`, `singleQuote: null`):

- maps are block maps (`key: value`, nested collections on the next line indented two spaces), lists are block
  sequences (`- item`, indented under a key), empty ones print `{}` / `[]`; `null`, `true`, `false`; numbers as
  `JSON.stringify` prints them (`.nan`, `.inf`, `-.inf`, `-0`);
- a string is plain unless it starts with an indicator, holds `: ` / ` #`, ends in a space or `:`, or would read
  back as another type (`"123"`, `"true"`, `"null"`, `"0x1f"`, `"1e3"`); then it is double-quoted (single-quoted
  when it holds `"` and no `'`); a multi-line string is a literal block `|` with its chomping indicator (`|-` no
  final newline, `|` one, `|+` more) and an indentation indicator when it starts with a space;
- plain and quoted scalars longer than the line width are folded at spaces (quoted ones also inside words),
  keys never; a key longer than 1024 characters becomes an explicit `? key`;
- object keys in JavaScript's own order (array-index keys first, ascending, then insertion order).

Lengths are counted in UTF-16 code units, as JavaScript counts them. Pure: no imports beyond the standard library.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["js_keys", "utf16_len", "yaml_stringify"]

LINE_WIDTH = 80
MIN_CONTENT_WIDTH = 20
MIN_MULTILINE_QUOTED = 40
_MAX_INDEX = 2**32 - 2


def utf16_len(text: str) -> int:
    """`text.length` in JavaScript: UTF-16 code units."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _units(text: str) -> str:
    """`text` with each astral character split into its two surrogates (so indexing counts as JavaScript does)."""
    if all(ord(ch) <= 0xFFFF for ch in text):
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if code > 0xFFFF:
            code -= 0x10000
            out.append(chr(0xD800 + (code >> 10)) + chr(0xDC00 + (code & 0x3FF)))
        else:
            out.append(ch)
    return "".join(out)


def _join_units(text: str) -> str:
    """The inverse of `_units` (paired surrogates back into characters; a lone one stays)."""
    if not any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _array_index(key: str) -> bool:
    return key.isascii() and key.isdigit() and (key == "0" or key[0] != "0") and int(key) <= _MAX_INDEX


def js_keys(obj: dict[str, Any]) -> list[str]:
    """An object's own keys in JavaScript's order: array-index keys ascending, then the others as inserted."""
    keys = [str(k) for k in obj]
    indexes = sorted((k for k in keys if _array_index(k)), key=int)
    return indexes + [k for k in keys if not _array_index(k)]


def _js_number(value: float | int) -> str:
    """A number as `JSON.stringify` prints it, YAML's `.nan` / `.inf` / `-.inf` for the others, `-0` kept."""
    if isinstance(value, int):
        if abs(value) < 10**21:
            return str(value)
        value = float(value)
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return "-.inf" if value < 0 else ".inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    mantissa, _, exp = text.partition("e")
    if not exp:
        return text
    power = int(exp)
    if -7 < power < 0:  # JavaScript writes 1e-6 and above positionally; Python's repr does not below 1e-4
        sign, digits = ("-", mantissa[1:]) if mantissa.startswith("-") else ("", mantissa)
        return f"{sign}0.{'0' * (-power - 1)}{digits.replace('.', '')}"
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"


# -- scalars: strings ---------------------------------------------------------------------------------------------

_DOC_MARKER = re.compile(r"(?:^|(?<=[\n\r\u2028\u2029]))(?:%|---|\.\.\.)")  # JS `^` under `m`
_PLAIN_BAD = re.compile(r"^[\n\t ,\[\]{}#&*!|>'\"%@`]|^[?-]$|^[?-][ \t]|[\n:][ \t]|[ \t]\n|[\n\t ]#|[\n\t :]\Z")
_OTHER_TYPE = re.compile(
    r"^(?:~|[Nn]ull|NULL)?\Z|^(?:[Tt]rue|TRUE|[Ff]alse|FALSE)\Z|^0o[0-7]+\Z|^[-+]?[0-9]+\Z|^0x[0-9a-fA-F]+\Z"
    r"|^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)\Z|^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+\Z"
    r"|^[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)\Z")
_FORCE_DOUBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SHORT_ESCAPES = {"0000": "\\0", "0007": "\\a", "000b": "\\v", "001b": "\\e", "0085": "\\N", "00a0": "\\_",
                  "2028": "\\L", "2029": "\\P"}


@dataclass(frozen=True, slots=True)
class _Ctx:
    indent: str = ""
    implicit_key: bool = False
    indent_at_start: int | None = None
    force_block_indent: bool = False


def _json_string(value: str) -> str:
    """`JSON.stringify(value)` of a string given in UTF-16 units: control characters and lone surrogates as
    `\\u00xx`, a surrogate pair kept."""
    out = ['"']
    n = len(value)
    for i, ch in enumerate(value):
        code = ord(ch)
        if ch in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[ch])
        elif code < 0x20:
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDBFF and not (i + 1 < n and 0xDC00 <= ord(value[i + 1]) <= 0xDFFF):
            out.append(f"\\u{code:04x}")
        elif 0xDC00 <= code <= 0xDFFF and not (i > 0 and 0xD800 <= ord(value[i - 1]) <= 0xDBFF):
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _fold(text: str, indent: str, mode: str, indent_at_start: int | None) -> str:
    """The library's line folding: break at a space between non-spaces once a line passes the width (quoted
    mode: anywhere, with an escaped line break)."""
    end_step = max(1 + MIN_CONTENT_WIDTH, 1 + LINE_WIDTH - len(indent))
    if len(text) <= end_step:
        return text
    found = _fold_points(text, indent, mode, indent_at_start, end_step)
    if found is None or not found[0]:
        return text
    return _join_folds(text, indent, mode, *found)


def _fold_points(text: str, indent: str, mode: str, indent_at_start: int | None,
                 end_step: int) -> tuple[list[int], set[int]] | None:
    """Where the lines break, and which breaks are escaped; None when an escape sequence cannot be split."""
    width, min_content = LINE_WIDTH, MIN_CONTENT_WIDTH
    folds: list[int] = []
    escaped: set[int] = set()
    end = width - len(indent)
    if indent_at_start is not None:
        if indent_at_start > width - max(2, min_content):
            folds.append(0)
        else:
            end = width - indent_at_start
    split: int | None = None
    prev: str | None = None
    esc_start = esc_end = -1
    i = -1
    n = len(text)
    while True:
        i += 1
        if i >= n:
            break
        ch = text[i]
        if mode == "quoted" and ch == "\\":
            esc_start = i
            nxt = text[i + 1] if i + 1 < n else ""
            i += {"x": 3, "u": 5, "U": 9}.get(nxt, 1)
            esc_end = i
        if ch == "\n":
            end = i + len(indent) + end_step
            split = None
        else:
            if ch == " " and prev and prev not in " \n\t":
                nxt = text[i + 1] if i + 1 < n else ""
                if nxt and nxt not in " \n\t":
                    split = i
            if i >= end:
                if split:
                    folds.append(split)
                    end = split + end_step
                    split = None
                elif mode == "quoted":
                    while prev in (" ", "\t"):
                        prev = ch
                        i += 1
                        ch = text[i] if i < n else ""
                    j = i - 2 if i > esc_end + 1 else esc_start - 1
                    if j in escaped:
                        return None
                    folds.append(j)
                    escaped.add(j)
                    end = j + end_step
                    split = None
        prev = ch
        if not ch:
            break
    return folds, escaped


def _join_folds(text: str, indent: str, mode: str, folds: list[int], escaped: set[int]) -> str:
    """The text broken at `folds`, each new line indented; an escaped break keeps its character and a `\\`."""
    n = len(text)
    out = text[:folds[0]]
    for k, fold in enumerate(folds):
        stop = folds[k + 1] if k + 1 < len(folds) else n
        if fold == 0:
            out = f"\n{indent}{text[:stop]}"
        else:
            if mode == "quoted" and fold in escaped:
                out += f"{text[fold]}\\"
            out += f"\n{indent}{text[fold + 1:stop]}"
    return out


def _double_quoted(value: str, ctx: _Ctx) -> str:
    src = _json_string(value)
    indent = ctx.indent or ("  " if _DOC_MARKER.search(value) else "")
    out: list[str] = []
    start = 0
    i = 0
    n = len(src)
    while i < n:
        ch = src[i]
        if ch == " " and src[i + 1:i + 3] == "\\n":
            out.append(src[start:i] + "\\ ")
            i += 1
            start = i
            ch = "\\"
        if ch == "\\":
            nxt = src[i + 1] if i + 1 < n else ""
            if nxt == "u":
                out.append(src[start:i])
                code = src[i + 2:i + 6]
                if code in _SHORT_ESCAPES:
                    out.append(_SHORT_ESCAPES[code])
                elif code.startswith("00"):
                    out.append("\\x" + code[2:])
                else:
                    out.append(src[i:i + 6])
                i += 5
                start = i + 1
            elif nxt == "n":
                if ctx.implicit_key or src[i + 2:i + 3] == '"' or len(src) < MIN_MULTILINE_QUOTED:
                    i += 1
                else:
                    out.append(src[start:i] + "\n\n")
                    while src[i + 2:i + 4] == "\\n" and src[i + 4:i + 5] != '"':
                        out.append("\n")
                        i += 2
                    out.append(indent)
                    if src[i + 2:i + 3] == " ":
                        out.append("\\")
                    i += 1
                    start = i + 1
            else:
                i += 1
        i += 1
    text = "".join(out) + src[start:] if start else src
    return text if ctx.implicit_key else _fold(text, indent, "quoted", ctx.indent_at_start)


def _single_quoted(value: str, ctx: _Ctx) -> str:
    if (ctx.implicit_key and "\n" in value) or re.search(r"[ \t]\n|\n[ \t]", value):
        return _double_quoted(value, ctx)
    indent = ctx.indent or ("  " if _DOC_MARKER.search(value) else "")
    text = "'" + re.sub(r"\n+", lambda m: m.group(0) + "\n" + indent, value.replace("'", "''")) + "'"
    return text if ctx.implicit_key else _fold(text, indent, "flow", ctx.indent_at_start)


def _quoted(value: str, ctx: _Ctx) -> str:
    if '"' in value and "'" not in value:
        return _single_quoted(value, ctx)
    return _double_quoted(value, ctx)


def _block(value: str, ctx: _Ctx) -> str:
    if re.search(r"\n[\t ]+\Z", value):
        return _quoted(value, ctx)
    indent = ctx.indent or ("  " if ctx.force_block_indent or _DOC_MARKER.search(value) else "")
    if not value:
        return "|\n"
    end_start = len(value)
    while end_start > 0 and value[end_start - 1] in "\n\t ":
        end_start -= 1
    end = value[end_start:]
    newline_at = end.find("\n")
    if newline_at == -1:
        chomp = "-"
    elif value == end or newline_at != len(end) - 1:
        chomp = "+"
    else:
        chomp = ""
    if end:
        value = value[:-len(end)]
        if end.endswith("\n"):
            end = end[:-1]
        end = re.sub(r"(?:^|(?<!\n))\n+(?!\n|\Z)", lambda m: m.group(0) + indent, end)
    starts_with_space = False
    start_nl = -1
    start_end = 0
    while start_end < len(value):
        ch = value[start_end]
        if ch == " ":
            starts_with_space = True
        elif ch == "\n":
            start_nl = start_end
        else:
            break
        start_end += 1
    start = value[:start_nl + 1 if start_nl < start_end else start_end]
    if start:
        value = value[len(start):]
        start = re.sub(r"\n+", lambda m: m.group(0) + indent, start)
    header = ("2" if indent else "1") + chomp if starts_with_space else chomp
    value = re.sub(r"\n+", lambda m: m.group(0) + indent, value)
    return f"|{header}\n{indent}{start}{value}{end}"


def _plain(value: str, ctx: _Ctx, indent_step: str = "  ") -> str:
    if ctx.implicit_key and "\n" in value:
        return _quoted(value, ctx)
    if _PLAIN_BAD.search(value):
        return _quoted(value, ctx) if ctx.implicit_key or "\n" not in value else _block(value, ctx)
    if not ctx.implicit_key and "\n" in value:
        return _block(value, ctx)
    if _DOC_MARKER.search(value):
        if ctx.indent == "":
            return _block(value, replace(ctx, force_block_indent=True))
        if ctx.implicit_key and ctx.indent == indent_step:
            return _quoted(value, ctx)
    text = re.sub(r"\n+", lambda m: m.group(0) + "\n" + ctx.indent, value)
    if _OTHER_TYPE.search(text):
        return _quoted(value, ctx)
    return text if ctx.implicit_key else _fold(text, ctx.indent, "flow", ctx.indent_at_start)


def _string(value: str, ctx: _Ctx) -> str:
    forced = _FORCE_DOUBLE.search(value) or any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    units = _units(value)
    return _double_quoted(units, ctx) if forced else _plain(units, ctx)


# -- nodes --------------------------------------------------------------------------------------------------------

def _scalar(value: Any, ctx: _Ctx) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _js_number(value)
    return _string(str(value), ctx)


def _node(value: Any, ctx: _Ctx) -> str:
    if isinstance(value, dict):
        return _map(value, ctx)
    if isinstance(value, (list, tuple)):
        return _seq(list(value), ctx)
    return _scalar(value, ctx)


def _collection(lines: list[str], indent: str, empty: str) -> str:
    if not lines:
        return empty
    out = lines[0]
    for line in lines[1:]:
        out += f"\n{indent}{line}" if line else "\n"
    return out


def _seq(items: list[Any], ctx: _Ctx) -> str:
    item_ctx = _Ctx(ctx.indent + "  ", False, ctx.indent_at_start, ctx.force_block_indent)
    return _collection(["- " + _node(item, item_ctx) for item in items], ctx.indent, "[]")


def _map(obj: dict[str, Any], ctx: _Ctx) -> str:
    item_ctx = _Ctx(ctx.indent, False, ctx.indent_at_start, ctx.force_block_indent)
    return _collection([_pair(key, obj[key] if key in obj else obj[int(key)], item_ctx) for key in js_keys(obj)],
                       ctx.indent, "{}")


def _pair(key: str, value: Any, ctx: _Ctx) -> str:
    inner = _Ctx(ctx.indent + "  ", True, ctx.indent_at_start, ctx.force_block_indent)
    text = _string(key, inner)
    explicit = len(text) > 1024
    text = f"? {text}\n{ctx.indent}:" if explicit else f"{text}:"
    is_collection = isinstance(value, (dict, list, tuple))
    value_ctx = replace(inner, implicit_key=False,
                        indent_at_start=len(text) + 1 if not explicit and not is_collection else inner.indent_at_start)
    value_text = _node(value, value_ctx)
    gap = " "
    if not explicit and is_collection:
        if "\n" in value_text or len(value) > 0:
            gap = f"\n{value_ctx.indent}"
    elif value_text == "" or value_text.startswith("\n"):
        gap = ""
    return text + gap + value_text


def yaml_stringify(value: Any) -> str:
    """`YAML.stringify(value, {blockQuote: 'literal'})` for a JSON value (dicts, lists, str, int, float, bool,
    None), with its final newline."""
    return _join_units(_node(value, _Ctx())) + "\n"
