"""Asking a group member to speak in any terminal: inside tmux alt+N types a character instead
(tmux sends it as Esc then N), so ctrl+b opens a picker of every member, numbered as the
member strip numbers them, muted ones marked "(muted)", the next unmuted speaker highlighted;
Enter has the chosen member reply, a muted one too (SillyTavern lets a muted member be forced to
speak). ctrl+b while a round runs says why nothing opens. The help lists alt+N only for the
group's members. A new group chat shows every member's greeting under its member's name and
colour (SillyTavern `getGroupChat` posts each member's first message, in member order)."""

from __future__ import annotations

from textual.widgets import OptionList

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.choose import ChooseScreen
from tavern_tui.tui.screens.group_round import ROUND_RUNNING, next_choice
from tavern_tui.tui.screens.help import HelpScreen
from tavern_tui.views import GroupMemberView
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


async def test_ctrl_b_lists_every_member_and_enter_has_one_speak(corpus_tavern: Tavern,
                                                                 scripted: ScriptedProvider) -> None:
    _hall(corpus_tavern, "manual")
    corpus_tavern.groups.set_muted("Hall", "Shodan", True)
    scripted.enqueue("I am here.")
    scripted.enqueue("Let us write some code.")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot, "Hall")
        labels, highlighted = await _picker(pilot)
        # Shodan (member 2) is muted: listed and marked, never highlighted. The newest message is
        # Coding Sensei's greeting, so the unmuted member after it, wrapping round, is: Seraphina.
        assert (labels, highlighted) == (["1 · Seraphina", "2 · Shodan (muted)", "3 · Coding Sensei"], 0)
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(_replies(chat)) == 1 and not chat.generating)
        await workers_idle(pilot)
        assert _replies(chat) == [("Seraphina", "member-1", "I am here.")]
        # Seraphina spoke last: the next unmuted member after her is Coding Sensei (Shodan skipped).
        labels, highlighted = await _picker(pilot)
        assert (labels, highlighted) == (["1 · Seraphina", "2 · Shodan (muted)", "3 · Coding Sensei"], 2)
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(_replies(chat)) == 2 and not chat.generating)
        await workers_idle(pilot)
        assert _replies(chat)[-1] == ("Coding Sensei", "member-3", "Let us write some code.")
        assert "Write Coding Sensei's next reply" in _system(scripted.requests[-1])
        assert chat.prompt.value == ""


async def test_ctrl_b_forces_a_muted_member_to_speak(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    _hall(corpus_tavern, "list")
    corpus_tavern.groups.set_muted("Hall", "Shodan", True)
    scripted.enqueue("Insect. You summoned me.")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot, "Hall")
        await wait_until(pilot, lambda: "next: Seraphina, Coding Sensei" in chat.members.text())
        labels, highlighted = await _picker(pilot)
        assert (labels, highlighted) == (["1 · Seraphina", "2 · Shodan (muted)", "3 · Coding Sensei"], 0)
        await pilot.press("down", "enter")  # past the highlighted next speaker, onto the muted Shodan
        await wait_until(pilot, lambda: len(_replies(chat)) == 1 and not chat.generating)
        await workers_idle(pilot)
        assert _replies(chat) == [("Shodan", "member-2", "Insect. You summoned me.")]
        assert len(scripted.requests) == 1 and "Write Shodan's next reply" in _system(scripted.requests[0])
        assert "(muted)" in chat.members.text()  # asking her did not unmute her
        # List order: a round starts with Seraphina whoever spoke last, so she stays highlighted.
        await wait_until(pilot, lambda: "next: Seraphina, Coding Sensei" in chat.members.text())
        assert (await _picker(pilot))[1] == 0


async def test_ctrl_b_when_every_member_is_muted_still_offers_them_all(corpus_tavern: Tavern,
                                                                       scripted: ScriptedProvider) -> None:
    _hall(corpus_tavern, "list")
    for name in ("Seraphina", "Shodan", "Coding Sensei"):
        corpus_tavern.groups.set_muted("Hall", name, True)
    scripted.enqueue("Still here.")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot, "Hall")
        labels, highlighted = await _picker(pilot)
        # Nobody unmuted: the member after the newest message (Coding Sensei's greeting) is highlighted.
        assert (labels, highlighted) == (
            ["1 · Seraphina (muted)", "2 · Shodan (muted)", "3 · Coding Sensei (muted)"], 0)
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(_replies(chat)) == 1 and not chat.generating)
        await workers_idle(pilot)
        assert _replies(chat) == [("Seraphina", "member-1", "Still here.")]


def test_next_choice_skips_muted_members_but_counts_a_muted_speaker() -> None:
    cast = [GroupMemberView(1, "Seraphina", False, None), GroupMemberView(2, "Shodan", True, None),
            GroupMemberView(3, "Coding Sensei", False, None), GroupMemberView(4, "Ann", True, None)]
    assert next_choice(cast, ["Shodan", "Coding Sensei"], None) == 2  # the first unmuted upcoming
    assert next_choice(cast, [], 1) == 2  # after Seraphina: Shodan is muted, so Coding Sensei
    assert next_choice(cast, [], 2) == 2  # after the muted Shodan, who was made to speak
    assert next_choice(cast, None, 4) == 0  # after the last member: wrapping round
    assert next_choice(cast, None, 99) == 0  # not a member's reply: the first unmuted
    every = [GroupMemberView(m.character_id, m.name, True, None) for m in cast]
    assert next_choice(every, ["Shodan"], 3) == 1  # all muted: the same rules over them all


async def test_the_picker_highlights_the_turn_orders_next_speaker(corpus_tavern: Tavern) -> None:
    _hall(corpus_tavern, "list")
    corpus_tavern.groups.set_muted("Hall", "Seraphina", True)
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        await open_group(pilot, "Hall")
        await wait_until(pilot, lambda: "next: Shodan, Coding Sensei" in pilot.app.screen.members.text())
        # List order: every unmuted member in the group's order, so Shodan is next.
        assert await _picker(pilot) == (["1 · Seraphina (muted)", "2 · Shodan", "3 · Coding Sensei"], 1)
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
        await wait_until(pilot, lambda: chat.reply_stream.box is not None and
                                        "The forest" in chat.reply_stream.box.text)
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
