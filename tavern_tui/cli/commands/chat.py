"""Provides `tavern chat`: one headless step (say, swipe, continue, impersonate, reply) streamed
to stdout, and the `--preset/--lore/--strategy` selection that `chat` and `preview` bind to a
playthrough (remembered, issue 5 §7)."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TextIO

from tavern_tui.cli.context import open_async_service
from tavern_tui.cli.diagnostics import EXIT_INTERRUPTED, EXIT_OK, refused, step_failed
from tavern_tui.errors import SecretRefused, TavernError

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands
    from tavern_tui.service import Tavern
    from tavern_tui.views import InboxItemView, PlaythroughView


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    """--preset / --lore / --strategy: bound to the playthrough and remembered (issue 5 §7)."""
    parser.add_argument("--preset", metavar="NAME", help="bind this imported preset to the playthrough (remembered)")
    parser.add_argument("--lore", action="append", default=[], metavar="BOOK",
                        help="bind this imported world book to the playthrough (repeatable; remembered)")
    parser.add_argument("--strategy", metavar="NAME",
                        help="apply this assembly strategy (compat, preset-slots-first, projection)")


def add_chat(commands: Commands) -> None:
    """`tavern chat CHARACTER (--say TEXT | --swipe | --continue | --impersonate | --reply | --generate) …`."""
    p_chat = commands.add("chat", cmd_chat, help="send one message and print the streamed reply")
    p_chat.add_argument("character", metavar="CHARACTER",
                        help="character name or id, or a group's name (its members reply in turn)")
    action = p_chat.add_mutually_exclusive_group(required=True)
    action.add_argument("--say", metavar="TEXT", help="what you say")
    action.add_argument("--swipe", action="store_true", help="regenerate the last reply as a new sibling (a swipe)")
    action.add_argument("--continue", dest="continue_", action="store_true", help="extend the last reply")
    action.add_argument("--impersonate", action="store_true", help="have the model write your next line")
    action.add_argument("--reply", action="store_true",
                        help="answer your last line without saying more (e.g. after --impersonate)")
    action.add_argument("--generate", action="store_true",
                        help="let the model speak without new input (an empty chat or after the greeting)")
    which = p_chat.add_mutually_exclusive_group()
    which.add_argument("--new", action="store_true", help="start a new playthrough")
    which.add_argument("--playthrough", type=int, metavar="ID", help="continue this playthrough")
    which.add_argument("--draft", type=int, metavar="DRAFT",
                       help="play this opening draft: --say is its first line (`tavern new` makes one)")
    p_chat.add_argument("--template", metavar="NAME",
                        help="start a new playthrough with this configuration template's selections "
                             "(`tavern template list`); --preset/--lore/--strategy given here win")
    p_chat.add_argument("--steer", action="store_true",
                        help="with --say: while a reply is being written, queue the text as a steer (next step) "
                             "instead of for the next turn")
    p_chat.add_argument("--json", action="store_true",
                        help="print the stored reply as JSON (a group chat: every member's, in \"replies\")")
    p_chat.add_argument("--allow-secrets", action="store_true",
                        help="send a --say text that looks like a key or token anyway (never the configured API key)")
    add_selection_options(p_chat)


def write_notes(notes: list[str], err: TextIO) -> None:
    """The service's notes of what it started or bound ("bound preset …"), one line each on `err`."""
    for note in notes:
        err.write(f"{note}\n")


def apply_selection(tavern: Tavern, args: argparse.Namespace, playthrough_id: int, err: TextIO) -> None:
    """Bind what --preset/--lore/--strategy name (remembered by the playthrough, issue 5 §7) and
    say so on `err` (`PlaythroughService.apply_selection`: every name is looked up first)."""
    write_notes(tavern.playthroughs.apply_selection(playthrough_id, preset=args.preset, lore=args.lore,
                                                    strategy=args.strategy), err)


def _check_template(tavern: Tavern, args: argparse.Namespace) -> None:
    """Refuse `--template` with an existing playthrough or a draft, or naming an unknown template
    (or one whose resources are gone), before anything is created.

    Raises:
        TavernError / NotFound: as said.
    """
    if args.template is None:
        return
    if args.playthrough is not None or args.draft is not None:
        raise TavernError("--template starts a new playthrough; it does not go with --playthrough or --draft "
                          "(`tavern new CHARACTER --template NAME` makes a draft from one)")
    tavern.templates.check(args.template)


QUIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals that stop a streaming `tavern chat` like Ctrl+C: the partial reply is settled first."""


async def _chat(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    for sig in QUIT_SIGNALS:
        loop.add_signal_handler(sig, main.cancel)
    try:
        return await _chat_step(args, out, err)
    finally:
        for sig in QUIT_SIGNALS:
            loop.remove_signal_handler(sig)


async def _chat_step(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    async with open_async_service(args) as tavern:
        if args.say is not None:
            try:  # before a playthrough is created or anything bound
                tavern.playthroughs.check_message(args.say, allow_secrets=args.allow_secrets)
            except SecretRefused as exc:
                return refused(exc, err)
        group_playthrough = _group_playthrough(tavern, args)
        if group_playthrough is not None:  # a group chat: its members reply in turn
            tavern.playthroughs.open_playthrough(group_playthrough)
            apply_selection(tavern, args, group_playthrough, err)
            err.write(f"[{tavern.provider_label}] playthrough {group_playthrough}\n")
            try:
                return await _run_step(tavern, group_playthrough, args, out, err, group=True)
            finally:
                _say_what_is_left(tavern, group_playthrough, err)
        character = tavern.library.find_character(args.character)
        # every name is checked before a playthrough is started or anything bound
        tavern.playthroughs.check_selection(preset=args.preset, lore=args.lore, strategy=args.strategy)
        _check_template(tavern, args)
        started: list[str] = []
        if args.draft is not None:  # the draft's first send: it becomes the playthrough (issue 20 item 1)
            playthrough = _begin_draft(tavern, args, character.id, started)
        else:
            playthrough = tavern.playthroughs.resolve(character.id, playthrough=args.playthrough,
                                                      new=args.new or args.template is not None, notes=started)
        if args.template is not None:  # before --preset/--lore/--strategy, so those win
            started += tavern.templates.apply(args.template, playthrough.id)
        write_notes(started, err)
        tavern.playthroughs.open_playthrough(playthrough.id)
        apply_selection(tavern, args, playthrough.id, err)
        err.write(f"[{tavern.provider_label}] playthrough {playthrough.id}\n")
        try:
            return await _run_step(tavern, playthrough.id, args, out, err)
        finally:
            _say_what_is_left(tavern, playthrough.id, err)


async def _run_step(tavern: Tavern, playthrough_id: int, args: argparse.Namespace, out: TextIO, err: TextIO,
                    *, group: bool = False) -> int:
    """Run the chosen step on `playthrough_id`, streaming its text to `out` (a group chat's
    `--say` and `--generate`: a round, each member's reply after its name)."""
    from tavern_tui.engine.step import StepFailed, StepSettled

    if group and (args.say is not None or args.generate):
        updates = tavern.groups.play_round(playthrough_id, args.say or "", allow_secrets=args.allow_secrets)
    elif args.swipe:
        updates = _named(tavern.steps.regenerate(playthrough_id), args, out) if group else \
            tavern.steps.regenerate(playthrough_id)
    elif args.continue_:
        updates = _named(tavern.steps.continue_reply(playthrough_id), args, out) if group else \
            tavern.steps.continue_reply(playthrough_id)
    elif args.impersonate:
        updates = tavern.steps.impersonate(playthrough_id)
    elif args.reply:
        updates = tavern.steps.reply(playthrough_id)
    elif args.generate:
        updates = tavern.steps.generate(playthrough_id)
    else:
        updates = await _say(tavern, playthrough_id, args, out, err)
        if updates is None:
            return EXIT_OK
    settled: list[StepSettled] = []  # a group round settles one reply per member who spoke
    reasoning = [False]  # whether the last thing written was thinking (on err)
    try:
        async for update in updates:
            if isinstance(update, StepSettled):
                settled.append(update)
            else:
                _write_update(update, args, out, err, reasoning)
    except StepFailed as exc:
        if not args.json:
            out.write("\n")
        return step_failed(exc, err)
    finally:
        for problem in tavern.tools.take_problems():
            err.write(f"[tools] {problem}\n")
    if args.json and settled:
        swipe = tavern.timeline.swipe_state(playthrough_id).label
        replies = [_reply_json(playthrough_id, s.event, swipe if s is settled[-1] else None) for s in settled]
        # A group chat: every member's reply, each with its speaker (the last one's alone lost the rest).
        json.dump({"playthrough": playthrough_id, "replies": replies} if group else replies[-1], out,
                  ensure_ascii=False)
    out.write("\n")
    return EXIT_OK


def _reply_json(playthrough_id: int, event: Any, swipe: str | None) -> dict[str, Any]:
    """A stored reply as `chat --json` prints it; `speaker` is the group member's name it was
    written under (None in a one-character chat); `swipe` is the last reply's "n/m" (None for a
    group round's earlier replies)."""
    from tavern_tui.service.message_views import written_name

    return {"playthrough": playthrough_id, "session_id": event.session_id, "seq": event.seq,
            "role": event.role, "origin": event.origin.value if event.origin else None,
            "speaker": written_name(event.role, event.body), "content": event.content,
            "usage": event.body.get("usage"), "swipe": swipe}


def _write_update(update: Any, args: argparse.Namespace, out: TextIO, err: TextIO, reasoning: list[bool]) -> None:
    """One streamed update: thinking on `err`, text on `out` (not with --json), tool lines on `err`;
    in a group round each member's name before its reply."""
    from tavern_tui.engine.step import ToolResultStored, TurnLimitReached
    from tavern_tui.engine.stream import ReasoningDelta, TextDelta
    from tavern_tui.service.groups import LineQueued, MemberTurn

    if isinstance(update, MemberTurn):
        if not args.json:
            out.write(f"{'' if update.position == 1 else chr(10)}{update.name}: ")
            out.flush()
    elif isinstance(update, LineQueued):
        err.write("nobody replies on their own in this group: your line waits in the inbox until a member is "
                  "asked (`tavern group speak GROUP MEMBER`)\n")
    elif isinstance(update, ReasoningDelta):
        if not reasoning[0]:
            err.write("(thinking) ")
            reasoning[0] = True
        err.write(update.text)
        err.flush()
    elif isinstance(update, TextDelta):
        if reasoning[0]:
            err.write("\n")
            reasoning[0] = False
        if not args.json:
            out.write(update.text)
            out.flush()
    elif isinstance(update, ToolResultStored):  # one compact line per call (issue 19)
        summary = update.outcome.detail.get("summary") or update.outcome.status
        err.write(f"\n[tool] {update.call.name} {summary}\n")
        err.flush()
    elif isinstance(update, TurnLimitReached):
        err.write(f"[tools] {update.message}\n")


async def _named(updates: AsyncIterator[Any], args: argparse.Namespace, out: TextIO) -> AsyncIterator[Any]:
    """A group chat's swipe or continue: the member's name before its reply, as a round prints it."""
    from contextlib import aclosing

    from tavern_tui.engine.step import StepStarted

    async with aclosing(updates) as stream:  # closed with us: a cancel settles the step at once
        async for update in stream:
            if isinstance(update, StepStarted) and update.generation.author_name and not args.json:
                out.write(f"{update.generation.author_name}: ")
                out.flush()
            yield update


def _group_playthrough(tavern: Tavern, args: argparse.Namespace) -> int | None:
    """The group playthrough `tavern chat` plays: `--playthrough ID` when it plays a group, else
    the newest playthrough of the group CHARACTER names when no character has that name (a new
    one with `--new`); None for a one-character chat."""
    from tavern_tui.errors import NotFound

    if args.playthrough is not None:
        return args.playthrough if tavern.groups.group_of(args.playthrough) is not None else None
    try:
        tavern.library.find_character(args.character)
        return None
    except NotFound:
        try:
            group = tavern.groups.group(args.character)
        except NotFound:
            return None  # the character's own error is the one to show
    if args.new or not group.playthroughs:
        return tavern.groups.new_playthrough(group.id).id
    return group.playthroughs[-1]


def _say_what_is_left(tavern: Tavern, playthrough_id: int, err: TextIO) -> None:
    """On the way out: one line on `err` when lines are still queued in the inbox (another
    window's, or ours after a cancel), so nothing is stranded unseen; `tavern inbox` lists them."""
    try:
        left = len(tavern.inbox.pending(playthrough_id))
    except Exception:  # noqa: BLE001 - a failed read must not hide the step's own outcome
        return
    if left:
        err.write(f"{left} queued line{'s' if left != 1 else ''} left for the next step in playthrough "
                  f"{playthrough_id} (`tavern inbox {playthrough_id}` lists them)\n")
        err.flush()


def _begin_draft(tavern: Tavern, args: argparse.Namespace, character_id: int, notes: list[str]) -> PlaythroughView:
    """`--draft D --say TEXT`: the draft's first send prelude (`OpeningService.begin`: checked and
    fitted first, then the playthrough is rooted in one transaction). Raises TavernError when
    the draft is another character's or there is nothing to say."""
    if args.say is None:
        raise TavernError("--draft is played by its first line: give --say TEXT")
    draft = tavern.openings.draft(args.draft)
    if draft.character_id != character_id:
        raise TavernError(f"draft {draft.id} is of {draft.character_name}, not character {character_id}")
    view = tavern.openings.begin(args.draft, args.say, allow_secrets=args.allow_secrets)
    notes.append(f"draft {draft.id} became playthrough {view.id}")
    return view


async def _say(tavern: Tavern, playthrough_id: int, args: argparse.Namespace, out: TextIO,
               err: TextIO) -> AsyncIterator[Any] | None:
    """The updates of `--say` (`StepRunner.send_or_queue`): a send, or, while another process
    streams in this playthrough, the text queued (said on `err`) and its step once that settles.
    None when another window or command claimed it meanwhile (said on `err`): the reply that
    step wrote to it is printed on `out` once it settles."""
    from tavern_tui.service.inbox import ClaimedElsewhere

    def queued(item: InboxItemView) -> None:
        err.write(f"{'steer' if item.steer else 'queued'} #{item.position} (id {item.id}): a reply is being "
                  "written in this playthrough; waiting for it to settle\n")
        err.flush()

    updates = tavern.steps.send_or_queue(playthrough_id, args.say, steer=args.steer,
                                         allow_secrets=args.allow_secrets, queued=queued)
    try:
        first = await anext(updates)
    except ClaimedElsewhere as exc:
        err.write(f"{exc}\n")
        err.flush()
        await _print_reply_elsewhere(tavern, playthrough_id, args, out)
        return None
    return _prepend(first, updates)


async def _print_reply_elsewhere(tavern: Tavern, playthrough_id: int, args: argparse.Namespace, out: TextIO) -> None:
    """The reply another process's step wrote to our queued line, once that step settles: the
    first assistant message after the last user message holding our text (nothing when none)."""
    await tavern.inbox.wait_settled(playthrough_id)
    messages = await asyncio.to_thread(tavern.playthroughs.messages, playthrough_id)
    ours = [n for n, m in enumerate(messages) if m.role == "user" and m.content == args.say]
    if not ours:
        return
    reply = next((m for m in messages[ours[-1] + 1:] if m.role == "assistant"), None)
    if reply is None:
        return
    if args.json:
        json.dump({"playthrough": playthrough_id, "session_id": reply.ref[0], "seq": reply.ref[1],
                   "role": reply.role, "origin": reply.origin, "content": reply.content,
                   "claimed_elsewhere": True}, out, ensure_ascii=False)
    else:
        out.write(reply.content)
    out.write("\n")
    out.flush()


async def _prepend(first: Any, rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
    yield first
    async for update in rest:
        yield update


def cmd_chat(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """One headless step; Ctrl+C, SIGTERM and SIGHUP keep the partial reply as an attempt."""
    try:
        return asyncio.run(_chat(args, out, err))
    except (KeyboardInterrupt, asyncio.CancelledError):
        err.write("\ncancelled; the partial reply is kept\n")
        return EXIT_INTERRUPTED
