"""Provides `tavern new`, `tavern drafts` and `tavern draft show|edit|discard`: opening drafts,
the playthroughs not yet begun (issue 20 item 1). A draft has no session and calls no model;
`tavern chat CHARACTER --draft D --say TEXT` (or Enter in the TUI) plays it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from tavern_tui.cli.context import open_service
from tavern_tui.cli.diagnostics import EXIT_OK
from tavern_tui.cli.output import print_json, print_rows
from tavern_tui.errors import TavernError

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands
    from tavern_tui.views import OpeningView


def _draft_selection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--greeting", type=int, metavar="N",
                        help="which greeting opens it, counted from 1 as the greeting swipes show it: "
                             "1 = the first message, 2… = the alternate greetings")
    parser.add_argument("--preset", metavar="NAME", help="the preset the playthrough will use")
    parser.add_argument("--strategy", metavar="NAME", help="the assembly strategy it will pin (its newest version)")
    parser.add_argument("--lore", action="append", default=None, metavar="BOOK",
                        help="a world book bound as chat lore at the first send (repeatable)")
    parser.add_argument("--persona", metavar="NAME", help="the name {{user}} stands for in it")
    parser.add_argument("--json", action="store_true")


def add_new(commands: Commands) -> None:
    """`tavern new CHARACTER [--greeting N] [--preset P] [--strategy S] [--lore B]… [--persona NAME]
    [--template NAME] [--json]`."""
    p_new = commands.add("new", cmd_new, help="make an opening draft of a character (no session, no model call)")
    p_new.add_argument("character", metavar="CHARACTER", help="character name or id")
    _draft_selection_options(p_new)
    p_new.add_argument("--template", metavar="NAME",
                       help="take the selections not given here from this configuration template")


def add_drafts(commands: Commands) -> None:
    """`tavern drafts [--character C] [--json]` and `tavern draft show|edit|discard D`."""
    p_list = commands.add("drafts", cmd_drafts, help="list opening drafts (playthroughs not begun yet)")
    p_list.add_argument("--character", metavar="C", help="only this character's")
    p_list.add_argument("--json", action="store_true")
    p_draft = commands.add("draft", help="show, edit or discard an opening draft")
    sub = commands.group(p_draft, dest="draft_command", metavar="SUBCOMMAND")
    p_show = sub.add("show", cmd_draft_show, help="the draft and the request its first send would make")
    p_show.add_argument("draft", type=int, metavar="DRAFT")
    p_show.add_argument("--json", action="store_true")
    p_edit = sub.add("edit", cmd_draft_edit, help="change a draft's greeting or selections")
    p_edit.add_argument("draft", type=int, metavar="DRAFT")
    _draft_selection_options(p_edit)
    p_edit.add_argument("--default-preset", action="store_true", help="back to the built-in default preset")
    p_discard = sub.add("discard", cmd_draft_discard, help="remove a draft (nothing else was stored for it)")
    p_discard.add_argument("draft", type=int, metavar="DRAFT")


def draft_line(draft: OpeningView) -> str:
    """One list line: id, character, greeting n/m, strategy, preset, books."""
    greeting = f"greeting {draft.greeting_index + 1}/{draft.greeting_count}" if draft.greeting_count else "no greeting"
    books = f" · lore {', '.join(draft.lore_names)}" if draft.lore_names else ""
    return (f"draft {draft.id:>3}  {draft.character_name} · {greeting} · {draft.strategy} v{draft.strategy_version}"
            f" · preset {draft.preset_name or 'default'} · as {draft.user_name}{books}")


def _write_draft(out: TextIO, draft: OpeningView, as_json: bool) -> int:
    if as_json:
        return print_json(out, draft.to_json())
    out.write(draft_line(draft) + "\n")
    if draft.greeting:
        out.write("\n" + draft.greeting + "\n")
    return EXIT_OK


def _greeting(number: int | None) -> int | None:
    """The service's 0-based greeting index for a person's 1-based `--greeting N` (None: not given).

    Raises:
        TavernError: N below 1.
    """
    if number is None:
        return None
    if number < 1:
        raise TavernError(f"--greeting counts from 1 (1 = the card's first greeting, 2… its alternate greetings), "
                          f"not {number}")
    return number - 1


def cmd_new(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Make a draft and print it; the first `tavern chat C --draft D --say …` plays it."""
    with open_service(args) as tavern:
        draft = tavern.openings.new_draft(args.character, greeting=_greeting(args.greeting), preset=args.preset,
                                          lore=args.lore or (), strategy=args.strategy, persona=args.persona,
                                          template=args.template)
    if not args.json:
        err.write(f"draft {draft.id} made (no session yet); play it with "
                  f"`tavern chat {draft.character_id} --draft {draft.id} --say TEXT`\n")
    return _write_draft(out, draft, args.json)


def cmd_drafts(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """List drafts, most recently changed first."""
    with open_service(args) as tavern:
        character = tavern.library.find_character(args.character).id if args.character else None
        items = tavern.openings.drafts(character)
    return print_rows(out, items, as_json=args.json, line=draft_line,
                      empty_hint="no opening drafts; make one with `tavern new CHARACTER`")


def cmd_draft_show(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The draft and its preview (the request the first send would make, without input)."""
    with open_service(args) as tavern:
        draft = tavern.openings.draft(args.draft)
        preview = tavern.steps.preview_draft(args.draft)
    if args.json:
        return print_json(out, {**draft.to_json(), "preview": preview})
    out.write(draft_line(draft) + "\n")
    out.write(f"PREVIEW (not sent) · strategy {preview['strategy']} · ~{preview['tokens'].get('total', 0):,} tokens\n")
    for message in preview["messages"]:
        out.write(f"\n[{message['role']} · {message['source']}]\n{message['content']}\n")
    return EXIT_OK


def cmd_draft_edit(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Change what is given; print the draft."""
    with open_service(args) as tavern:
        draft = tavern.openings.edit_draft(args.draft, greeting=_greeting(args.greeting), preset=args.preset,
                                           default_preset=args.default_preset, lore=args.lore,
                                           strategy=args.strategy, persona=args.persona)
    return _write_draft(out, draft, args.json)


def cmd_draft_discard(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Remove the draft."""
    with open_service(args) as tavern:
        tavern.openings.discard(args.draft)
    out.write(f"discarded draft {args.draft}\n")
    return EXIT_OK
