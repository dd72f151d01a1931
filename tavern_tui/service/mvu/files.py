"""Provides the file tools of `tavern mvu …`, which need no store: `card_books`, `init_from_card`,
`parse_text` and `apply_text`.

Rules: `tavern_tui.mvu` (the pure rules: initialisation from a card's [InitVar]
entries and greeting, command parsing, an update applied to a record).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tavern_tui.assembly.macros import MacroContext, substitute_readonly
from tavern_tui.errors import TavernError
from tavern_tui.mvu import (
    InitBook,
    extract_commands,
    generate_schema,
    has_mvu_material,
    initial_record,
    update_variables,
)
from tavern_tui.mvu.jsutil import clone
from tavern_tui.mvu.schema import clean_up_metadata


def card_books(card: Any) -> tuple[list[InitBook], str | None]:
    """A parsed card's embedded book as MVU reads it (its entries' comment and content, in file order), and
    that book's name (the character's primary book)."""
    book = card.data.get("character_book")
    if not isinstance(book, dict):
        return [], None
    name = str(book.get("name") or card.name)
    entries = found if isinstance(found := book.get("entries"), list) else []
    return [InitBook(name, tuple((str(e.get("comment") or ""), str(e.get("content") or ""))
                                 for e in entries if isinstance(e, dict)))], name


def init_from_card(path: Path, greeting: int = 0, *, user: str = "User") -> dict[str, Any]:
    """`tavern mvu init`: the initial record of a card file started on greeting `greeting` (0 = `first_mes`,
    n = `alternate_greetings[n-1]`, SillyTavern's swipe order), macros expanded with `user` and the card's name.

    Returns:
        `{"card", "greeting", "record" (None: no MVU material), "changes", "refused", "errors"}`.

    Raises:
        TavernError: the file cannot be read as a card, or no such greeting.
    """
    from tavern_tui.formats.cards import parse_card

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TavernError(f"{path}: cannot read: {exc}") from None
    card = parse_card(data, str(path))
    greetings = [card.data.get("first_mes") or "", *(card.data.get("alternate_greetings") or [])]
    if not 0 <= greeting < len(greetings):
        raise TavernError(f"{path}: no greeting {greeting} (the card has {len(greetings)}: 0 to {len(greetings) - 1})")
    books, primary = card_books(card)
    macros = MacroContext(user=user, char=card.name)
    result = None
    if has_mvu_material(books, [str(g) for g in greetings]):
        result = initial_record(books, str(greetings[greeting]), primary_book=primary,
                                substitute=lambda text: substitute_readonly(text, macros), check_material=False)
    return {"card": card.name, "greeting": greeting, "record": result.record if result else None,
            "changes": [c.to_json() for c in result.greeting.changes] if result and result.greeting else [],
            "refused": [r.to_json() for r in result.greeting.refused] if result and result.greeting else [],
            "errors": list(result.errors) if result else []}


def parse_text(text: str) -> list[dict[str, Any]]:
    """`tavern mvu parse`: the commands found in a reply text, in order: `{"type", "path", "args", "reason"}`
    (names as written; `path` as the command will use it)."""
    return [c.to_json() for c in extract_commands(text)]


def apply_text(state: Any, text: str) -> dict[str, Any]:
    """`tavern mvu apply`: a reply text applied to a record `{stat_data, schema, …}`.

    Returns:
        `{"record", "changed", "changes", "refused"}`.

    Raises:
        TavernError: `state` is not an object with `stat_data` (MVU state needs `stat_data` and `schema`;
            a missing schema is generated from the data, as initialisation would).
    """
    if not isinstance(state, dict) or not isinstance(state.get("stat_data"), dict):
        raise TavernError("the state must be a JSON object with a stat_data object ({\"stat_data\": {…}, "
                          "\"schema\": {…}})")
    record = clone(state)
    if not isinstance(record.get("schema"), dict):  # as initialisation does: schema from the marks, then clean
        record["schema"] = generate_schema(clone(record["stat_data"]))
        clean_up_metadata(record["stat_data"])
    outcome = update_variables(text, record)
    return {"record": outcome.record, "changed": outcome.changed, "changes": [c.to_json() for c in outcome.changes],
            "refused": [r.to_json() for r in outcome.refused]}
