"""Provides `tavern character list | archive | unarchive | edit` and `tavern card`: the
characters as a library (issue 20 item 5). Archiving hides a character from the lists and
deletes nothing; an edit is a new revision of the card (the imported file's bytes stay)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tavern_tui.cli.context import open_service
from tavern_tui.cli.diagnostics import EXIT_OK
from tavern_tui.cli.output import print_json, print_rows
from tavern_tui.errors import TavernError
from tavern_tui.views import CARD_LIST_FIELDS, CARD_TEXT_FIELDS, PROMPT_FIELDS

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands
    from tavern_tui.views import CardView, CharacterView


def add_character(commands: Commands) -> None:
    """`tavern character list [--all] [--tag T] [--json]`, `archive C`, `unarchive C`,
    `edit C --set FIELD VALUE… [--file FIELD PATH…] [--revision N]`."""
    from tavern_tui.cli.app import Commands as _Commands

    p_character = commands.add("character", help="characters: list, archive, unarchive, edit the card")
    actions = _Commands.group(p_character, "action", "ACTION")
    p_list = actions.add("list", cmd_list, help="list the characters (archived ones with --all)")
    p_list.add_argument("--all", action="store_true", help="archived ones too (marked)")
    p_list.add_argument("--tag", metavar="T", help="only characters with this tag (case-insensitive)")
    p_list.add_argument("--json", action="store_true")
    for name, run, help_text in (("archive", cmd_archive, "hide a character from the lists (nothing is deleted)"),
                                 ("unarchive", cmd_unarchive, "bring an archived character back to the lists")):
        parser = actions.add(name, run, help=help_text)
        parser.add_argument("character", metavar="CHARACTER", help="id or name")
    p_edit = actions.add("edit", cmd_edit, help="change card fields (a new revision; the imported file stays)")
    p_edit.add_argument("character", metavar="CHARACTER", help="id or name")
    p_edit.add_argument("--set", nargs=2, action="append", default=[], metavar=("FIELD", "VALUE"),
                        help="a text field's new value; tags: comma-separated or a JSON list; "
                             "alternate_greetings: a JSON list")
    p_edit.add_argument("--file", nargs=2, action="append", default=[], metavar=("FIELD", "PATH"),
                        help="a field's new value read from a UTF-8 file")
    p_edit.add_argument("--revision", type=int, metavar="N",
                        help="refuse the edit unless the card is still at revision N")


def add_card(commands: Commands) -> None:
    """`tavern card CHARACTER [--json]`."""
    p_card = commands.add("card", cmd_card, help="print a character's whole card (creator notes: shown, never sent)")
    p_card.add_argument("character", metavar="CHARACTER", help="id or name")
    p_card.add_argument("--json", action="store_true")


def _line(character: CharacterView) -> str:
    tags = f"  [{', '.join(character.tags)}]" if character.tags else ""
    archived = "  (archived)" if character.archived else ""
    revision = f" · revision {character.revision}" if character.revision else ""
    return f"{character.id}: {character.name}{archived}  {character.spec}{revision}{tags}"


def cmd_list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """One line a character: id, name, spec, revision, tags."""
    with open_service(args) as tavern:
        characters = tavern.library.characters(include_archived=args.all)
    if args.tag:
        wanted = args.tag.casefold()
        characters = [c for c in characters if any(t.casefold() == wanted for t in c.tags)]
    return print_rows(out, characters, as_json=args.json, line=_line,
                      empty_hint="no characters" + ("" if args.all else " (archived ones need --all)"))


def _set_archived(args: argparse.Namespace, out: TextIO, archived: bool) -> int:
    with open_service(args) as tavern:
        found = tavern.library.find_character(args.character)
        view = tavern.library.archive_character(found.id, archived)
    out.write(f"character {view.id} ({view.name}) {'archived' if view.archived else 'back in the lists'}\n")
    return EXIT_OK


def cmd_archive(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Archive: hidden from the lists; its card, chats and drafts stay."""
    return _set_archived(args, out, True)


def cmd_unarchive(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Bring an archived character back."""
    return _set_archived(args, out, False)


def _value(field: str, text: str) -> Any:
    """A field's value as typed: text as is; a list field from a JSON list (tags also
    comma-separated)."""
    if field not in CARD_LIST_FIELDS:
        return text
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise TavernError(f"--set {field}: not a JSON list ({exc.msg} at character {exc.pos})") from exc
        return value
    if field == "tags":
        return [t.strip() for t in text.split(",") if t.strip()]
    raise TavernError(f"--set {field}: give a JSON list of texts, e.g. '[\"Hello\", \"Hi\"]'")


def cmd_edit(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Apply every --set/--file as one new revision; print the revision now in use."""
    changes: dict[str, Any] = {}
    for field, text in args.set:
        changes[field] = _value(field, text)
    for field, path in args.file:
        try:
            changes[field] = _value(field, Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise TavernError(f"{path}: cannot read the value of {field}: {exc.strerror}") from exc
    if not changes:
        raise TavernError("nothing to change: give --set FIELD VALUE or --file FIELD PATH "
                          f"(fields: {', '.join((*CARD_TEXT_FIELDS, *CARD_LIST_FIELDS))})")
    with open_service(args) as tavern:
        found = tavern.library.find_character(args.character)
        view = tavern.library.edit_card(found.id, changes, expected_revision=args.revision)
    out.write(f"character {view.id} ({view.name}) is at revision {view.revision}: "
              f"{', '.join(sorted(changes))} changed; playthroughs use it from their next step\n")
    return EXIT_OK


def card_text(card: CardView) -> str:
    """The card as text: a header, then every field under its name (fields that never reach the
    model marked "not sent"), greetings numbered, the book, extensions and revisions."""
    c = card.character
    lines = [f"{c.name} (character {c.id}) · {c.spec} {card.spec_version} · from {c.source_name}"
             + (f" · revision {c.revision}" if c.revision else "") + (" · archived" if c.archived else "")]
    lines.append("tags: " + (", ".join(card.tags) if card.tags else "(none)") + "  (not sent)")
    for field in card.fields:
        if field == "name":
            continue
        mark = "" if field in PROMPT_FIELDS else "  (not sent)"
        value = card.fields[field]
        lines.append(f"\n## {field}{mark}")
        lines.append(value if value else "(empty)")
    for number, greeting in enumerate(card.alternate_greetings, start=2):
        lines.append(f"\n## greeting {number} (alternate_greetings[{number - 2}])")
        lines.append(greeting)
    lines.append("\n## character_book")
    lines.append("(none)" if card.book is None else f"{card.book[0]} · {card.book[1]} entries "
                 "(edit it in the world-book pane, F2)")
    if card.extensions:
        lines.append("\nextensions: " + ", ".join(card.extensions))
    if card.other:
        lines.append("other fields: " + ", ".join(card.other))
    if card.revisions:
        lines.append("revisions: " + ", ".join(f"{r} {why} {at:%Y-%m-%d %H:%M}" for r, why, at in card.revisions))
    return "\n".join(lines)


def cmd_card(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the whole card (or its JSON)."""
    with open_service(args) as tavern:
        found = tavern.library.find_character(args.character)
        card = tavern.library.card_view(found.id)
    if args.json:
        return print_json(out, card.to_json())
    out.write(card_text(card) + "\n")
    return EXIT_OK
