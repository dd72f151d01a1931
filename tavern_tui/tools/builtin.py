"""Provides the built-in tools: `roll_dice` and `lore_search`. Both are safe (they read nothing
outside the playthrough and change nothing) and off unless enabled (`[tools] enabled` or
`TAVERN_TOOLS`).

Rules: `roll_dice` takes dice notation as SillyTavern's `{{roll}}` does (`text.dice`: `NdM`,
`NdM+K`, `dM`); `lore_search` searches the playthrough's effective world books (titles, keys,
contents) and returns the best few entries, bounded in size (issue 19 §2).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from tavern_tui.lore.context import SourcedBook
from tavern_tui.text.dice import MAX_DICE, MAX_SIDES, parse_dice
from tavern_tui.tools import ToolFailed, ToolSpec

ROLL_DICE = "roll_dice"
LORE_SEARCH = "lore_search"
BUILTIN_NAMES = (ROLL_DICE, LORE_SEARCH)

LORE_RESULTS = 3
"""Entries `lore_search` returns at most."""

LORE_ENTRY_CHARS = 1200
"""Characters of one entry's content `lore_search` returns at most."""


def dice_summary(expression: str, rolls: Sequence[int], bonus: int, total: int) -> str:
    """The one-line form: `2d6+1 → [3, 5] + 1 = 9` (no constant part when it is 0)."""
    extra = f" + {bonus}" if bonus > 0 else f" - {-bonus}" if bonus < 0 else ""
    return f"{expression} → [{', '.join(str(r) for r in rolls)}]{extra} = {total}"


SEED_MAX = 2**53 - 1
"""Largest `seed` `roll_dice` takes (JSON's safe integers)."""


class RollDice:
    """`roll_dice(expression, seed?)`: rolls droll notation; returns `{"expression", "rolls",
    "bonus", "total"}` (and `seed` when one was given) as JSON. A bad expression is a
    `ToolFailed` the model reads, not an exception of ours.

    Each die is `1 + floor(r * sides)` for a float `r` in [0, 1) (`text.dice`, as droll and
    `{{roll}}` take `Math.random()`). With `seed`, the floats come from `random.Random(seed)`,
    so the same call always rolls the same (a replayable roll; ours, not SillyTavern's).

    Args:
        rand: floats in [0, 1) when no seed is given (injectable for tests).
    """

    spec = ToolSpec(ROLL_DICE, "Roll dice for the story, as SillyTavern's {{roll}} does. Returns each die and the "
                    "total as JSON.",
                    {"type": "object", "properties": {"expression": {
                        "type": "string", "description": "Dice notation: NdM, NdM+K, NdM-K or dM (e.g. 2d6+1, d20)"},
                        "seed": {"type": "integer", "minimum": 0, "maximum": SEED_MAX,
                                 "description": "Optional: the same seed always gives the same roll"}},
                     "required": ["expression"], "additionalProperties": False}, "safe", "builtin")

    def __init__(self, rand: Callable[[], float] = random.random) -> None:
        self.rand = rand

    async def call(self, arguments: dict[str, Any]) -> tuple[str, str]:
        expression = str(arguments.get("expression", "")).strip()
        dice = parse_dice(expression)
        if dice is None:
            raise ToolFailed(f"{expression!r} is not dice notation: use NdM, NdM+K, NdM-K or dM "
                             f"(at most {MAX_DICE} dice of at most {MAX_SIDES} sides)")
        seed = arguments.get("seed")
        rand = random.Random(seed).random if isinstance(seed, int) else self.rand
        rolls = dice.roll(rand)
        total = sum(rolls) + dice.bonus
        result: dict[str, Any] = {"expression": expression, "rolls": rolls, "bonus": dice.bonus, "total": total}
        if isinstance(seed, int):
            result["seed"] = seed
        return json.dumps(result), dice_summary(expression, rolls, dice.bonus, total)


_WORD = re.compile(r"\w+", re.UNICODE)


class LoreSearch:
    """`lore_search(query)`: the playthrough's effective world books searched by title
    (`comment`), keys and content; the best `LORE_RESULTS` entries, each content cut to
    `LORE_ENTRY_CHARS`. Scoring (ours): per query word, 3 for a title hit, 2 for a key hit, 1 for
    a content hit; disabled entries are skipped; ties keep book order.

    Args:
        books: returns the playthrough's effective books (`WorldInfoService.effective_books`),
            read when the tool is called.
    """

    spec = ToolSpec(LORE_SEARCH, "Search this story's world books (lore) for entries about a name, place or topic. "
                    "Returns the best few entries.",
                    {"type": "object", "properties": {"query": {
                        "type": "string", "minLength": 1, "maxLength": 200,
                        "description": "Words to look for in entry titles, keys and contents"}},
                     "required": ["query"], "additionalProperties": False}, "safe", "builtin")

    def __init__(self, books: Callable[[], Sequence[SourcedBook]]) -> None:
        self.books = books

    async def call(self, arguments: dict[str, Any]) -> tuple[str, str]:
        query = str(arguments.get("query", ""))
        words = {w.lower() for w in _WORD.findall(query)}
        if not words:
            raise ToolFailed("the query has no words to search for")
        scored: list[tuple[int, int, dict[str, Any]]] = []
        position = 0
        books = await asyncio.to_thread(self.books)  # may read the database: off the event loop
        for sourced in books:
            for entry in sourced.book.entries:
                if entry.disable:
                    continue
                position += 1
                title = {w.lower() for w in _WORD.findall(entry.comment)}
                keys = {w.lower() for k in entry.key + entry.keysecondary for w in _WORD.findall(k)}
                content = {w.lower() for w in _WORD.findall(entry.content)}
                score = sum(3 * (w in title) + 2 * (w in keys) + (w in content) for w in words)
                if score:
                    scored.append((-score, position, {
                        "book": sourced.book.name, "title": entry.comment, "keys": list(entry.key),
                        "content": entry.content[:LORE_ENTRY_CHARS]
                        + ("…" if len(entry.content) > LORE_ENTRY_CHARS else "")}))
        scored.sort(key=lambda item: (item[0], item[1]))
        best = [item[2] for item in scored[:LORE_RESULTS]]
        titles = ", ".join(e["title"] or "(untitled)" for e in best) or "nothing found"
        return json.dumps({"query": query, "entries": best}, ensure_ascii=False), f"{query!r} → {titles}"
