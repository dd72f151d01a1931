"""Provides `type_name` (the JSON name of a decoded value) and `load_json_object`, shared by
the formats' readers for their error messages."""

from __future__ import annotations

import json
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
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(file, f"not JSON: {json_error(exc)}") from None
    if not isinstance(obj, dict):
        raise FormatError(file, f"top level is a {type_name(obj)}, not an object")
    return obj


def json_error(exc: json.JSONDecodeError, *, line: bool = True) -> str:
    """A JSON syntax error as "<what>: line L column C" (the `json` module's own wording; some of
    its messages end in "at", e.g. "Unterminated string starting at")."""
    return f"{exc.msg}: line {exc.lineno} column {exc.colno}" if line else f"{exc.msg}: column {exc.colno}"
