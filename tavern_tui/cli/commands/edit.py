"""Provides `tavern edit` and `tavern delete`: surface changes to a message; the original stays
in the log."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from tavern_tui.cli.context import open_service
from tavern_tui.cli.diagnostics import EXIT_OK, refused
from tavern_tui.errors import SecretRefused

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands


def _ref(text: str) -> tuple[int, int]:
    """"12:7" → (12, 7): a message's session and seq."""
    session, _, seq = text.partition(":")
    if not (session.isdigit() and seq.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not SESSION:SEQ (e.g. 12:7, as `tavern tree` prints)")
    return int(session), int(seq)


def add_edit(commands: Commands) -> None:
    """`tavern edit PLAYTHROUGH SESSION:SEQ --text TEXT [--allow-secrets]`."""
    p_edit = commands.add("edit", cmd_edit, help="replace a message's text (the original stays in the log)")
    p_edit.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_edit.add_argument("ref", type=_ref, metavar="SESSION:SEQ",
                        help="the message, as `tavern tree` or `show --json` names it")
    p_edit.add_argument("--text", required=True)
    p_edit.add_argument("--allow-secrets", action="store_true",
                        help="store a text that looks like a key or token anyway (never the configured API key)")


def add_delete(commands: Commands) -> None:
    """`tavern delete PLAYTHROUGH SESSION:SEQ [--to-end]`."""
    p_delete = commands.add("delete", cmd_delete, help="hide a message from the chat (the original stays in the log)")
    p_delete.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_delete.add_argument("ref", type=_ref, metavar="SESSION:SEQ")
    p_delete.add_argument("--to-end", action="store_true", help="also every message after it")
    p_swipe = commands.add("delete-swipe", cmd_delete_swipe,
                           help="delete the shown swipe of the last message, keeping its other swipes")
    p_swipe.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")


def cmd_delete_swipe(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """SillyTavern's "delete swipe": the shown swipe goes, the one before it is shown."""
    with open_service(args) as tavern:
        state = tavern.timeline.delete_swipe(args.playthrough)
    out.write(f"deleted the swipe; now showing {state.label}\n")
    return EXIT_OK


def cmd_edit(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Replace a message's text as a surface replacement."""
    with open_service(args) as tavern:
        try:
            tavern.timeline.edit_message(args.playthrough, args.ref, args.text, allow_secrets=args.allow_secrets)
        except SecretRefused as exc:
            return refused(exc, err)
    out.write(f"edited {args.ref[0]}:{args.ref[1]}\n")
    return EXIT_OK


def cmd_delete(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Hide a message (and with --to-end the rest) from the chat."""
    with open_service(args) as tavern:
        hidden = tavern.timeline.delete_message(args.playthrough, args.ref, to_end=args.to_end)
    out.write(f"hid {hidden} message{'s' if hidden != 1 else ''}\n")
    return EXIT_OK
