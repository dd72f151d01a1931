"""Provides `print_json`, the one way the CLI's `--json` options write their output."""

from __future__ import annotations

import json
from typing import Any, TextIO


def print_json(out: TextIO, value: Any) -> int:
    """Write `value` as indented UTF-8 JSON and a newline; returns exit status 0."""
    json.dump(value, out, ensure_ascii=False, indent=2)
    out.write("\n")
    return 0
