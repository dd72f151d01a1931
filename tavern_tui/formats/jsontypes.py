"""Provides `type_name`: the JSON name of a decoded value, for the formats' error messages."""

from __future__ import annotations

from typing import Any

_NAMES = {bool: "boolean", int: "number", float: "number", str: "string", list: "list", dict: "object"}


def type_name(value: Any) -> str:
    """"null", "boolean", "number", "string", "list" or "object" (else the Python type name)."""
    return "null" if value is None else _NAMES.get(type(value), type(value).__name__)
