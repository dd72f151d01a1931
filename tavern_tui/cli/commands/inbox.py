"""Provides `tavern inbox`: list, queue, edit and cancel a playthrough's pending input (the
durable inbox, DESIGN.md "The inbox").

    tavern inbox PLAYTHROUGH [--json]
    tavern inbox add PLAYTHROUGH --text T [--steer]
    tavern inbox edit PLAYTHROUGH ID --text T
    tavern inbox cancel PLAYTHROUGH ID

(`tavern inbox PLAYTHROUGH` lists, so the group takes words rather than argparse subcommands,
which would read the playthrough number as an unknown subcommand.)
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from tavern_tui.cli.context import open_service
from tavern_tui.cli.diagnostics import EXIT_OK, refused
from tavern_tui.cli.output import print_json, print_rows
from tavern_tui.errors import SecretRefused, TavernError

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands
    from tavern_tui.views import InboxItemView

USAGE = ("tavern inbox PLAYTHROUGH [--json] | inbox add PLAYTHROUGH --text T [--steer] | "
         "inbox edit PLAYTHROUGH ID --text T | inbox cancel PLAYTHROUGH ID")
_ARITY = {"add": 1, "edit": 2, "cancel": 2}


def add_inbox(commands: Commands) -> None:
    """`tavern inbox …` (see the module docstring)."""
    p_inbox = commands.add("inbox", cmd_inbox, usage=USAGE,
                           help="list, queue, edit or cancel input waiting for a playthrough's next step")
    p_inbox.add_argument("words", nargs="+", metavar="[add|edit|cancel] PLAYTHROUGH [ID]",
                         help="PLAYTHROUGH lists its queue; add/edit/cancel change it")
    p_inbox.add_argument("--text", metavar="TEXT", help="the text to queue (add) or the new text (edit)")
    p_inbox.add_argument("--steer", action="store_true",
                         help="add as a steer (next step of the running turn) instead of for the next turn")
    p_inbox.add_argument("--json", action="store_true")
    p_inbox.add_argument("--allow-secrets", action="store_true",
                         help="queue a text that looks like a key or token anyway (never the configured API key)")


def _line(item: InboxItemView) -> str:
    kind = "steer " if item.steer else "queued"
    first, *more = item.text.splitlines() or [""]
    extra = f" (+{len(more)} lines)" if more else ""
    return f"#{item.position} {item.id} {kind} {item.queued_at:%Y-%m-%d %H:%M:%S} {first}{extra}"


def _playthrough(word: str) -> int:
    try:
        return int(word)
    except ValueError:
        raise TavernError(f"PLAYTHROUGH must be a playthrough id (a number), not {word!r}; usage: {USAGE}") from None


def cmd_inbox(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """List or change a playthrough's inbox; every change is one durable `inbox/spliced` event."""
    action, *rest = args.words
    if action not in _ARITY:
        action, rest = "list", args.words
    if len(rest) != _ARITY.get(action, 1):
        raise TavernError(f"wrong number of words for `inbox {action}`; usage: {USAGE}")
    if action in ("add", "edit") and args.text is None:
        raise TavernError(f"`inbox {action}` needs --text TEXT")
    playthrough = _playthrough(rest[0])
    with open_service(args) as tavern:
        try:
            if action == "list":
                return print_rows(out, tavern.inbox.pending(playthrough), as_json=args.json, line=_line,
                                  empty_hint=f"nothing queued in playthrough {playthrough}")
            if action == "add":
                item = tavern.inbox.add(playthrough, args.text, steer=args.steer, allow_secrets=args.allow_secrets)
                verb = "steer" if item.steer else "queued"
            elif action == "edit":
                item = tavern.inbox.edit(playthrough, rest[1], args.text, allow_secrets=args.allow_secrets)
                verb = "edited"
            else:
                item = tavern.inbox.cancel(playthrough, rest[1])
                verb = "canceled"
        except SecretRefused as exc:
            return refused(exc, err)
    if args.json:
        return print_json(out, {**item.to_json(), "done": verb})
    out.write(f"{verb} #{item.position} {item.id}\n")
    return EXIT_OK
