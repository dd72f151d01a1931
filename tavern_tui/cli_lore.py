"""Provides the `tavern lore …` commands: list, bind, unbind and export world books.

    tavern lore list [--json]
    tavern lore bind BOOK (--global | --character NAME | --playthrough ID)
    tavern lore unbind BOOK (--global | --character NAME | --playthrough ID)
    tavern lore export BOOK --out FILE
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

EXIT_OK, EXIT_FAILED = 0, 1


def add_lore_parser(commands: Any) -> None:
    """Register `lore` and its subcommands on the CLI's subparsers."""
    p_lore = commands.add_parser("lore", help="world books: list, bind, unbind, export")
    sub = p_lore.add_subparsers(dest="lore_command", metavar="ACTION", required=True)

    p_list = sub.add_parser("list", help="imported world books and where they are bound")
    p_list.add_argument("--json", action="store_true")

    for action in ("bind", "unbind"):
        p_bind = sub.add_parser(action, help=f"{action} a world book (globally, to a character or a playthrough)")
        p_bind.add_argument("book", metavar="BOOK", help="world book name or id")
        where = p_bind.add_mutually_exclusive_group(required=True)
        where.add_argument("--global", dest="scope_global", action="store_true", help="every chat")
        where.add_argument("--character", metavar="NAME", help="every chat with this character")
        where.add_argument("--playthrough", type=int, metavar="ID", help="this playthrough only (chat lore)")

    p_export = sub.add_parser("export", help="write a world book as SillyTavern World Info JSON")
    p_export.add_argument("book", metavar="BOOK")
    p_export.add_argument("--out", required=True, metavar="FILE")


def _target(tavern: Any, args: argparse.Namespace) -> tuple[str, int | None]:
    if args.scope_global:
        return "global", None
    if args.character:
        return "character", tavern.find_character(args.character).id
    return "playthrough", tavern.playthrough(args.playthrough).id


def cmd_lore(tavern: Any, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run one `tavern lore` action on an open service; returns the exit status."""
    action = args.lore_command
    if action == "list":
        books = tavern.world_books()
        if args.json:
            json.dump([b.to_json() for b in books], out, ensure_ascii=False, indent=2)
            out.write("\n")
        elif not books:
            out.write("no world books yet; import one with `tavern import FILE.json`\n")
        for book in [] if args.json else books:
            bound = f"  bound: {', '.join(book.bindings)}" if book.bindings else ""
            out.write(f"{book.id:>4}  {book.name:<32} {book.entries:>5} entries{bound}\n")
        return EXIT_OK
    if action in ("bind", "unbind"):
        book = tavern.find_world_book(args.book)
        scope, target = _target(tavern, args)
        changed = (tavern.bind_world_book if action == "bind" else tavern.unbind_world_book)(book.id, scope, target)
        where = scope if target is None else f"{scope} {target}"
        verb = {("bind", True): "bound to", ("bind", False): "was already bound to",
                ("unbind", True): "unbound from", ("unbind", False): "was not bound to"}[(action, changed)]
        out.write(f"{book.name} {verb} {where}\n")
        return EXIT_OK
    if action == "export":
        book = tavern.find_world_book(args.book)
        Path(args.out).write_text(json.dumps(tavern.export_world_book(book.id), ensure_ascii=False, indent=2),
                                  encoding="utf-8")
        out.write(f"wrote {book.name} ({book.entries} entries) to {args.out}\n")
        return EXIT_OK
    raise AssertionError(f"unknown lore action {action!r}")  # argparse allows only the ones above
