"""Provides `tavern group`: group chats' casts (SillyTavern's groups).

    tavern group new NAME --member CHARACTER [--member …] [--strategy natural|list|manual|pooled]
                         [--mode swap|join] [--self-responses] [--json]
    tavern group list [--json]
    tavern group show GROUP [--json]
    tavern group add|remove|mute|unmute GROUP CHARACTER
    tavern group strategy GROUP natural|list|manual|pooled
    tavern group speak GROUP MEMBER [--playthrough ID]
    tavern group export GROUP [--out FILE]

GROUP is a group's id or name; CHARACTER a character's id or name. A round is played with
`tavern chat GROUP --say TEXT` (or `--playthrough ID`); `speak` has one member reply now.
`export` writes the SillyTavern group definition (`groups/<id>.json`); `tavern import` reads one,
and `tavern import CHAT.jsonl --group GROUP` a group chat; `tavern export PLAYTHROUGH --jsonl FILE`
writes a group playthrough as a group chat.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, TextIO

from tavern_tui.cli.context import open_async_service, open_service
from tavern_tui.cli.diagnostics import EXIT_OK, step_failed
from tavern_tui.cli.output import print_json, print_rows
from tavern_tui.errors import TavernError

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands
    from tavern_tui.views import GroupView

STRATEGIES = ("natural", "list", "manual", "pooled")


def add_group(commands: Commands) -> None:
    """`tavern group …` (see the module docstring)."""
    p_group = commands.add("group", help="group chats: several characters in one playthrough")
    actions = commands.group(p_group, "group_action", "ACTION")
    p_new = actions.add("new", cmd_group_new, help="make a group and its first playthrough")
    p_new.add_argument("name", metavar="NAME")
    p_new.add_argument("--member", action="append", required=True, metavar="CHARACTER",
                       help="a member (id or name), in speaking order; repeat for each")
    p_new.add_argument("--strategy", choices=STRATEGIES, default="natural",
                       help="who replies to a line (SillyTavern's activation strategy; default natural)")
    p_new.add_argument("--mode", choices=("swap", "join"), default="swap",
                       help="swap: the speaker's card is sent; join: every member's (default swap)")
    p_new.add_argument("--self-responses", action="store_true",
                       help="a member may answer its own reply (natural order)")
    p_new.add_argument("--json", action="store_true")
    p_list = actions.add("list", cmd_group_list, help="list the groups")
    p_list.add_argument("--json", action="store_true")
    p_show = actions.add("show", cmd_group_show, help="a group's members and settings")
    p_show.add_argument("group", metavar="GROUP")
    p_show.add_argument("--json", action="store_true")
    for action, text in (("add", "add a member at the end"), ("remove", "remove a member (its replies stay)"),
                         ("mute", "mute a member: it never replies on its own"), ("unmute", "unmute a member")):
        p_change = actions.add(action, cmd_group_change, help=text)
        p_change.add_argument("group", metavar="GROUP")
        p_change.add_argument("character", metavar="CHARACTER")
    p_strategy = actions.add("strategy", cmd_group_strategy, help="change who replies to a line")
    p_strategy.add_argument("group", metavar="GROUP")
    p_strategy.add_argument("strategy", choices=STRATEGIES)
    p_speak = actions.add("speak", cmd_group_speak,
                          help="one member replies now (a muted one too); lines waiting in the inbox are its input")
    p_speak.add_argument("group", metavar="GROUP")
    p_speak.add_argument("member", metavar="MEMBER", help="the member's name or character id")
    p_speak.add_argument("--playthrough", type=int, metavar="ID",
                         help="which playthrough of the group (default: newest)")
    p_export = actions.add("export", cmd_group_export,
                           help="write the group as a SillyTavern group definition (groups/<id>.json)")
    p_export.add_argument("group", metavar="GROUP")
    p_export.add_argument("--out", metavar="FILE", default="-", help="the file to write ('-', the default: stdout)")


def _describe(group: GroupView) -> str:
    """A group on a few lines: name, settings, then each member."""
    lines = [f"group {group.id} {group.name} · {group.strategy} order · {group.mode} cards"
             + (" · self-responses" if group.allow_self_responses else "")
             + (f" · {'playthroughs' if len(group.playthroughs) > 1 else 'playthrough'} "
                f"#{', #'.join(map(str, group.playthroughs))}" if group.playthroughs else "")]
    for index, member in enumerate(group.members, start=1):
        talk = "0.5 (unset)" if member.talkativeness is None else f"{member.talkativeness:g}"
        lines.append(f"  {index}. {member.name} (character {member.character_id}) talkativeness {talk}"
                     + (" · muted" if member.muted else ""))
    return "\n".join(lines)


def cmd_group_new(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Make the group and its first playthrough; print both."""
    with open_service(args) as tavern:
        group, playthrough = tavern.groups.new_group(args.name, args.member, strategy=args.strategy, mode=args.mode,
                                                     allow_self_responses=args.self_responses)
    if args.json:
        return print_json(out, {"group": group.to_json(), "playthrough": playthrough.to_json()})
    out.write(f"{_describe(group)}\n"
              f"playthrough {playthrough.id}: `tavern chat {group.name!r} --say TEXT` plays a round\n")
    return EXIT_OK


def cmd_group_list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Every group, one line each (or JSON)."""
    with open_service(args) as tavern:
        groups = tavern.groups.groups()
    return print_rows(out, groups, as_json=args.json,
                      line=lambda g: f"{g.id} {g.name} · {', '.join(m.name for m in g.members)} · {g.strategy}",
                      empty_hint="no groups yet; make one with `tavern group new NAME --member CHARACTER …`")


def cmd_group_show(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """One group's members and settings."""
    with open_service(args) as tavern:
        group = tavern.groups.group(args.group)
    if args.json:
        return print_json(out, group.to_json())
    out.write(_describe(group) + "\n")
    return EXIT_OK


def cmd_group_change(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Add, remove, mute or unmute a member; print the group."""
    with open_service(args) as tavern:
        if args.group_action == "add":
            group = tavern.groups.add_member(args.group, args.character)
        elif args.group_action == "remove":
            group = tavern.groups.remove_member(args.group, args.character)
        else:
            muted = args.group_action == "mute"
            already = _already(tavern.groups.group(args.group), tavern.library.find_character(args.character).id,
                               muted)
            if already:
                out.write(already + "\n")
                return EXIT_OK
            group = tavern.groups.set_muted(args.group, args.character, muted)
    out.write(_describe(group) + "\n")
    return EXIT_OK


def _already(group: GroupView, character_id: int, muted: bool) -> str:
    """The one line saying a mute (or unmute) changes nothing, "" when it does (or the character
    is no member: `set_muted` then says so)."""
    member = next((m for m in group.members if m.character_id == character_id), None)
    if member is None or member.muted != muted:
        return ""
    state = "muted already" if muted else "not muted"
    return f"{member.name} is {state} in {group.name!r}: nothing changed"


def cmd_group_strategy(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Change the group's turn order; print the group."""
    with open_service(args) as tavern:
        group = tavern.groups.set_strategy(args.group, args.strategy)
    out.write(_describe(group) + "\n")
    return EXIT_OK


def cmd_group_export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Write the group's SillyTavern definition to `--out` (or stdout); its chats are exported
    one by one with `tavern export PLAYTHROUGH --jsonl FILE`, named as its `chats` list them."""
    with open_service(args) as tavern:
        group = tavern.groups.group(args.group)
        text = tavern.group_files.export_group(group.id)
    if args.out == "-":
        out.write(text + "\n")
        return EXIT_OK
    try:
        with open(args.out, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
    except OSError as exc:
        raise TavernError(f"{args.out}: cannot write the group: {exc.strerror}") from exc
    chats = ", ".join(f"{p} as `group chats/<chat id>.jsonl`" for p in group.playthroughs)
    err.write(f"wrote group {group.name} to {args.out}" + (f"; export its playthroughs {chats}" if chats else "")
              + "\n")
    return EXIT_OK


async def _speak(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from tavern_tui.cli.commands.chat import _write_update
    from tavern_tui.engine.step import StepFailed, StepSettled

    async with open_async_service(args) as tavern:
        group = tavern.groups.group(args.group)
        playthrough = args.playthrough if args.playthrough is not None else (
            group.playthroughs[-1] if group.playthroughs else None)
        if playthrough is None or playthrough not in group.playthroughs:
            raise TavernError(f"playthrough {playthrough} does not play {group.name!r} "
                              f"(its playthroughs: {', '.join(map(str, group.playthroughs)) or 'none'})")
        tavern.playthroughs.open_playthrough(playthrough)
        err.write(f"[{tavern.provider_label}] playthrough {playthrough}\n")
        reasoning = [False]
        args.json = False
        try:
            async for update in tavern.groups.speak(playthrough, args.member):
                if not isinstance(update, StepSettled):
                    _write_update(update, args, out, err, reasoning)
        except StepFailed as exc:
            out.write("\n")
            return step_failed(exc, err)
    out.write("\n")
    return EXIT_OK


def cmd_group_speak(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """One member replies now; its reply streams to `out` after its name."""
    return asyncio.run(_speak(args, out, err))
