"""Provides `type_name` (the JSON name of a decoded value), `load_json_object` and
`loads_bounded`, shared by the formats' readers: every importer decodes JSON through
`loads_bounded`, which bounds nesting depth, string and number sizes and refuses lone UTF-16
surrogates with an error naming the file, the field and the reason (issue 23 item 6)."""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from tavern_tui.errors import FormatError

_NAMES = {bool: "boolean", int: "number", float: "number", str: "string", list: "list", dict: "object"}


def type_name(value: Any) -> str:
    """"null", "boolean", "number", "string", "list" or "object" (else the Python type name)."""
    return "null" if value is None else _NAMES.get(type(value), type(value).__name__)


def load_json_object(data: bytes, file: str) -> dict:
    """Decode a file that must hold one JSON object (a UTF-8 BOM is accepted).

    Raises:
        FormatError: not UTF-8 (names the byte, its offset and line), not JSON (line and
            column), or not an object at the top level.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise FormatError(file, f"not UTF-8 text (bad byte 0x{data[exc.start]:02x} at offset {exc.start}, "
                                f"line {line}); save the file as UTF-8") from None
    try:
        obj = loads_bounded(text, file)
    except json.JSONDecodeError as exc:
        raise FormatError(file, f"not JSON: {json_error(exc)}") from None
    if not isinstance(obj, dict):
        raise FormatError(file, f"top level is a {type_name(obj)}, not an object")
    return obj


def json_error(exc: json.JSONDecodeError, *, line: bool = True) -> str:
    """A JSON syntax error as "<what>: line L column C" (the `json` module's own wording; some of
    its messages end in "at", e.g. "Unterminated string starting at")."""
    return f"{exc.msg}: line {exc.lineno} column {exc.colno}" if line else f"{exc.msg}: column {exc.colno}"


MAX_DEPTH = 100
"""Deepest nesting of lists and objects an import reads (SillyTavern's files nest under 10;
Python's own decoder fails with a RecursionError near 1,000)."""
MAX_STRING = 8 * 1024 * 1024
"""Longest JSON string token an import reads, in characters (a whole embedded card image as
base64 fits)."""
MAX_NUMBER = 40
"""Most characters a JSON number may have: ids of 27 digits pass; 400-digit integers, which
overflow a float, and 4,300-digit ones, which Python refuses to convert, do not."""

_TOKENS = re.compile(r'"(?:[^"\\]++|\\.)*+"|[\[\]{}]')  # a string token, or a bracket: linear
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # a JSON escape of one (\ud800-\udfff)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _number(file: str, where: str, convert: type) -> Any:
    def parse(literal: str) -> Any:
        if len(literal) > MAX_NUMBER:
            raise FormatError(file, f"a number of {len(literal)} characters (more than {MAX_NUMBER}) is not a "
                                    "value tavern-tui reads", where)
        return convert(literal)
    return parse


def loads_bounded(text: str, file: str, where: str = "", *, repairs: list[str] | None = None) -> Any:
    """`json.loads` with bounds: nesting at most `MAX_DEPTH` deep, strings at most `MAX_STRING`
    characters, numbers at most `MAX_NUMBER` characters, and no lone surrogate (`"\\ud800"`,
    which no UTF-8 text can hold) in any string or key.

    A text plainly within the bounds is parsed at once (`_loads_quick`); any other is scanned
    token by token first, which finds the first bound exceeded and its line.

    Args:
        where: the part of the file (e.g. "line 3"), used as the field when no finer one is known.
        repairs: when given, a lone surrogate is repaired instead (replaced by U+FFFD, the
            replacement character, as a UTF-8 decoder does) and a warning naming the field is
            appended here: a chat's cut emoji should not cost the whole chat.

    Raises:
        json.JSONDecodeError: not JSON (callers word it their own way).
        FormatError: a bound is exceeded or a lone surrogate found; names `file`, the field (a
            dotted path such as `entries.5.content`, or the line) and the reason.
    """
    obj = _loads_quick(text)
    quick = obj is not _NOT_CLEARED
    if not quick:
        obj = _loads_scanned(text, file, where)
    # A text `_loads_quick` read encoded as UTF-8, so it holds no surrogate character itself.
    if _SURROGATE_ESCAPE.search(text) is None and (quick or _SURROGATE.search(text) is None):
        return obj  # no surrogate in the text nor escaped in it: none in what it parsed to (skips the walk)
    return _surrogates(obj, file, where, repairs)


def _loads_scanned(text: str, file: str, where: str) -> Any:
    """Check the bounds token by token (raising at the first one exceeded), then parse."""
    depth = 0
    for match in _TOKENS.finditer(text):
        start = match.start()
        char = text[start]
        if char == '"':
            if match.end() - start > MAX_STRING:
                raise FormatError(file, f"a string of {match.end() - start:,} characters (more than "
                                        f"{MAX_STRING:,}) on line {_line_of(text, start)}", where)
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise FormatError(file, f"nested more than {MAX_DEPTH} levels deep (line {_line_of(text, start)})",
                                  where)
        else:
            depth -= 1
    return json.loads(text, parse_int=_number(file, where, int), parse_float=_number(file, where, float))


_NOT_CLEARED = object()
_QUOTES_AND_BRACKETS = bytes(c for c in range(256) if c not in b'"[]{}')  # what `bytes.translate` deletes
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_DIGITS = bytes(48 if 48 <= c <= 57 else 32 for c in range(256))  # digits → "0", the rest → " "
_DIGIT_RUN = -(-(MAX_NUMBER + 1 - 4) // 3)
"""A number longer than MAX_NUMBER has a run of this many digits (13): beside its digits it has
at most 4 characters (`-.e+`), and its digits form at most 3 runs."""


def _loads_quick(text: str) -> Any:
    """`json.loads(text)`, or `_NOT_CLEARED` when the text may break a bound or is not JSON.

    Only JSON that parses is returned, and for such a text the checks here are exact: no string
    token is longer than the text, `_depth` is its nesting, and a number past MAX_NUMBER needs a
    run of `_DIGIT_RUN` digits (then each number's length is checked). They are cheap, and
    whatever is not cleared goes to `_loads_scanned`, which words the error.
    """
    if not isinstance(text, str) or len(text) > MAX_STRING:
        return _NOT_CLEARED
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        return _NOT_CLEARED  # a surrogate character
    if _depth(raw) > MAX_DEPTH:
        return _NOT_CLEARED
    try:
        if b"0" * _DIGIT_RUN in raw.translate(_DIGITS):
            return json.loads(text, parse_int=_short(int), parse_float=_short(float))
        return json.loads(text)
    except (ValueError, RecursionError):  # not JSON (JSONDecodeError), a long number, deep nesting
        return _NOT_CLEARED


def _depth(raw: bytes) -> int:
    """How deep lists and objects nest in `raw`, a JSON text as UTF-8 (exact only if it is valid)."""
    if b'\\"' in raw:  # drop escapes (\\ first): the quotes left are the ones around strings
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(raw.translate(None, _QUOTES_AND_BRACKETS).split(b'"')[::2])  # the ones outside strings
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _short(convert: type) -> Any:
    def parse(literal: str) -> Any:
        if len(literal) > MAX_NUMBER:
            raise ValueError("a number past MAX_NUMBER")
        return convert(literal)
    return parse


def _surrogates(obj: Any, file: str, where: str, repairs: list[str] | None) -> Any:
    """`obj` with no lone surrogate in any string or key: FormatError at the first one, or (with
    `repairs`) each replaced by U+FFFD and noted. Iterative, so no depth can make it recurse."""
    def clean(value: str, path: str) -> str:
        found = _SURROGATE.search(value)
        if found is None:
            return value
        if repairs is None:
            raise FormatError(file, f"holds a lone UTF-16 surrogate \\u{ord(found.group()):04x} at character "
                                    f"{found.start()} (half of an emoji; not a character), so it cannot be stored",
                              path or "(top level)")
        repairs.append(f"{path or '(top level)'}: a lone UTF-16 surrogate (half of an emoji) was replaced by U+FFFD")
        return _SURROGATE.sub("\ufffd", value)

    if isinstance(obj, str):
        return obj if obj.isascii() else clean(obj, where)
    stack: list[tuple[Any, str]] = [(obj, where)]
    while stack:
        container, path = stack.pop()
        if isinstance(container, dict):
            for key, value in list(container.items()):
                sub = f"{path}.{key}" if path else str(key)
                fixed = key if key.isascii() else clean(key, sub)
                if isinstance(value, str):
                    value = value if value.isascii() else clean(value, sub)
                elif isinstance(value, (dict, list)):
                    stack.append((value, sub))
                if fixed != key:
                    del container[key]
                container[fixed] = value
        elif isinstance(container, list):
            for index, value in enumerate(container):
                sub = f"{path}.{index}" if path else str(index)
                if isinstance(value, str):
                    if not value.isascii():
                        container[index] = clean(value, sub)
                elif isinstance(value, (dict, list)):
                    stack.append((value, sub))
    return obj
