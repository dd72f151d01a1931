"""Provides the `tavern lore …` commands: list, bind, unbind, export and test world books.

    tavern lore list [--json]
    tavern lore bind (BOOK | --id N) (--global | --character NAME | --playthrough ID | --persona [NAME]
                                      | --preset NAME)
    tavern lore unbind (BOOK | --id N) (…the same targets as bind)
    tavern lore export (BOOK | --id N) --out FILE
    tavern lore test BOOK... --input TEXT [--history FILE] [--settings FILE] [--roll N] [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tavern_tui.cli.context import open_service
from tavern_tui.cli.diagnostics import EXIT_OK
from tavern_tui.cli.output import ljust, print_json, print_rows
from tavern_tui.errors import FormatError, TavernError

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands
    from tavern_tui.lore.context import ScanMessage
    from tavern_tui.lore.model import WorldBook
    from tavern_tui.service import Tavern
    from tavern_tui.views import WorldBookView


def add_lore(commands: Commands) -> None:
    """`tavern lore` and its actions."""
    p_lore = commands.add("lore", help="world books: list, bind, unbind, export, test activation")
    sub = commands.group(p_lore, dest="lore_command", metavar="ACTION")

    p_list = sub.add("list", cmd_lore_list, help="imported world books and where they are bound")
    p_list.add_argument("--json", action="store_true")

    for action, run in (("bind", cmd_lore_bind), ("unbind", cmd_lore_unbind)):
        p_bind = sub.add(action, run,
                         help=f"{action} a world book (globally, to a character, a playthrough, a persona or a preset)")
        p_bind.add_argument("book", metavar="BOOK", nargs="?", help="world book name or id")
        p_bind.add_argument("--id", type=int, metavar="N", help="the book with this id (when several share a name)")
        where = p_bind.add_mutually_exclusive_group(required=True)
        where.add_argument("--global", dest="scope_global", action="store_true", help="every chat")
        where.add_argument("--character", metavar="NAME", help="every chat with this character")
        where.add_argument("--playthrough", type=int, metavar="ID", help="this playthrough only (chat lore)")
        where.add_argument("--persona", nargs="?", const="", metavar="NAME",
                           help="a persona's lore (default: the default persona's)")
        where.add_argument("--preset", metavar="NAME", help="every chat that uses this preset (name or id)")

    p_export = sub.add("export", cmd_lore_export, help="write a world book as SillyTavern World Info JSON")
    p_export.add_argument("book", metavar="BOOK", nargs="?")
    p_export.add_argument("--id", type=int, metavar="N", help="the book with this id (when several share a name)")
    p_export.add_argument("--out", required=True, metavar="FILE")

    p_test = sub.add("test", cmd_lore_test, help="show which entries fire for a history and input, and why")
    p_test.add_argument("books", nargs="+", metavar="BOOK",
                        help="world book files, character card files (their own lorebook), or imported names/ids")
    p_test.add_argument("--input", required=True, metavar="TEXT", help="the message being sent")
    p_test.add_argument("--queued", action="append", default=[], metavar="TEXT",
                        help="a line already pending in the inbox, claimed with --input in one batch "
                             "(repeatable, in queue order; scanned as the current input with it)")
    p_test.add_argument("--history", metavar="FILE", help='JSON list of {"name", "role", "text"}, oldest first, '
                                                         'or a SillyTavern chat (.jsonl)')
    p_test.add_argument("--settings", metavar="FILE",
                        help="JSON of SillyTavern world_info_settings keys (world_info_depth, …) and max_context")
    p_test.add_argument("--roll", type=float, metavar="N", help="pin every probability roll to N (0–100)")
    p_test.add_argument("--char", default="Character", metavar="NAME", help="the character's name for {{char}}")
    p_test.add_argument("--user", default="User", metavar="NAME", help="the person's name for {{user}}")
    p_test.add_argument("--json", action="store_true", help="a JSON list of decisions")


def _book_line(book: WorldBookView, label: str) -> str:
    bound = f"  bound: {', '.join(book.bindings)}" if book.bindings else ""
    noun = "entry" if book.entries == 1 else "entries"
    return f"{book.id:>4}  {ljust(label, 32)} {book.entries:>5} {noun}{bound}"


def _book_of(tavern: Tavern, args: argparse.Namespace) -> WorldBookView:
    """The book BOOK or --id N names (an ambiguous name is refused, listing the matches).

    Raises:
        TavernError: neither or both given. NotFound, Ambiguous: as `find_world_book`.
    """
    if (args.book is None) == (args.id is None):
        raise TavernError("name the world book: BOOK (its name or id) or --id N")
    return tavern.lore.find_world_book(str(args.id) if args.id is not None else args.book)


def cmd_lore_list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern lore list`: the books by name (JSON in the service's order); books that share a
    name show their file and id (`views.distinct_labels`)."""
    from tavern_tui.views import distinct_labels

    with open_service(args) as tavern:
        books = tavern.lore.world_books()
    labels = distinct_labels(books)
    return print_rows(out, books, as_json=args.json, line=lambda b: _book_line(b, labels[b.id]),
                      empty_hint="no world books yet; import one with `tavern import FILE.json`",
                      sort_key=lambda b: (b.name.casefold(), b.id))


def _target(tavern: Tavern, args: argparse.Namespace) -> tuple[str, int | None]:
    """The binding scope and target id the --global/--character/--playthrough/--persona/--preset option names."""
    if args.scope_global:
        return "global", None
    if args.character:
        return "character", tavern.library.find_character(args.character).id
    if args.persona is not None:
        return "persona", tavern.persona.find_persona(args.persona or None).id
    if args.preset:
        return "preset", tavern.presets.find_preset(args.preset).id
    return "playthrough", tavern.playthroughs.playthrough(args.playthrough).id


def _bind(args: argparse.Namespace, out: TextIO, bind: bool) -> int:
    with open_service(args) as tavern:
        book = _book_of(tavern, args)
        scope, target = _target(tavern, args)
        if bind:
            changed = tavern.lore.bind_world_book(book.id, scope, target)
        else:
            changed = tavern.lore.unbind_world_book(book.id, scope, target)
    where = scope if target is None else f"{scope} {target}"
    verb = {(True, True): "bound to", (True, False): "was already bound to",
            (False, True): "unbound from", (False, False): "was not bound to"}[(bind, changed)]
    out.write(f"{book.name} {verb} {where}\n")
    return EXIT_OK


def cmd_lore_bind(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern lore bind`: says whether the book was bound already."""
    return _bind(args, out, bind=True)


def cmd_lore_unbind(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern lore unbind`: says whether the book was bound at all."""
    return _bind(args, out, bind=False)


def cmd_lore_export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern lore export`: the book as SillyTavern World Info JSON in --out."""
    with open_service(args) as tavern:
        book = _book_of(tavern, args)
        Path(args.out).write_text(json.dumps(tavern.lore.export_world_book(book.id), ensure_ascii=False, indent=2),
                                  encoding="utf-8")
    out.write(f"wrote {book.name} ({book.entries} entries) to {args.out}\n")
    return EXIT_OK


def _read_json(path: str, what: str) -> Any:
    from tavern_tui.formats.jsontypes import json_error
    try:
        return json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise TavernError(f"{path}: cannot read the {what}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise FormatError(path, f"not JSON: {json_error(exc)}") from exc


def _history(path: str) -> list[ScanMessage]:
    """A scan history: a JSON list of {"name", "role", "text"} (oldest first), or a SillyTavern
    chat (.jsonl), whose hidden `is_system` lines are left out as SillyTavern's scan does."""
    from tavern_tui.formats.chatlog import looks_like_chat_jsonl, parse_chat_jsonl
    from tavern_tui.lore.context import ScanMessage
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise TavernError(f"{path}: cannot read the history: {exc.strerror}") from exc
    if path.lower().endswith(".jsonl") or looks_like_chat_jsonl(raw):
        chat = parse_chat_jsonl(raw, path)
        return [ScanMessage(line.name, line.mes, index + 1)
                for index, line in enumerate(chat.messages) if not line.is_system]
    items = _read_json(path, "history")
    if not isinstance(items, list):
        raise FormatError(path, "must be a JSON list of {\"name\", \"role\", \"text\"} objects, oldest first")
    messages = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise FormatError(path, "needs a \"text\" string", field=f"[{index}]")
        messages.append(ScanMessage(str(item.get("name") or item.get("role") or ""), item["text"], index + 1))
    return messages


def _book(tavern: Tavern, given: str) -> WorldBook:
    """BOOK: a world-book file, a character card file (its embedded `character_book`), or an
    imported book's name or id.

    Raises:
        FormatError: the file is neither, or a card without a book.
    """
    from tavern_tui.formats.cards import parse_card
    from tavern_tui.formats.sniff import CARD, sniff_bytes
    from tavern_tui.formats.worldinfo import from_character_book, parse_world_book
    path = Path(given)
    if path.is_file():
        data = path.read_bytes()
        if sniff_bytes(data) != CARD:
            return parse_world_book(data, given)
        card = parse_card(data, given)
        book = card.data.get("character_book")
        if not isinstance(book, dict):
            raise FormatError(given, f"the card {card.name!r} has no lorebook (character_book)", "character_book")
        return from_character_book(book, given, str(book.get("name") or card.name))
    return tavern.lore.world_book(tavern.lore.find_world_book(given).id)


def cmd_lore_test(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern lore test`: every entry's decision, the fired ones in prompt insertion order."""
    from tavern_tui.assembly.worldinfo import insertion_order
    from tavern_tui.lore.settings import WorldInfoSettings
    with open_service(args) as tavern:
        books = [_book(tavern, given) for given in args.books]
        settings = None
        if args.settings:
            try:
                settings = WorldInfoSettings.from_st(_read_json(args.settings, "settings"))
            except ValueError as exc:
                raise FormatError(args.settings, str(exc)) from exc
        if args.roll is not None and not 0 <= args.roll <= 100:
            raise TavernError(f"--roll must be between 0 and 100, not {args.roll}")
        rng = (lambda: args.roll) if args.roll is not None else None
        messages = _history(args.history) if args.history else []
        result = tavern.lore.test_world_info(books, messages, args.input, settings=settings, rng=rng,
                                             char_name=args.char, user_name=args.user, batch=args.queued)
    ordered = insertion_order(result)
    if args.json:
        return print_json(out, [d.to_json() for d in ordered])
    for d in ordered:
        mark = "fired  " if d.fired else "skipped"
        title = f" ({d.comment})" if d.comment else ""
        place = f"position {int(d.position)}" + (f" depth {d.depth}" if int(d.position) == 4 else "")
        out.write(f"{mark} {d.book}#{d.uid}{title}: {d.reason.value}: {d.detail}  [{place}, order {d.order}]\n")
    out.write(f"{sum(d.fired for d in ordered)} of {len(ordered)} entries fired; "
              f"{result.tokens_used} of {result.budget} budget tokens used"
              f"{' (over budget)' if result.overflowed else ''}\n")
    return EXIT_OK
