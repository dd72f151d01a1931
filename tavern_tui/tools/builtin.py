"""Provides the built-in tools: `roll_dice`, `lore_search` and the MVU state tools `mvu_read` and
`mvu_update`. All are safe (they read nothing outside the playthrough; `mvu_update` changes only
its MVU state, by the rules a reply's update block follows) and off unless enabled (`[tools]
enabled` or `TAVERN_TOOLS`); the state tools are offered only to a playthrough with MVU state.

Rules: `roll_dice` takes dice notation as SillyTavern's `{{roll}}` does (`text.dice`: `NdM`,
`NdM+K`, `dM`); `lore_search` searches the playthrough's effective world books (titles, keys,
contents) and returns the best few entries, bounded in size (issue 19 §2); `mvu_read` returns
the bound MVU snapshot (what `{{get_message_variable::…}}` reads) or one path of it; `mvu_update`
runs MagVarUpdate commands through the same parsing, schema checks and compare-and-set commit as
an update block in a reply (`service.mvu.MvuService.commit_commands`).
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
from tavern_tui.text.names import substitute_names
from tavern_tui.tools import ToolFailed, ToolSpec

ROLL_DICE = "roll_dice"
LORE_SEARCH = "lore_search"
MVU_READ = "mvu_read"
MVU_UPDATE = "mvu_update"
STATE_TOOLS = (MVU_READ, MVU_UPDATE)
"""The state tools: offered only when the playthrough has MVU state."""
BUILTIN_NAMES = (ROLL_DICE, LORE_SEARCH, MVU_READ, MVU_UPDATE)

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
            read when the tool is called, with the names their contents' `{{char}}`/`{{user}}`
            stand for (None: contents as written), as the prompt's world info shows them.
    """

    spec = ToolSpec(LORE_SEARCH, "Search this story's world books (lore) for entries about a name, place or topic. "
                    "Returns the best few entries.",
                    {"type": "object", "properties": {"query": {
                        "type": "string", "minLength": 1, "maxLength": 200,
                        "description": "Words to look for in entry titles, keys and contents"}},
                     "required": ["query"], "additionalProperties": False}, "safe", "builtin")

    def __init__(self, books: Callable[[], Sequence[SourcedBook] | tuple[Sequence[SourcedBook], tuple[str, str]]]
                 ) -> None:
        self.books = books

    async def call(self, arguments: dict[str, Any]) -> tuple[str, str]:
        query = str(arguments.get("query", ""))
        words = {w.lower() for w in _WORD.findall(query)}
        if not words:
            raise ToolFailed("the query has no words to search for")
        scored: list[tuple[int, int, dict[str, Any]]] = []
        position = 0
        found = await asyncio.to_thread(self.books)  # may read the database: off the event loop
        books, names = found if isinstance(found, tuple) else (found, None)

        def shown(text: str) -> str:
            return substitute_names(text, names[0], names[1]) if names is not None else text

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
                        "content": shown(entry.content)[:LORE_ENTRY_CHARS]
                        + ("…" if len(shown(entry.content)) > LORE_ENTRY_CHARS else "")}))
        scored.sort(key=lambda item: (item[0], item[1]))
        best = [item[2] for item in scored[:LORE_RESULTS]]
        titles = ", ".join(e["title"] or "(untitled)" for e in best) or "nothing found"
        return json.dumps({"query": query, "entries": best}, ensure_ascii=False), f"{query!r} → {titles}"


MVU_WHOLE_CHARS = 6000
"""Characters of a whole snapshot `mvu_read` returns at most; a larger one is returned as its
`stat_data` with a note (a cut JSON text would be unreadable)."""


class MvuRead:
    """`mvu_read(path?)`: the playthrough's bound MVU snapshot (`{"stat_data", "schema",
    "display_data", "delta_data", "initialized_lorebooks"}`, as templates and macros read it) as
    JSON (only its `stat_data`, with a note, when over `MVU_WHOLE_CHARS`), or the value at `path`
    in it (lodash path, e.g. `stat_data.理.好感度`; a path not
    starting with one of the snapshot's keys is read inside `stat_data`). A path with no value is a
    `ToolFailed` naming the keys there are.

    Args:
        snapshot: returns the bound snapshot now ({} for none; may read the database: run off
            the event loop).
    """

    spec = ToolSpec(MVU_READ, "Read this story's tracked state (MVU variables). Without a path: the whole "
                    "snapshot (stat_data holds the values). With a path such as stat_data.hero.hp or hero.hp: "
                    "that value.",
                    {"type": "object", "properties": {"path": {
                        "type": "string", "maxLength": 500,
                        "description": "Optional lodash path into the snapshot (e.g. stat_data.hero.hp)"}},
                     "additionalProperties": False}, "safe", "builtin")

    def __init__(self, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.snapshot = snapshot

    async def call(self, arguments: dict[str, Any]) -> tuple[str, str]:
        from tavern_tui.mvu.jsutil import MISSING, lodash_get  # here: config imports this module at start-up

        snapshot = await asyncio.to_thread(self.snapshot)
        if not snapshot:
            raise ToolFailed("this story has no MVU state", "unavailable")
        path = str(arguments.get("path") or "").strip()
        if not path:
            whole = json.dumps(snapshot, ensure_ascii=False)
            if len(whole) <= MVU_WHOLE_CHARS:
                return whole, "the whole snapshot"
            # Too big to send whole (the schema and display copies triple it): the values, and what else to ask.
            values = {"stat_data": snapshot.get("stat_data", {}),
                      "note": "the snapshot is large: only stat_data is shown; read "
                              + ", ".join(sorted(k for k in snapshot if k != "stat_data")) + " by path"}
            return json.dumps(values, ensure_ascii=False), "stat_data (the snapshot is large)"
        inside = path if path.split(".", 1)[0].split("[", 1)[0] in snapshot else f"stat_data.{path}"
        value = lodash_get(snapshot, inside)
        if value is MISSING:
            parent = inside.rsplit(".", 1)[0] if "." in inside else ""
            there = lodash_get(snapshot, parent) if parent else snapshot
            keys = ", ".join(list(there)[:30]) if isinstance(there, dict) else "(not an object)"
            raise ToolFailed(f"no value at {inside!r}; {parent or 'the snapshot'} has: {keys}")
        shown = json.dumps(value, ensure_ascii=False)
        shown = shown if len(shown) <= 60 else shown[:59] + "…"
        return json.dumps({"path": inside, "value": value}, ensure_ascii=False), f"{inside} = {shown}"


class MvuUpdate:
    """`mvu_update(commands)`: MagVarUpdate commands, as an update block in a reply holds them
    (`_.set('path', old?, new);//reason`, `_.add`, `_.insert`, `_.delete`, or a
    `<JSONPatch>[…]</JSONPatch>` block), run and committed by `commit` through the reply's path.
    Returns `{"changes": [{"type", "path", "old", "new", "reason", "display"}]}`. A command MVU
    refuses (schema, type, missing path) is reported as a `ToolFailed` naming each refusal and
    what did change; a text with no command is one too.

    Args:
        commit: runs and commits the text (`MvuService.commit_commands`), returning
            `{"committed", "changes", "refused"}` (may read and write the database: run off the
            event loop).
    """

    spec = ToolSpec(MVU_UPDATE, "Change this story's tracked state (MVU variables) with MVU update commands, as an "
                    "<UpdateVariable> block would: _.set('path', new);//reason, _.add('path', delta);, "
                    "_.insert('path', value);, _.delete('path');. Paths as in stat_data (e.g. hero.hp). The "
                    "state's schema is enforced; refused commands are named in the result.",
                    {"type": "object", "properties": {"commands": {
                        "type": "string", "minLength": 1, "maxLength": 8000,
                        "description": "One or more MVU commands, each ending with ';'"}},
                     "required": ["commands"], "additionalProperties": False}, "safe", "builtin")

    def __init__(self, commit: Callable[[str], dict[str, Any]]) -> None:
        self.commit = commit

    async def call(self, arguments: dict[str, Any]) -> tuple[str, str]:
        text = str(arguments.get("commands") or "")
        done = await asyncio.to_thread(self.commit, text)
        changes, refused = list(done.get("changes") or []), list(done.get("refused") or [])
        shown = "; ".join(f"{c['path']}: {str(c['display']).strip()}" if c.get("display")
                          else f"{c['type']} {c['path']}" for c in changes)
        if refused or not changes:
            why = "; ".join(f"{r['command']} refused: {str(r['reason']).strip()}" for r in refused) or (
                "no MVU command found; write e.g. _.set('hero.hp', 8);//hit by an arrow")
            applied = f" Applied: {shown}." if changes else " Nothing was changed."
            raise ToolFailed(f"{why}.{applied}")
        return json.dumps({"changes": changes}, ensure_ascii=False), shown
