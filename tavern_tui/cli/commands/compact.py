"""Provides `tavern compact`: summarise the oldest visible messages of a playthrough into one
summary node (a surface replacement; the originals stay in the log; issue 16 §3)."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, TextIO

from tavern_tui.cli.commands.edit import _ref
from tavern_tui.cli.context import open_service
from tavern_tui.cli.diagnostics import EXIT_OK
from tavern_tui.cli.output import print_json

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands


def add_compact(commands: Commands) -> None:
    """`tavern compact PLAYTHROUGH [--through SESSION:SEQ] [--keep N] [--json]`."""
    p_compact = commands.add("compact", cmd_compact,
                             help="summarise the oldest messages into one summary (the originals stay in the log)")
    p_compact.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_compact.add_argument("--through", type=_ref, metavar="SESSION:SEQ",
                           help="summarise from the oldest visible message through this one")
    p_compact.add_argument("--keep", type=int, metavar="N", help="leave the newest N messages as they are (default 10)")
    p_compact.add_argument("--json", action="store_true")


def cmd_compact(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Ask the model for the summary and record it; prints what it covers and its trace."""
    with open_service(args) as tavern:
        done = asyncio.run(tavern.compaction.compact(args.playthrough, through=args.through, keep=args.keep))
    if args.json:
        return print_json(out, done.to_json())
    first, last = done.targets[0], done.targets[-1]
    out.write(f"summary {done.summary[0]}:{done.summary[1]} replaces {len(done.targets)} visible messages "
              f"({first[0]}:{first[1]} … {last[0]}:{last[1]}; {done.covers} originals)"
              f"{f' in {done.requests} parts' if done.requests > 1 else ''} · trace {done.trace}\n\n"
              f"{done.text}\n")
    return EXIT_OK
