"""Group chats in the TUI, driven through the real app: a line plays a round (one reply per member,
each under its speaker's name and colour, each request written for its speaker); the member strip
names the members, a mute dims one and the next round skips it; alt+N has a member speak now;
Esc stops a round; a manual group's line waits; the home screen lists the group and opens it."""

from __future__ import annotations

import asyncio

from textual.widgets import OptionList, Static

from tavern_tui.errors import NetworkError
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.choose import ChooseScreen
from tavern_tui.tui.screens.chat import TOKEN_DELAY, ChatScreen
from tavern_tui.tui.screens.group_round import SPEAK_ID
from tavern_tui.tui.screens.help import HelpScreen, help_rows
from tavern_tui.tui.screens.home import HomeScreen
from tavern_tui.tui.screens.lore import LoreScreen
from tavern_tui.tui.widgets.message_box import MessageBox
from tests.tui.conftest import GATE, ScriptedProvider, screen_text, started_on, wait_until, workers_idle
from tests.tui.test_narrow import CHAT_KEYS, NARROW, cut_keys, footer_keys
from tests.tui.test_snapshots import STARTED

SIZE = (120, 40)


def _system(request: object) -> str:
    return "\n".join(m["content"] for m in request.messages if m["role"] == "system")  # type: ignore[attr-defined]


def _replies(chat: ChatScreen) -> list[tuple[str, str, str]]:
    """(speaker, member class, text) of each stored reply after the greeting."""
    out = []
    for box in chat.transcript.boxes:
        if box.view is None or box.view.role != "assistant" or box.view.source == "opening":
            continue
        member = next((c for c in box.classes if c.startswith("member-")), "")
        out.append((box.view.speaker, member, box.view.content))
    return out


async def open_group(pilot, name: str = "Glade") -> ChatScreen:  # type: ignore[no-untyped-def]
    """On the home screen, put the cursor on the group `name`, press Enter, wait for its chat."""
    listing = pilot.app.screen.query_one("#characters", OptionList)
    await wait_until(pilot, lambda: any(str(listing.get_option_at_index(i).prompt).startswith(name)
                                        for i in range(listing.option_count)))
    target = next(i for i in range(listing.option_count)
                  if str(listing.get_option_at_index(i).prompt).split("\n")[0] == name)
    while listing.highlighted != target:
        await pilot.press("down" if (listing.highlighted or 0) < target else "up")
    await pilot.press("enter")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChatScreen)
                     and pilot.app.screen.groups.group is not None and bool(pilot.app.screen.transcript.boxes))
    await workers_idle(pilot)
    return pilot.app.screen


async def say(pilot, chat: ChatScreen, text: str, replies: int) -> None:  # type: ignore[no-untyped-def]
    """Type a line, Enter, and wait until `replies` replies are stored and shown, and the chat is idle."""
    await pilot.press(*text)
    await pilot.press("enter")
    await wait_until(pilot, lambda: len(_replies(chat)) == replies and not chat.generating)
    await workers_idle(pilot)


def _glade(tavern: Tavern, strategy: str = "list") -> int:
    _group, playthrough = tavern.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy=strategy)
    return playthrough.id


async def test_a_line_plays_a_round_under_each_members_name(corpus_tavern: Tavern,
                                                            scripted: ScriptedProvider) -> None:
    _glade(corpus_tavern)
    scripted.enqueue("Welcome to the glade.")
    scripted.enqueue("Insect. ", "Another visitor.")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot)
        assert "1 Seraphina" in chat.members.text() and "2 Shodan" in chat.members.text()
        assert "list order · next: Seraphina, Shodan" in chat.members.text()
        await say(pilot, chat, "Hello, both of you.", 2)
        assert _replies(chat) == [("Seraphina", "member-1", "Welcome to the glade."),
                                  ("Shodan", "member-2", "Insect. Another visitor.")]
        assert not any(b.has_class("-streaming") for b in chat.transcript.boxes)
        first, second = scripted.requests
        assert "Write Seraphina's next reply" in _system(first)
        assert "Write Shodan's next reply" in _system(second)
        # The speaker labels take the members' colours (two different ones).
        labels = [b.header.get_component_styles("message-header--speaker").color for b in chat.transcript.boxes[-2:]]
        assert labels[0] != labels[1]


async def test_a_regenerated_reply_keeps_its_members_name_and_colour(corpus_tavern: Tavern,
                                                                     scripted: ScriptedProvider) -> None:
    _glade(corpus_tavern)
    scripted.enqueue("Welcome.")
    scripted.enqueue("Insect.")
    scripted.enqueue("Pathetic ", GATE, "creature.")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot)
        await say(pilot, chat, "Hello.", 2)
        await pilot.press("ctrl+r")
        # While it streams, the new variant is already under Shodan's name and colour.
        await wait_until(pilot, lambda: chat.reply_stream.box is not None and chat.reply_stream.box.text == "Pathetic ")
        assert chat.reply_stream.box.speaker == "Shodan" and chat.reply_stream.box.has_class("member-2")
        scripted.gate.set()
        await wait_until(pilot, lambda: _replies(chat)[-1:] == [("Shodan", "member-2", "Pathetic creature.")]
                         and not chat.generating)
        await workers_idle(pilot)
        assert _replies(chat) == [("Seraphina", "member-1", "Welcome."), ("Shodan", "member-2", "Pathetic creature.")]
        assert "Write Shodan's next reply" in _system(scripted.requests[-1])


async def test_a_regenerated_failed_reply_asks_the_member_who_failed(corpus_tavern: Tavern,
                                                                     scripted: ScriptedProvider) -> None:
    _glade(corpus_tavern)
    scripted.enqueue("Welcome.")
    scripted.enqueue(NetworkError("connection reset"))  # Shodan's reply fails before its first token
    scripted.enqueue("Pathetic creature.")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot)
        await say(pilot, chat, "Hello.", 2)
        failed = chat.transcript.boxes[-1].view
        assert failed is not None and (failed.speaker, failed.content, failed.partial) == ("Shodan", "", True)
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: _replies(chat)[-1:] == [("Shodan", "member-2", "Pathetic creature.")]
                         and not chat.generating)
        await workers_idle(pilot)
        assert _replies(chat) == [("Seraphina", "member-1", "Welcome."), ("Shodan", "member-2", "Pathetic creature.")]
        assert "Write Shodan's next reply" in _system(scripted.requests[-1])
        assert "Write Seraphina's next reply" not in _system(scripted.requests[-1])
        assert corpus_tavern.traces.traces(chat.playthrough_id)[-1].speaker == "Shodan"  # the trace row's "for Shodan"


async def test_f2_in_a_group_chat_names_the_group(corpus_tavern: Tavern) -> None:
    pid = _glade(corpus_tavern)
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        await open_group(pilot)
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, LoreScreen)
                         and pilot.app.screen.tester.result is not None)
        lore = pilot.app.screen
        assert isinstance(lore, LoreScreen)
        assert str(lore.query_one("#lore-title", Static).content) == (
            f"World books · Glade #{pid} · Enter on an entry edits it")
        assert str(lore.tester.border_title) == f"Tester · the next message in Glade #{pid}"
        assert "Seraphina" not in screen_text(pilot.app).splitlines()[0]


async def test_mute_dims_a_member_and_the_next_round_skips_it(corpus_tavern: Tavern,
                                                             scripted: ScriptedProvider) -> None:
    _glade(corpus_tavern)
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot)
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChooseScreen) and pilot.app.screen.is_mounted)
        await pilot.press("down", "enter")  # Shodan
        await wait_until(pilot, lambda: "(muted)" in chat.members.text())
        await workers_idle(pilot)
        muted = chat.members.query(".-muted")
        assert [str(label.content) for label in muted] == ["2 Shodan (muted)"]
        assert "next: Seraphina" in chat.members.text() and "Shodan, " not in chat.members.text()
        scripted.enqueue("Only me, then.")
        await say(pilot, chat, "Anyone?", 1)
        assert _replies(chat) == [("Seraphina", "member-1", "Only me, then.")]
        assert len(scripted.requests) == 1


async def test_speak_now_has_one_member_reply(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    _glade(corpus_tavern)
    scripted.enqueue("Speak, insect.")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot)
        await pilot.press("alt+2")
        await wait_until(pilot, lambda: bool(_replies(chat)) and not chat.generating)
        await workers_idle(pilot)
        assert _replies(chat) == [("Shodan", "member-2", "Speak, insect.")]
        assert chat.prompt.value == ""  # the key typed nothing
        assert "Write Shodan's next reply" in _system(scripted.requests[0])


async def _from_terminal(pilot, sent: str) -> None:  # type: ignore[no-untyped-def]
    """Press what a terminal sends as `sent`, read by Textual's own parser (Pilot's `press` names
    a key but gives it no character)."""
    from textual._xterm_parser import XTermParser

    for event in XTermParser().feed(sent):
        pilot.app.post_message(event)
    await pilot.pause()


async def test_alt_n_as_a_terminal_sends_it_speaks_and_types_only_into_text(corpus_tavern: Tavern,
                                                                             scripted: ScriptedProvider) -> None:
    # A trial in tmux: alt+1 typed "¡". xterm, tmux and most Linux terminals send Esc and the
    # digit, which Textual reads as macOS's Option characters (¡ ™ £ …), never as alt+N.
    _glade(corpus_tavern)
    scripted.enqueue("Speak, insect.")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot)
        await _from_terminal(pilot, "\x1b2")  # alt+2, the composer empty: member 2 speaks now
        await wait_until(pilot, lambda: bool(_replies(chat)) and not chat.generating)
        await workers_idle(pilot)
        assert _replies(chat) == [("Shodan", "member-2", "Speak, insect.")] and chat.prompt.value == ""
        await pilot.press(*"Deal")
        await _from_terminal(pilot, "\x1b2")  # with text in the composer it is the character it stands for
        await wait_until(pilot, lambda: chat.prompt.value == "Deal™")
        assert len(scripted.requests) == 1


async def test_esc_stops_the_round_and_later_members_do_not_speak(corpus_tavern: Tavern,
                                                                  scripted: ScriptedProvider) -> None:
    _glade(corpus_tavern)
    scripted.enqueue("The forest ", GATE, "is quiet.")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot)
        await pilot.press(*"Hello?")
        await pilot.press("enter")
        await wait_until(pilot, lambda: chat.reply_stream.box is not None and
                                        "The forest" in chat.reply_stream.box.text)
        await pilot.press(*"and you?")  # typed meanwhile: queued in the inbox
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(chat.queue.items) == 1)
        await pilot.press("escape")
        await wait_until(pilot, lambda: not chat.generating)
        await workers_idle(pilot)
        last = chat.transcript.boxes[-1]
        assert last.has_class("-stopped") and last.view is not None and last.view.speaker == "Seraphina"
        assert len(scripted.requests) == 1  # Shodan never spoke
        assert [i.text for i in chat.queue.items] == ["and you?"]  # waits for the next Enter


async def test_a_manual_groups_line_waits_until_a_member_is_asked(corpus_tavern: Tavern,
                                                                  scripted: ScriptedProvider) -> None:
    _glade(corpus_tavern, strategy="manual")
    scripted.enqueue("You called?")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot)
        assert "manual order" in chat.members.text()
        await pilot.press(*"Is anyone there?")
        await pilot.press("enter")
        await wait_until(pilot, lambda: any(n.text.startswith("Nobody replies on their own in this group: your "
                                                              "line waits until a member is asked")
                                            for n in pilot.app.notices))
        await workers_idle(pilot)
        assert [i.text for i in chat.queue.items] == ["Is anyone there?"]
        assert scripted.requests == []
        await pilot.press("alt+1")  # Seraphina answers the waiting line
        await wait_until(pilot, lambda: bool(_replies(chat)) and not chat.generating)
        await workers_idle(pilot)
        assert _replies(chat) == [("Seraphina", "member-1", "You called?")]
        assert chat.queue.items == []
        assert any(b.view is not None and b.view.content == "Is anyone there?" for b in chat.transcript.boxes)


async def test_home_lists_the_group_and_opens_its_playthrough(corpus_tavern: Tavern) -> None:
    pid = _glade(corpus_tavern)
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        home = pilot.app.screen
        assert isinstance(home, HomeScreen)
        await workers_idle(pilot)
        assert "group · Seraphina, Shodan" in screen_text(pilot.app)
        chat = await open_group(pilot)
        assert chat.playthrough_id == pid
        await pilot.press("escape")
        await wait_until(pilot, lambda: pilot.app.screen is home)


async def test_a_group_without_a_playthrough_gets_one(corpus_tavern: Tavern) -> None:
    _glade(corpus_tavern)
    group = corpus_tavern.groups.group("Glade")
    corpus_tavern.playthroughs.archive(group.playthroughs[0], True)
    before = set(corpus_tavern.groups.group("Glade").playthroughs)
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot)
        assert chat.playthrough_id not in before
        assert chat.playthrough_id in await asyncio.to_thread(lambda: corpus_tavern.groups.group("Glade").playthroughs)


async def test_group_keys_are_hidden_in_a_one_character_chat(corpus_tavern: Tavern) -> None:
    from tests.tui.test_app import open_seraphina

    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await workers_idle(pilot)
        assert not chat.members.display
        assert chat.check_action("speak", ()) is False and chat.check_action("speak_member", (1,)) is False
        assert all(not b.has_class("member-2") for b in chat.transcript.boxes if isinstance(b, MessageBox))


async def test_group_keys_in_help_footer_and_palette(corpus_tavern: Tavern) -> None:
    from tests.tui.test_help_new_keys import _declared, _help_text, _listed, _palette_names

    _glade(corpus_tavern)
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot)
        listed = _listed(chat)
        past_the_cast = {f"chat.group_speak_{n}" for n in range(3, 10)}  # alt+3…9: a two-member group
        assert _declared("ChatScreen") - past_the_cast <= set(listed) and not past_the_cast & set(listed)
        assert (listed["chat.group_speak"], listed["chat.group_speak_2"], listed["chat.group_mute"]) == (
            "^b", "alt+2", "^n")
        await wait_until(pilot, lambda: ("^b", "Speak") in footer_keys(chat) and cut_keys(chat) == [])
        names = await _palette_names(pilot, "Speak")
        assert {"Speak", "Speak now: member 1", "Speak now: member 2"} <= {n.split("\n")[0] for n in names}
        assert not any("member 3" in n for n in names)  # a two-member group
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, HelpScreen) and pilot.app.screen.is_mounted)
        shown = await _help_text(pilot)
        assert "chat.group_speak" in shown and "chat.group_mute" in shown and "Group chat" in shown


async def test_a_group_chat_at_80_columns_cuts_nothing(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    _glade(corpus_tavern)
    scripted.enqueue("Welcome.")
    scripted.enqueue("Insect.")
    async with TavernApp(corpus_tavern).run_test(size=NARROW) as pilot:
        chat = await open_group(pilot)
        await say(pilot, chat, "Hello.", 2)
        await wait_until(pilot, lambda: CHAT_KEYS <= footer_keys(chat) and cut_keys(chat) == [])
        strip = chat.members
        assert strip.region.height == 1 and strip.region.right <= NARROW[0]
        assert all(label.region.right <= strip.region.right for label in strip.query(".member, .next"))
        text = screen_text(pilot.app)
        assert "1 Seraphina" in text and "2 Shodan" in text and "list order · next: Seraphina, Shodan" in text
        labels = list(strip.query(".member, .next"))
        assert all(a.region.right <= b.region.x for a, b in zip(labels, labels[1:]))  # side by side, no overlap
        assert "Glade · #" in text  # the title names the group


def test_group_chat_snapshot(snap_compare, corpus_tavern: Tavern, scripted: ScriptedProvider,
                             no_cursor_blink: None) -> None:
    pid = _glade(corpus_tavern)
    started_on(corpus_tavern, pid, STARTED)
    scripted.enqueue("*Seraphina sets down her staff.* ", '"Welcome to my glade, traveller."')
    scripted.enqueue("*A green light flickers in the canopy.* ", "Insect. You are trespassing.")

    async def play(pilot) -> None:  # type: ignore[no-untyped-def]
        chat = await open_group(pilot)
        await say(pilot, chat, "Hello, both of you.", 2)
        await wait_until(pilot, lambda: all(b.view is not None and not b.has_class("-streaming")
                                            for b in chat.transcript.boxes))
        await pilot.pause(TOKEN_DELAY + 0.2)  # the token estimate is debounced
        await workers_idle(pilot)
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=SIZE, run_before=play)


async def test_ctrl_k_on_a_group_says_a_group_has_no_card(corpus_tavern: Tavern) -> None:
    _glade(corpus_tavern)
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        await workers_idle(pilot)
        listing = pilot.app.screen.query_one("#characters", OptionList)
        target = next(i for i in range(listing.option_count)
                      if str(listing.get_option_at_index(i).prompt).split("\n")[0] == "Glade")
        while listing.highlighted != target:
            await pilot.press("down" if (listing.highlighted or 0) < target else "up")
        await pilot.press("ctrl+k")
        await wait_until(pilot, lambda: any("A group has no card" in n.message for n in pilot.app._notifications))
        assert not any("Import a character first" in n.message for n in pilot.app._notifications)


async def test_the_help_of_a_group_chat_lists_its_keys(corpus_tavern: Tavern) -> None:
    _glade(corpus_tavern)
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot)
        listed = {row.binding_id for rows in help_rows(chat).values() for row in rows}
        # Speak and mute, and alt+N for each of the two members (`fit_speak_keys` keeps those).
        assert {"chat.group_speak", "chat.group_mute", f"{SPEAK_ID}1", f"{SPEAK_ID}2"} <= listed
