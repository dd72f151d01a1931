"""Provides the CLI's writers to stdout: `print_json` for every `--json` option and `print_rows`
for the list commands (sessions, presets, strategies, lore list, trace list, persona history,
nominations, beliefs)."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any, TextIO, TypeVar

from tavern_tui.cli.diagnostics import EXIT_OK

T = TypeVar("T")


def print_json(out: TextIO, value: Any) -> int:
    """Write `value` as indented UTF-8 JSON and a newline; returns `EXIT_OK`."""
    json.dump(value, out, ensure_ascii=False, indent=2)
    out.write("\n")
    return EXIT_OK


def cells(text: str) -> int:
    """The terminal cells `text` takes: two for a wide or full-width character (CJK, per Unicode's
    East Asian Width), none for a combining mark, one otherwise."""
    return sum(0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
               for ch in text)


def ljust(text: str, width: int) -> str:
    """`text` padded with spaces to `width` terminal cells (`cells`), as `f"{text:<width}"` pads
    characters: a CJK name lines up with the others."""
    return text + " " * max(0, width - cells(text))


def _to_json(item: Any) -> Any:
    return item.to_json()


def print_rows(out: TextIO, items: Sequence[T], *, as_json: bool, line: Callable[[T], str],
               empty_hint: str | None = None, to_json: Callable[[T], Any] = _to_json,
               header: str | None = None, sort_key: Callable[[T], Any] | None = None) -> int:
    """Write a list: with `as_json` a JSON list of `to_json(item)` (default `item.to_json()`), in
    the given order; else `empty_hint` when there are no items, or `header` and then one
    `line(item)` per item (each gets its newline; a line may span several), sorted by `sort_key`
    when given. Returns `EXIT_OK`."""
    if as_json:
        return print_json(out, [to_json(item) for item in items])
    if not items:
        if empty_hint is not None:
            out.write(f"{empty_hint}\n")
        return EXIT_OK
    if header is not None:
        out.write(f"{header}\n")
    for item in sorted(items, key=sort_key) if sort_key is not None else items:
        out.write(f"{line(item)}\n")
    return EXIT_OK


def context_line(context: dict[str, Any]) -> str:
    """"context 18,200 / 32,768 tokens (preset) · 240 oldest messages left out, first kept 3:41 ·
    summaries 3:300" (issue 16 §5)."""
    text = f"context {context['used']:,} / {context['limit']:,} tokens ({context.get('source', '?')})"
    if context.get("dropped_messages"):
        text += f" · {context['dropped_messages']} oldest messages left out, first kept {context.get('first_kept')}"
    if context.get("summaries"):
        text += " · summaries " + ", ".join(context["summaries"])
    return text
