"""MVU initialisation: the first record from `[InitVar]` world-info entries and the greeting.

Rules: MagVarUpdate src/function/initvar/variable_init.ts (semantics file §9): `initCheck` :21-217,
`loadInitVarData` :242-310, `createEmptyGameData`; `correctlyMerge` (util/common.ts:6-8). A book is marked
initialised before it is parsed (a parse error still marks it and adds nothing); an entry counts when its
comment, lower-cased, contains `[initvar]`, enabled or not; its content is unwrapped from `<initvar>` and a
``` fence, macro-substituted and read with `parse_string`; a book's entries deep-merge in order (arrays
replaced); a book's data goes under the record's (`{...book, ...stat_data}`: the keys already there win).
A greeting's `<initvar>` blocks replace `stat_data`, then its commands run (`update_variables`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tavern_tui.mvu.jsutil import clone, lodash_has, lodash_merge
from tavern_tui.mvu.schema import ROOT_FLAGS, clean_up_metadata, generate_schema
from tavern_tui.mvu.update import UpdateOutcome, update_variables
from tavern_tui.mvu.values import ParseError, parse_string

__all__ = ["InitBook", "InitResult", "empty_record", "has_mvu_material", "initial_record", "initvar_entries",
           "load_initvar"]


@dataclass(frozen=True, slots=True)
class InitBook:
    """A world book as initialisation reads it: its name and its entries' `(comment, content)` in book order."""

    name: str
    entries: tuple[tuple[str, str], ...]


@dataclass
class InitResult:
    """The first record and what made it: `errors` name each entry or block that did not parse; `greeting` is
    the greeting's own update (its commands), None when it had none to run."""

    record: dict[str, Any]
    errors: list[str] = field(default_factory=list)
    greeting: UpdateOutcome | None = None


def empty_record() -> dict[str, Any]:
    """`createEmptyGameData()`."""
    return {"display_data": {}, "initialized_lorebooks": {}, "stat_data": {}, "delta_data": {},
            "schema": {"type": "object", "properties": {}}}


# MVU's pattern is wrapped in `[^\n]*` on both sides; only group 1 is read, which those leave unchanged,
# and without them a search starts only at `<initvar>` (a 30 kB line without one took 2 s).
_XML = re.compile(r"<initvar>[^\n\r\u2028\u2029]*\n([\s\S]*)\n[^\n\r\u2028\u2029]*</initvar>")
_FENCE = re.compile(r"```[^\n\r\u2028\u2029]*\n([\s\S]*)\n```")
_GREETING_BLOCK = re.compile(r"<(initvar)>(?:\s*```[^\n\r\u2028\u2029]*)?([\s\S]*?)(?:```\s*)?</\1>", re.IGNORECASE)


def initvar_entries(book: InitBook) -> list[tuple[str, str]]:
    """The book's `[InitVar]` entries (comment contains it, case-insensitive; disabled ones included)."""
    return [(comment, content) for comment, content in book.entries if "[initvar]" in (comment or "").lower()]


def has_mvu_material(books: Sequence[InitBook], greetings: Sequence[str]) -> bool:
    """Whether a card carries MVU state at all: an `[InitVar]` entry in its books or a greeting `<initvar>`
    block. Without either, no record is ever made (issue 18: no MVU material, no state)."""
    return any(initvar_entries(b) for b in books) or any(_GREETING_BLOCK.search(g or "") for g in greetings)


def _unwrap(content: str) -> str:
    m = _XML.search(content.strip())
    if m:
        content = m.group(1)
    m = _FENCE.search(content.strip())
    if m:
        content = m.group(1)
    return content


def load_initvar(record: dict[str, Any], books: Sequence[InitBook], substitute: Callable[[str], str] | None = None,
                 errors: list[str] | None = None) -> bool:
    """`loadInitVarData`: merge every not-yet-initialised book's `[InitVar]` data into `record` in place.
    Returns whether any book was initialised now."""
    substitute = substitute or (lambda text: text)
    if not isinstance(record.get("initialized_lorebooks"), dict):
        record["initialized_lorebooks"] = {}
    updated = False
    for book in books:
        if book.name in record["initialized_lorebooks"]:
            continue
        record["initialized_lorebooks"][book.name] = []
        merged: dict[str, Any] = {}
        try:
            for comment, content in initvar_entries(book):
                try:
                    data = parse_string(substitute(_unwrap(content)))
                except ParseError as exc:
                    raise ParseError(f"world book {book.name!r}, entry {comment!r}: {exc}") from exc
                if data:
                    if isinstance(data, dict):
                        lodash_merge(merged, data, arrays_replace=True)
        except ParseError as exc:
            if errors is not None:
                errors.append(str(exc))
            continue
        stat = record.get("stat_data") if isinstance(record.get("stat_data"), dict) else {}
        record["stat_data"] = {**merged, **stat}
        updated = True
    return updated


def _schema_from_data(record: dict[str, Any]) -> None:
    generated = generate_schema(clone(record["stat_data"]), record.get("schema"))
    if generated.get("type") == "object":
        for flag in ROOT_FLAGS:
            if lodash_has(record["stat_data"], ["$meta", flag]):
                generated[flag] = record["stat_data"]["$meta"][flag]
        record["schema"] = generated
    clean_up_metadata(record["stat_data"])


def initial_record(books: Sequence[InitBook], greeting: str, *, primary_book: str | None = None,
                   substitute: Callable[[str], str] | None = None, check_material: bool = True) -> InitResult | None:
    """The record a chat holding only its greeting starts from (`initCheck` at message 0), or None when the
    card has no MVU material (`has_mvu_material`).

    Args:
        books: the enabled books in MVU's order (global selected books, the character's primary, additional).
        greeting: the greeting shown (its `<initvar>` blocks and commands apply to it).
        primary_book: the character's own book's name (kept initialised when a greeting `<initvar>` resets).
        substitute: the macro expansion for contents and the greeting.
        check_material: return None when `books` and `greeting` carry no MVU material (False: the caller
            checked it on every greeting of the card).
    """
    if check_material and not has_mvu_material(books, [greeting]):
        return None
    errors: list[str] = []
    record = empty_record()
    updated = load_initvar(record, books, substitute, errors)
    if updated or not record.get("schema"):
        _schema_from_data(record)
    current = lodash_merge({}, clone(record), arrays_replace=True)
    override: dict[str, Any] = {}
    applied = False
    for m in _GREETING_BLOCK.finditer(greeting):
        try:
            data = parse_string((substitute or (lambda t: t))(m.group(2)))
        except ParseError as exc:
            errors.append(f"the greeting's <initvar> block: {exc}")
            continue
        if isinstance(data, dict):
            lodash_merge(override, data, arrays_replace=True)
        applied = True
    if applied:
        current["stat_data"] = override
        current["initialized_lorebooks"] = {primary_book or "unknown": []}
        load_initvar(current, books, substitute, errors)
    outcome = update_variables(greeting, current, substitute=substitute)
    return InitResult(outcome.record, errors, outcome)
