"""Provides `tavern rename`, `tavern archive` / `unarchive` and `tavern search`: the chats as a
library (issue 20 item 4). Archiving hides a chat from lists and deletes nothing."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from tavern_tui.cli.context import open_service
from tavern_tui.cli.diagnostics import EXIT_OK
from tavern_tui.cli.output import print_rows

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands
    from tavern_tui.views import SearchResultView


def add_chats(commands: Commands) -> None:
    """`tavern rename P TITLE`, `tavern archive P`, `tavern unarchive P`, `tavern search TEXT …`."""
    p_rename = commands.add("rename", cmd_rename, help="give a chat a title (\"\" for the default one)")
    p_rename.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_rename.add_argument("title", metavar="TITLE")
    for name, run, help_text in (("archive", cmd_archive, "hide a chat from the lists (nothing is deleted)"),
                                 ("unarchive", cmd_unarchive, "bring an archived chat back to the lists")):
        parser = commands.add(name, run, help=help_text)
        parser.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_search = commands.add("search", cmd_search, help="find a line in any chat, on any branch")
    p_search.add_argument("text", metavar="TEXT", help="every word must occur (the last may be the start of one)")
    p_search.add_argument("--character", metavar="C", help="only this character's chats")
    p_search.add_argument("--all", action="store_true", help="archived chats too")
    p_search.add_argument("--limit", type=int, default=50, metavar="N")
    p_search.add_argument("--json", action="store_true")


def cmd_rename(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Rename; print the title now shown."""
    with open_service(args) as tavern:
        view = tavern.playthroughs.rename(args.playthrough, args.title)
    out.write(f"playthrough {view.id}: {view.chat_title}\n")
    return EXIT_OK


def _set_archived(args: argparse.Namespace, out: TextIO, archived: bool) -> int:
    with open_service(args) as tavern:
        view = tavern.playthroughs.archive(args.playthrough, archived)
    out.write(f"playthrough {view.id} ({view.chat_title}) {'archived' if view.archived else 'back in the lists'}\n")
    return EXIT_OK


def cmd_archive(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Archive: hidden from lists and from Enter on its character; nothing is deleted."""
    return _set_archived(args, out, True)


def cmd_unarchive(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Bring an archived chat back."""
    return _set_archived(args, out, False)


def _result_line(hit: SearchResultView) -> str:
    where = "" if hit.on_head else "  (another branch)"
    archived = "  (archived)" if hit.archived else ""
    return (f"#{hit.playthrough_id} {hit.character_name} · {hit.chat_title}{archived}  "
            f"[{hit.ref[0]}:{hit.ref[1]}] {hit.speaker}: {hit.snippet}{where}")


def cmd_search(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print each hit: chat, message ref, speaker, the words around the match."""
    with open_service(args) as tavern:
        hits = tavern.chats.search(args.text, character=args.character, include_archived=args.all,
                                   limit=max(1, args.limit))
    return print_rows(out, hits, as_json=args.json, line=_result_line,
                      empty_hint="nothing found" + ("" if args.all else " (archived chats need --all)"))
