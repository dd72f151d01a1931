"""Pilot tests of the real app on a real service (temp SQLite) with a scripted provider."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Collapsible, Footer, OptionList

from tavern_tui.errors import AuthenticationError
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.draft import DraftScreen
from tavern_tui.tui.screens.home import EMPTY_TEXT, HomeScreen
from tavern_tui.tui.widgets.transcript import MAX_MOUNTED, WINDOW
from tests.tui.conftest import (
    GATE,
    ScriptedProvider,
    Think,
    notifications,
    open_character,
    wait_until,
    workers_idle,
)

SIZE = (120, 40)


def mark_of(box: object) -> str:
    """The mark label's text next to a message's speaker."""
    return str(box.mark)  # type: ignore[attr-defined]


async def open_seraphina(pilot: Pilot[object]) -> ChatScreen:
    """From the home screen, open Seraphina's chat and wait until its transcript is shown."""
    await open_character(pilot, "Seraphina")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChatScreen)
                     and pilot.app.screen.is_mounted and bool(pilot.app.screen.transcript.boxes))
    screen = pilot.app.screen
    assert isinstance(screen, ChatScreen)
    return screen


async def send(pilot: Pilot[object], chat: ChatScreen, text: str, *, wait: bool = True) -> None:
    """Type `text` into the prompt, press Enter and (by default) wait until the step has ended.

    Waits on the workers' states, not `workers.wait_for_complete()`: that raises when a worker
    it waits on fails, so a test of a failing reply broke or not by when the step ended."""
    await pilot.press(*text)
    assert chat.prompt.value == text
    await pilot.press("enter")
    if wait:
        await workers_idle(pilot, timeout=30)
        await wait_until(pilot, lambda: not chat.generating)


async def test_home_lists_characters_then_chat_streams_a_reply(corpus_tavern: Tavern,
                                                               scripted: ScriptedProvider) -> None:
    reply = '*Seraphina smiles softly.* "You are safe here, traveller."'
    scripted.enqueue("*Seraphina smiles softly.* ", '"You are ', "safe here, ", 'traveller."')
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, HomeScreen)
        listing = app.screen.query_one("#characters", OptionList)
        await workers_idle(pilot)
        shown = [str(listing.get_option_at_index(i).prompt).split("\n")[0] for i in range(listing.option_count)]
        assert shown == [c.name for c in corpus_tavern.library.characters()]
        assert {"Seraphina", "爱", "Skynet"} <= set(shown)
        assert "V3 card · 1 greeting · 4 lorebook entries" in str(
            listing.get_option_at_index(shown.index("Seraphina")).prompt)

        chat = await open_seraphina(pilot)
        pid = chat.playthrough_id
        greeting = corpus_tavern.playthroughs.messages(pid)[0]
        [box] = chat.transcript.boxes
        assert box.text == greeting.content and len(greeting.content) > 500
        assert box.has_class("-origin-engine") and mark_of(box) == "greeting"
        await wait_until(pilot, lambda: "tokens" in chat.status.line)  # debounced, counted in a worker
        assert "scripted · script-1" in chat.status.line and "tokens" in chat.status.line

        await send(pilot, chat, "hello there")
        stored = corpus_tavern.playthroughs.messages(pid)
        assert [(m.role, m.content) for m in stored[-2:]] == [("user", "hello there"), ("assistant", reply)]
        assert stored[-1].kind == "assistant/message" and stored[-1].origin == "agent" and not stored[-1].partial
        user_box, reply_box = chat.transcript.boxes[-2:]
        assert user_box.text == "hello there" and user_box.has_class("-user")
        assert reply_box.text == reply and mark_of(reply_box) == ""
        assert not reply_box.has_class("-streaming") and reply_box.view == stored[-1]
        assert chat.status.state == "idle" and chat.prompt.value == ""


async def test_escape_stops_the_reply_and_keeps_the_partial_text(corpus_tavern: Tavern,
                                                                 scripted: ScriptedProvider) -> None:
    scripted.enqueue("First reply.")
    scripted.enqueue("The forest ", GATE, "is never reached.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "hi")
        await send(pilot, chat, "tell me more", wait=False)
        await wait_until(pilot, lambda: chat.reply_stream.box is not None and
                                        chat.reply_stream.box.text == "The forest ")
        assert chat.generating and chat.status.state == "streaming"

        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await wait_until(pilot, lambda: not chat.generating)
        assert app.screen is chat  # Esc stopped the reply; it did not leave the chat

        last = corpus_tavern.playthroughs.messages(chat.playthrough_id)[-1]
        assert last.partial and last.kind == "assistant/attempt" and last.error is None
        assert last.content == "The forest "
        box = chat.transcript.boxes[-1]
        assert box.text == "The forest " and box.has_class("-stopped") and mark_of(box) == "stopped"
        assert chat.status.state == "idle"

        await pilot.press("escape")  # not generating now: back to the home screen
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.is_mounted)


async def test_provider_error_shows_its_category(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue("Hel", AuthenticationError("Invalid API key", status=401))
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "hello")
        assert chat.status.state == "error" and chat.status.has_class("-error")
        assert "authentication: Invalid API key" in chat.status.line
        box = chat.transcript.boxes[-1]
        assert box.text == "Hel" and box.has_class("-error") and mark_of(box) == "error · authentication"
        last = corpus_tavern.playthroughs.messages(chat.playthrough_id)[-1]
        assert last.partial and last.content == "Hel" and last.error == "Invalid API key"
        await wait_until(pilot, lambda: any("authentication" in n.message and n.severity == "error"
                                            for n in notifications(seen)))

        scripted.enqueue("Better now.")  # the next send works and clears the error state
        await send(pilot, chat, "again")
        assert chat.status.state == "idle" and chat.transcript.boxes[-1].text == "Better now."


async def test_reopening_shows_the_playthrough_and_its_messages(make_tavern: Callable[..., Tavern]) -> None:
    first_provider = ScriptedProvider()
    first_provider.enqueue("Welcome back.")
    first = make_tavern(first_provider)
    app = TavernApp(first)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "hello")
        texts = [b.text for b in chat.transcript.boxes]
        pid = chat.playthrough_id
    first.close()

    second = make_tavern(ScriptedProvider(), import_corpus=False)
    app = TavernApp(second)
    async with app.run_test(size=SIZE) as pilot:
        home = app.screen
        listing = home.query_one("#characters", OptionList)
        await workers_idle(pilot)
        listing.highlighted = [c.name for c in second.library.characters()].index("Seraphina")
        await pilot.pause()
        await workers_idle(pilot)
        playthroughs = home.query_one("#playthroughs", OptionList)
        assert playthroughs.option_count == 1
        # The title (its first line, issue 20 item 4), then id, message count and last played.
        assert str(playthroughs.get_option_at_index(0).prompt) == f"hello\n#{pid} · 3 messages · just now"
        await pilot.press("tab", "enter")  # focus the playthroughs, open the highlighted one
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and bool(app.screen.transcript.boxes))
        assert app.screen.playthrough_id == pid
        assert [b.text for b in app.screen.transcript.boxes] == texts
        assert texts[-1] == "Welcome back."


async def test_new_playthrough_key_makes_a_draft_that_the_first_line_plays(corpus_tavern: Tavern,
                                                                            scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    seraphina = corpus_tavern.library.find_character("Seraphina")
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        first = chat.playthrough_id
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.is_mounted)
        sessions = corpus_tavern.store.events.all_session_ids()
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: isinstance(app.screen, DraftScreen) and app.screen.draft is not None)
        # A draft: no session, no playthrough, no request (seed 000 §7).
        assert corpus_tavern.store.events.all_session_ids() == sessions and scripted.requests == []
        assert len(corpus_tavern.playthroughs.playthroughs(seraphina.id)) == 1
        assert [d.character_id for d in corpus_tavern.openings.drafts()] == [seraphina.id]
        scripted.enqueue("Welcome, traveller.")
        await pilot.press(*"Hello", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and app.screen.playthrough_id != first)
        chat = app.screen
        await wait_until(pilot, lambda: [b.text for b in chat.transcript.boxes][-2:]
                         == ["Hello", "Welcome, traveller."])
        assert corpus_tavern.openings.drafts() == []
        assert len(corpus_tavern.playthroughs.playthroughs(seraphina.id)) == 2
        assert chat.transcript.boxes[0].has_class("-origin-engine")  # the greeting, an opening reference


async def test_enter_on_a_character_never_played_opens_a_draft_listed_on_home(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    skynet = corpus_tavern.library.find_character("Skynet")
    async with app.run_test(size=SIZE) as pilot:
        await open_character(pilot, "Skynet", playthrough=False)
        await wait_until(pilot, lambda: isinstance(app.screen, DraftScreen) and app.screen.draft is not None)
        assert corpus_tavern.playthroughs.playthroughs(skynet.id) == []
        [draft] = corpus_tavern.openings.drafts(skynet.id)
        await pilot.press("escape")  # back: the draft stays
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.is_mounted)
        await workers_idle(pilot)
        listing = app.screen.query_one("#playthroughs", OptionList)
        assert str(listing.get_option_at_index(0).prompt).startswith("draft · greeting 1/1 · not played yet")
        await pilot.press("enter")  # Enter again opens the same draft, it does not make another
        await wait_until(pilot, lambda: isinstance(app.screen, DraftScreen) and app.screen.draft is not None)
        assert app.screen.draft_id == draft.id
        await pilot.press("f9")  # discard
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.is_mounted)
        await workers_idle(pilot)
        assert corpus_tavern.openings.drafts() == []


async def test_reasoning_is_shown_apart_and_collapsed(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue(Think("The traveller seems tired. "), Think("Offer tea."), "Tea?")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "hello")
        box = chat.transcript.boxes[-1]
        assert box.text == "Tea?"
        section = box.query_one(".reasoning", Collapsible)
        assert section.collapsed
        assert (corpus_tavern.playthroughs.messages(chat.playthrough_id)[-1].reasoning
                == "The traveller seems tired. Offer tea.")


@pytest.mark.slow
async def test_transcript_mounts_a_window_and_loads_earlier(corpus_tavern: Tavern,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    seraphina = corpus_tavern.library.find_character("Seraphina")
    pid = corpus_tavern.playthroughs.new_playthrough(seraphina.id).id
    for i in range(60):
        async for _ in corpus_tavern.steps.send(pid, f"line {i}"):
            pass
    total = len(corpus_tavern.playthroughs.messages(pid))
    assert total == 121
    footers: list[set[str]] = []  # the actions of each full rebuild of the chat's footer
    rebuild = Footer.recompose

    async def counted(footer: Footer) -> None:
        if isinstance(footer.screen, ChatScreen):
            footers.append({entry[1] for entry in footer._shown[0]})  # type: ignore[attr-defined]
        await rebuild(footer)

    monkeypatch.setattr(Footer, "recompose", counted)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await workers_idle(pilot)
        # "Earlier messages", bound once the chat is read, was built with the rest from the first
        # build on: reading the chat never rebuilt every key to add it (a busy box may rebuild
        # once more as the focus settles; that rebuild has it too).
        assert footers and all("load_earlier" in actions for actions in footers)
        assert "ctrl+o" in chat.active_bindings
        window = WINDOW
        assert window < 60  # the test needs several windows of history
        assert len(chat.transcript.boxes) == window and chat.transcript.earlier_count == total - window
        assert chat.transcript.boxes[-1].text == "Hm."
        # A plain message is three widgets (box, header row, body): each layout pass of the
        # screen visits every mounted widget, a streaming reply's about ten times a second.
        assert {len(list(b.walk_children(with_self=True))) for b in chat.transcript.boxes} == {3}
        oldest_shown = chat.transcript.boxes[0]
        # Laid out and anchored at the end first: scrolling home from there is a move to the top
        # (before the first layout the offset is already 0 and nothing would move).
        await wait_until(pilot, lambda: 0 < chat.transcript.max_scroll_y <= chat.transcript.scroll_y, timeout=30)
        chat.transcript.scroll_home(animate=False)  # reaching the top loads the previous window
        await wait_until(pilot, lambda: len(chat.transcript.boxes) == 2 * window, timeout=30)
        # the reading position is kept: what was the first message is still at the top of the view
        # (scrolled down past the new ones: right after the mount, before the layout, it is at the
        # top only because nothing above it has a height yet)
        await wait_until(pilot, lambda: chat.transcript.scroll_y > 0
                         and abs(oldest_shown.region.y - chat.transcript.region.y) <= 2, timeout=30)
        while chat.transcript.earlier_count:
            before = len(chat.transcript.boxes)
            await pilot.press("ctrl+o")
            await wait_until(pilot, lambda before=before: chat.transcript.earlier_count == 0
                             or len(chat.transcript.boxes) == min(MAX_MOUNTED, before + window), timeout=30)
            assert len(chat.transcript.boxes) <= MAX_MOUNTED
        # the window is bounded: the newest boxes were unmounted, the oldest are the chat's first
        stored = [m.content for m in corpus_tavern.playthroughs.messages(pid)]
        assert [b.text for b in chat.transcript.boxes] == stored[:MAX_MOUNTED]
        assert chat.transcript.mounted_range == range(0, MAX_MOUNTED)
        assert chat.transcript.later_count == total - MAX_MOUNTED and chat.query_one("#later").display
        assert chat.transcript.boxes[0].has_class("-origin-engine")
        # scrolling back down pages the newer messages in again, up to the tail (ctrl+o left the
        # view at the oldest message: down at the window's end first, where a reader pages in)
        await pilot.pause()  # the last ctrl+o's scroll to the oldest message has run
        chat.transcript.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        while not chat.transcript.at_tail:
            before = chat.transcript.mounted_range.stop
            assert await chat.transcript.load_later() > 0
            await pilot.pause()
            assert chat.transcript.mounted_range.stop > before
            assert len(chat.transcript.boxes) <= MAX_MOUNTED
        assert chat.transcript.boxes[-1].text == "Hm." and not chat.query_one("#later").display
        assert [b.text for b in chat.transcript.boxes] == stored[-len(chat.transcript.boxes):]
        start = chat.transcript.mounted_range.start
        await pilot.press("ctrl+o")  # and up again: the window moves, never grows past the bound
        await wait_until(pilot, lambda: chat.transcript.mounted_range.start == start - window, timeout=30)
        assert len(chat.transcript.boxes) == MAX_MOUNTED and chat.transcript.later_count == window


async def test_import_from_an_empty_home(make_tavern: Callable[..., Tavern], corpus_dir: Path) -> None:
    service = make_tavern(ScriptedProvider(), import_corpus=False)
    seen: list[Message] = []
    app = TavernApp(service)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        home = app.screen
        await workers_idle(pilot)  # the home screen reads the library in a worker
        assert home.has_class("-empty") and home.query_one("#empty").display
        assert "tavern import FILE" in EMPTY_TEXT and "press ctrl+o" in EMPTY_TEXT

        for path in (str(corpus_dir / "cards" / "seraphina_chara_ccv3.png"), "/nowhere/missing.png"):
            await pilot.press("ctrl+o")
            await wait_until(pilot, lambda: app.screen is not home and bool(app.screen.query("#import-path")))
            app.screen.query_one("#import-path").value = path
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.screen is home)
            await app.workers.wait_for_complete()
            await pilot.pause()
            await workers_idle(pilot)

        assert not home.has_class("-empty")
        listing = home.query_one("#characters", OptionList)
        assert listing.option_count == 1 and str(listing.get_option_at_index(0).prompt).startswith("Seraphina")
        await wait_until(pilot, lambda: any(n.message == "Imported 1 character"  # one line by kind
                                            for n in notifications(seen)))
        await wait_until(pilot, lambda: any("/nowhere/missing.png" in n.message and n.severity == "error"
                                            for n in notifications(seen)))


async def test_ctrl_o_shows_the_earlier_messages_it_loads(corpus_tavern: Tavern) -> None:
    # A trial: ctrl+o "showed no change" (the window grew above, the view kept its place). The
    # key asks for earlier messages: the view goes up to the oldest of those it mounted.
    from tavern_tui.engine.events import EventKind, NewEvent

    seraphina = corpus_tavern.library.find_character("Seraphina")
    pid = corpus_tavern.playthroughs.new_playthrough(seraphina.id).id
    session = corpus_tavern.playthroughs.playthrough(pid).session_id
    corpus_tavern.store.events.append(session, [
        NewEvent(EventKind.USER_MESSAGE if n % 2 == 0 else EventKind.ASSISTANT_MESSAGE,
                 "user" if n % 2 == 0 else "assistant", {"content": f"Line {n:03d} of a long evening."})
        for n in range(3 * WINDOW)])
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = ChatScreen(corpus_tavern, pid)
        await app.push_screen(chat)
        transcript = chat.transcript
        await wait_until(pilot, lambda: len(transcript.boxes) == WINDOW
                         and 0 < transcript.max_scroll_y <= transcript.scroll_y)
        first_shown = transcript.boxes[0].text
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: len(transcript.boxes) == 2 * WINDOW)
        oldest = transcript.boxes[0]
        assert oldest.text != first_shown
        await wait_until(pilot, lambda: abs(oldest.region.y - transcript.region.y) <= 1)  # at the top of the view
