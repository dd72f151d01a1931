"""Asking a group member to speak in any terminal: alt+N reaches no app in
tmux (it arrives as Esc then N), so ctrl+b opens a picker of the unmuted members, numbered as the
member strip numbers them, the next speaker highlighted; Enter has that member reply. ctrl+b while
a round runs says why nothing opens. The help lists alt+N only for the group's members. A new
group chat shows every member's greeting under its member's name and colour (SillyTavern
`getGroupChat` posts each member's first message, in member order)."""

from __future__ import annotations

from textual.widgets import OptionList

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.choose import ChooseScreen
from tavern_tui.tui.screens.group_round import ROUND_RUNNING
from tavern_tui.tui.screens.help import HelpScreen
from tests.tui.conftest import GATE, ScriptedProvider, wait_until, workers_idle
from tests.tui.test_group_chat import SIZE, _replies, _system, open_group
from tests.tui.test_help_new_keys import _help_text, _listed


def _hall(tavern: Tavern, strategy: str) -> None:
    tavern.groups.new_group("Hall", ["Seraphina", "Shodan", "Coding Sensei"], strategy=strategy)


async def _picker(pilot) -> tuple[list[str], int | None]:  # type: ignore[no-untyped-def]
    """ctrl+b, wait for the picker: (its labels, the highlighted one)."""
    await pilot.press("ctrl+b")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChooseScreen) and pilot.app.screen.is_mounted)
    options = pilot.app.screen.query_one(OptionList)
    await wait_until(pilot, lambda: options.highlighted is not None)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)], options.highlighted


async def test_every_members_greeting_opens_the_chat_under_its_name(corpus_tavern: Tavern) -> None:
    _hall(corpus_tavern, "list")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot, "Hall")
        greetings = [(b.view.speaker, next(c for c in b.classes if c.startswith("member-")))
                     for b in chat.transcript.boxes if b.view is not None and b.view.source == "opening"]
        assert greetings == [("Seraphina", "member-1"), ("Shodan", "member-2"), ("Coding Sensei", "member-3")]


async def test_ctrl_b_lists_the_unmuted_members_and_enter_has_one_speak(corpus_tavern: Tavern,
                                                                        scripted: ScriptedProvider) -> None:
    _hall(corpus_tavern, "manual")
    corpus_tavern.groups.set_muted("Hall", "Shodan", True)
    scripted.enqueue("I am here.")
    scripted.enqueue("Let us write some code.")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot, "Hall")
        labels, highlighted = await _picker(pilot)
        # Shodan (member 2) is muted: not offered. The newest message is Coding Sensei's greeting,
        # so the member after it, wrapping round, is highlighted: Seraphina.
        assert (labels, highlighted) == (["1 · Seraphina", "3 · Coding Sensei"], 0)
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(_replies(chat)) == 1 and not chat.generating)
        await workers_idle(pilot)
        assert _replies(chat) == [("Seraphina", "member-1", "I am here.")]
        # Seraphina spoke last: the next unmuted member after her is Coding Sensei.
        labels, highlighted = await _picker(pilot)
        assert (labels, highlighted) == (["1 · Seraphina", "3 · Coding Sensei"], 1)
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(_replies(chat)) == 2 and not chat.generating)
        await workers_idle(pilot)
        assert _replies(chat)[-1] == ("Coding Sensei", "member-3", "Let us write some code.")
        assert "Write Coding Sensei's next reply" in _system(scripted.requests[-1])
        assert chat.prompt.value == ""


async def test_the_picker_highlights_the_turn_orders_next_speaker(corpus_tavern: Tavern) -> None:
    _hall(corpus_tavern, "list")
    corpus_tavern.groups.set_muted("Hall", "Seraphina", True)
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        await open_group(pilot, "Hall")
        await wait_until(pilot, lambda: "next: Shodan, Coding Sensei" in pilot.app.screen.members.text())
        # List order: every unmuted member in the group's order, so Shodan is next.
        assert await _picker(pilot) == (["2 · Shodan", "3 · Coding Sensei"], 0)
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(pilot.app.screen, ChooseScreen))


async def test_ctrl_b_while_a_round_runs_says_so(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    _hall(corpus_tavern, "list")
    scripted.enqueue("The forest ", GATE, "is quiet.")
    scripted.enqueue("Insect.")
    scripted.enqueue("Hello.")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot, "Hall")
        await pilot.press(*"Hi.")
        await pilot.press("enter")
        await wait_until(pilot, lambda: chat._reply is not None and "The forest" in chat._reply.text)
        await pilot.press("ctrl+b")
        await wait_until(pilot, lambda: any(n.message == ROUND_RUNNING for n in pilot.app._notifications))
        assert not isinstance(pilot.app.screen, ChooseScreen)
        scripted.gate.set()
        await wait_until(pilot, lambda: len(_replies(chat)) == 3 and not chat.generating)
        await workers_idle(pilot)


async def test_the_help_lists_alt_n_only_for_the_groups_members(corpus_tavern: Tavern) -> None:
    corpus_tavern.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy="list")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot)
        listed = _listed(chat)
        assert (listed["chat.group_speak_1"], listed["chat.group_speak_2"]) == ("alt+1", "alt+2")
        assert not any(f"chat.group_speak_{n}" in listed for n in range(3, 10))
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, HelpScreen) and pilot.app.screen.is_mounted)
        shown = await _help_text(pilot)
        assert "chat.group_speak_2" in shown and "alt+2" in shown
        assert not any(f"alt+{n}" in shown for n in range(3, 10))
