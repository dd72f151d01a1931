"""Provides `tavern ooc on|off|show PLAYTHROUGH`: a playthrough's out-of-character toggle. While it
is on, the roleplay policy (`[roleplay] policy`, the `rp:policy` system section) is not sent."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from tavern_tui.cli.context import open_service
from tavern_tui.cli.diagnostics import EXIT_OK
from tavern_tui.cli.output import print_json

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands


def add_ooc(commands: Commands) -> None:
    """`tavern ooc on|off|show PLAYTHROUGH [--json]`."""
    p_ooc = commands.add("ooc", cmd_ooc, help="out-of-character talk in a playthrough: on (the roleplay policy "
                                              "is not sent), off (roleplay again), or show")
    p_ooc.add_argument("state", choices=("on", "off", "show"), metavar="on|off|show")
    p_ooc.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_ooc.add_argument("--json", action="store_true")


def cmd_ooc(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Set or show the toggle; say whether the policy is sent from the next step."""
    with open_service(args) as tavern:
        tavern.playthroughs.playthrough(args.playthrough)  # NotFound names the playthrough
        changed = False
        if args.state != "show":
            changed = tavern.roleplay.set_ooc(args.playthrough, args.state == "on")
        ooc = tavern.roleplay.ooc(args.playthrough)
        configured = bool(tavern.settings.rp_policy.strip())
    if args.json:
        return print_json(out, {"playthrough": args.playthrough, "ooc": ooc, "changed": changed,
                                "policy_configured": configured, "policy_sent": configured and not ooc})
    state = "on" if ooc else "off"
    was = "" if changed or args.state == "show" else " (already)"
    if not configured:
        sent = "no roleplay policy is configured ([roleplay] policy)"
    else:
        sent = "rp:policy is not sent" if ooc else "rp:policy is sent"
    out.write(f"playthrough {args.playthrough}: out-of-character talk {state}{was}; {sent}\n")
    return EXIT_OK
