"""Pilot tests of the chat's composer and inbox (issue 15): type during a stream, Enter queues,
the queued line shows, ↑ edits it, F9 cancels, the reply to the edited text arrives; a steer;
newline keys; a three-line paste; the draft across Esc and a restart; keys typed right after
opening a chat; ↑ with nothing queued edits the last sent message; snapshots with two queued."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from textual import events
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import OptionList

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.edit_message import EditMessageScreen
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.draft import DraftScreen
from tavern_tui.tui.screens.home import HomeScreen
from tavern_tui.tui.widgets.composer import Composer
from tests.tui.conftest import GATE, ScriptedProvider, noted, open_character, wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina, send


def strip_lines(chat: ChatScreen) -> list[str]:
    """The queued items above the composer, as shown."""
    return str(chat.queue.content).splitlines() if chat.queue.items else []


def user_lines(chat: ChatScreen) -> list[str]:
    return [b.text for b in chat.transcript.boxes if "-user" in b.classes]


async def type_and_enter(pilot: Pilot[object], text: str, key: str = "enter") -> None:
    await pilot.press(*text)
    await pilot.press(key)


async def start_gated_reply(pilot: Pilot[object], chat: ChatScreen, scripted: ScriptedProvider) -> None:
    """Send a first line whose reply waits at the gate (still streaming)."""
    scripted.enqueue("*Seraphina starts to answer* ", GATE, "and finishes.")
    await send(pilot, chat, "Where am I?", wait=False)
    await wait_until(pilot, lambda: chat.generating and chat.reply_stream.box is not None)


async def test_enter_queues_during_a_stream_up_edits_f9_cancels_and_the_edited_text_is_answered(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await start_gated_reply(pilot, chat, scripted)
        await type_and_enter(pilot, "first queued")
        await wait_until(pilot, lambda: len(chat.queue.items) == 1)
        assert chat.generating and chat.prompt.value == ""
        assert strip_lines(chat) == ["1 · queued · first queued"]
        await type_and_enter(pilot, "second queued")
        await wait_until(pilot, lambda: len(chat.queue.items) == 2)
        assert strip_lines(chat) == ["1 · queued · first queued", "2 · queued · second queued"]
        # ↑ on the empty composer takes the last queued item; ↑ again the one before it.
        await pilot.press("up")
        assert chat.prompt.value == "second queued" and chat.queue.editing == chat.queue.items[1].id
        await pilot.press("up")
        assert chat.prompt.value == "first queued"
        await pilot.press("end", *", edited")
        await pilot.press("enter")
        await wait_until(pilot, lambda: chat.queue.items[0].text == "first queued, edited")
        assert chat.prompt.value == ""
        # F9 cancels the item being edited.
        await pilot.press("up")
        assert chat.prompt.value == "second queued"
        await pilot.press("f9")
        await wait_until(pilot, lambda: len(chat.queue.items) == 1)
        assert strip_lines(chat) == ["1 · queued · first queued, edited"]
        assert corpus_tavern.inbox.pending(chat.playthrough_id)[0].text == "first queued, edited"
        # The reply settles; the next step claims what is queued, and its reply arrives.
        scripted.enqueue("*She considers your edited words.*")
        scripted.gate.set()
        await wait_until(pilot, lambda: len(scripted.requests) == 2 and not chat.generating, timeout=10)
        await workers_idle(pilot)
        assert [m["content"] for m in scripted.requests[1].messages if m["role"] == "user"][-2:] == [
            "Where am I?", "first queued, edited"]
        assert all("second queued" not in m["content"] for m in scripted.requests[1].messages)
        assert user_lines(chat)[-2:] == ["Where am I?", "first queued, edited"]
        assert chat.transcript.boxes[-1].text == "*She considers your edited words.*"
        assert chat.queue.items == [] and strip_lines(chat) == []


async def test_alt_enter_queues_a_steer_before_the_queued_lines(corpus_tavern: Tavern,
                                                                  scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await start_gated_reply(pilot, chat, scripted)
        await type_and_enter(pilot, "later")
        await wait_until(pilot, lambda: len(chat.queue.items) == 1)
        await type_and_enter(pilot, "look out", key="alt+enter")
        await wait_until(pilot, lambda: len(chat.queue.items) == 2)
        assert strip_lines(chat) == ["1 · steer · look out", "2 · queued · later"]
        streamed = chat.transcript.boxes[-1].text
        scripted.gate.set()
        await wait_until(pilot, lambda: len(scripted.requests) == 2 and not chat.generating, timeout=10)
        await workers_idle(pilot)
        # The steer is claimed first at the boundary (the end of the reply), which stays as it streamed.
        assert [m["content"] for m in scripted.requests[1].messages][-3:] == [
            "*Seraphina starts to answer* and finishes.", "look out", "later"]
        assert streamed.startswith("*Seraphina starts to answer*")


async def test_newline_keys_and_a_three_line_paste(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await pilot.press("a", "shift+enter", "b", "ctrl+j", "c")
        assert chat.prompt.value == "a\nb\nc" and not chat.generating
        chat.prompt.clear()
        await pilot.pause()
        app.post_message(events.Paste("line one\nline two\nline three"))  # as the terminal driver delivers it
        await wait_until(pilot, lambda: chat.prompt.value == "line one\nline two\nline three")
        await wait_until(pilot, lambda: chat.prompt.outer_size.height == 3 + 2)  # three lines inside the border
        await pilot.press("enter")
        await pilot.app.workers.wait_for_complete()
        await wait_until(pilot, lambda: not chat.generating)
        assert scripted.requests[-1].messages[-1] == {"role": "user", "content": "line one\nline two\nline three"}
        shown = corpus_tavern.playthroughs.messages(chat.playthrough_id)
        assert shown[-2].content.splitlines() == ["line one", "line two", "line three"]
        # It grows to six lines, then scrolls.
        chat.prompt.value = "\n".join(str(n) for n in range(12))
        await wait_until(pilot, lambda: chat.prompt.outer_size.height == 6 + 2)
        assert chat.prompt.max_scroll_y > 0


async def test_esc_keeps_the_draft_and_a_restart_too(make_tavern: Callable[..., Tavern],
                                                     scripted: ScriptedProvider) -> None:
    tavern = make_tavern(scripted)
    seen: list[Message] = []
    app = TavernApp(tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        pid = chat.playthrough_id
        await pilot.press(*"half a thought")
        await pilot.press("escape")  # the first Esc only warns (text in the composer), saying how long
        await noted(pilot, seen, "Esc again within 4 s goes back (your text is kept as a draft).")
        assert app.screen is chat
        await pilot.press("escape")  # back home
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.is_mounted)
        assert tavern.inbox.draft(pid) == "half a thought"
        chat = await open_seraphina(pilot)
        await wait_until(pilot, lambda: chat.prompt.value == "half a thought")
    again = TavernApp(make_tavern(scripted, import_corpus=False))  # a new run on the same database
    async with again.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await wait_until(pilot, lambda: chat.prompt.value == "half a thought")
        assert scripted.requests == []  # nothing was sent


async def test_a_draft_holding_a_secret_is_not_written(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        corpus_tavern.inbox.save_draft(chat.playthrough_id, "older draft")
        chat.prompt.value = "my key is sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
        # The debounced save removes the older draft rather than write the text holding a key.
        await wait_until(pilot, lambda: corpus_tavern.inbox.draft(chat.playthrough_id) == "")
        await workers_idle(pilot)
        assert corpus_tavern.inbox.draft(chat.playthrough_id) == ""


async def test_keys_typed_right_after_opening_a_chat_land_in_the_composer(
        corpus_tavern: Tavern, scripted: ScriptedProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    # Hold the home screen's read of the playthrough until the keys are typed, as a slow disk or
    # a busy machine does: they arrive while the home screen is still the one shown.
    release = threading.Event()
    latest = corpus_tavern.playthroughs.latest_playthrough

    def slow_latest(character_id: int):  # type: ignore[no-untyped-def]
        assert release.wait(10)
        return latest(character_id)

    monkeypatch.setattr(corpus_tavern.playthroughs, "latest_playthrough", slow_latest)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        # Enter on a character never played (it opens an opening draft) …
        await open_character(pilot, "Seraphina", playthrough=False)
        await pilot.press(*"pen in hand")  # … and typing at once ("p", "n", "i" are home keys)
        assert isinstance(app.screen, HomeScreen)  # still opening
        release.set()
        await wait_until(pilot, lambda: isinstance(app.screen, DraftScreen) and app.screen.draft is not None)
        await pilot.press(*" and more")
        draft = app.screen
        assert isinstance(draft, DraftScreen)
        assert draft.prompt.value == "pen in hand and more" and app.focused is draft.prompt
        assert len(corpus_tavern.openings.drafts()) == 1  # Enter made one; "n" made none more
        assert corpus_tavern.playthroughs.playthroughs() == []  # a draft is no playthrough yet


async def test_up_with_nothing_queued_edits_the_last_sent_message(corpus_tavern: Tavern,
                                                                  scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "I am tierd")
        await pilot.press("up")
        await wait_until(pilot, lambda: isinstance(app.screen, EditMessageScreen) and app.screen.is_mounted)
        editor = app.screen
        area = editor.query_one("#edit-text")
        assert area.text == "I am tierd"  # type: ignore[attr-defined]
        area.text = "I am tired"  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)
        await workers_idle(pilot)
        await wait_until(pilot, lambda: "I am tired" in user_lines(chat))
        # The fork-preserving edit: a surface replacement, the original stays in the log.
        events_ = corpus_tavern.store.events.surface_events(
            corpus_tavern.playthroughs.playthrough(chat.playthrough_id).session_id)
        assert any(e.kind == "user/message" and e.content == "I am tierd" for e in events_)
        assert any(e.kind == "surface/replaced" for e in events_)


def _two_queued(scripted: ScriptedProvider) -> Callable[[Pilot[object]], object]:
    async def run_before(pilot: Pilot[object]) -> None:
        chat = await open_seraphina(pilot)
        await start_gated_reply(pilot, chat, scripted)
        await type_and_enter(pilot, "Is this the forest of Eldoria?")
        await wait_until(pilot, lambda: len(chat.queue.items) == 1)
        await type_and_enter(pilot, "Wait, behind you!", key="alt+enter")
        await wait_until(pilot, lambda: len(chat.queue.items) == 2)
        await pilot.press(*"still typing")
        # The reply stays at its gate (its worker runs on): wait for the draft and token workers.
        await pilot.pause(0.6)
        await wait_until(pilot, lambda: chat.status.tokens is not None)
        await pilot.pause()

    return run_before


@pytest.mark.usefixtures("no_cursor_blink")
@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_chat_with_two_queued_items(snap_compare, corpus_tavern: Tavern, scripted: ScriptedProvider,
                                    size: tuple[int, int]) -> None:
    assert snap_compare(TavernApp(corpus_tavern), terminal_size=size, run_before=_two_queued(scripted))


def test_the_composer_keeps_the_screen_keys() -> None:
    # F6/F7 and page up/down belong to the chat (strategy, trace, transcript), not TextArea's
    # select-line, select-all and cursor paging.
    keys = {key for b in Composer.BINDINGS for key in b.key.split(",")}  # type: ignore[union-attr]
    assert not keys & {"f6", "f7", "pageup", "pagedown"}
    assert {"ctrl+left", "ctrl+right", "ctrl+z"} <= keys


async def test_enter_on_an_empty_composer_answers_what_was_left_queued(corpus_tavern: Tavern,
                                                                        scripted: ScriptedProvider) -> None:
    seraphina = corpus_tavern.library.find_character("Seraphina")
    played = corpus_tavern.playthroughs.new_playthrough(seraphina.id)
    corpus_tavern.inbox.add(played.id, "queued before the app opened")  # e.g. `tavern inbox add`
    corpus_tavern.inbox.add(played.id, "steer from elsewhere", steer=True)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await wait_until(pilot, lambda: len(chat.queue.items) == 2)  # still there after a restart
        assert strip_lines(chat) == ["1 · steer · steer from elsewhere", "2 · queued · queued before the app opened"]
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(scripted.requests) == 1 and not chat.generating)
        await workers_idle(pilot)
        assert [m["content"] for m in scripted.requests[0].messages][-2:] == [
            "steer from elsewhere", "queued before the app opened"]
        assert user_lines(chat) == ["steer from elsewhere", "queued before the app opened"]
        assert chat.queue.items == []


async def test_ctrl_t_queues_a_steer_where_alt_enter_arrives_as_enter(corpus_tavern: Tavern,
                                                                       scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await start_gated_reply(pilot, chat, scripted)
        await type_and_enter(pilot, "duck", key="ctrl+t")
        await wait_until(pilot, lambda: len(chat.queue.items) == 1)
        assert strip_lines(chat) == ["1 · steer · duck"]
        scripted.gate.set()
        await wait_until(pilot, lambda: len(scripted.requests) == 2 and not chat.generating, timeout=10)


async def test_enter_while_another_window_replies_queues_and_goes_once_that_settles(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    from tavern_tui.engine.events import EventKind, NewEvent

    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        head = corpus_tavern.playthroughs.playthrough(chat.playthrough_id).session_id
        # Another window's step while it streams: it holds the step's lease, and the log has a
        # header and no settlement.
        lease = corpus_tavern.store.claims.claim(head, 75.0)
        corpus_tavern.store.events.append(head, [NewEvent(EventKind.REQUEST_HEADER, None, {"provider": "other"})])
        await type_and_enter(pilot, "me too")
        await wait_until(pilot, lambda: len(chat.queue.items) == 1)
        assert strip_lines(chat) == ["1 · queued · me too"] and scripted.requests == []
        scripted.enqueue("*Seraphina answers you as well.*")
        corpus_tavern.store.events.append(head, [NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant",
                                                          {"content": "the other window's reply"})])
        corpus_tavern.store.claims.release(lease.token)
        await wait_until(pilot, lambda: len(scripted.requests) == 1 and not chat.generating, timeout=10)
        await workers_idle(pilot)
        assert [(m["role"], m["content"]) for m in scripted.requests[0].messages[-2:]] == [
            ("assistant", "the other window's reply"), ("user", "me too")]
        assert chat.transcript.boxes[-1].text == "*Seraphina answers you as well.*"
        assert chat.queue.items == []


async def test_keys_typed_right_after_enter_start_the_next_message(corpus_tavern: Tavern,
                                                                    scripted: ScriptedProvider) -> None:
    # Seen in tmux (fast typing): "Y1" Enter "Y2" Enter sent "Y1Y2" and lost "Y2", because the
    # composer was emptied only when the screen handled Enter, after the next keys had landed.
    scripted.enqueue("*She answers the first.*")
    scripted.enqueue("*She answers the second.*")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await pilot.press(*"Y1")
        # Enter, then more typing, before the app handles the Submitted message Enter posted.
        await chat.prompt._on_key(events.Key("enter", None))
        chat.prompt.insert("Y2")
        await wait_until(pilot, lambda: not chat.generating and len(scripted.requests) == 1, timeout=10)
        await workers_idle(pilot)
        assert chat.prompt.value == "Y2"
        assert [m["content"] for m in scripted.requests[0].messages if m["role"] == "user"][-1] == "Y1"
        await pilot.press("enter")
        await wait_until(pilot, lambda: not chat.generating and len(scripted.requests) == 2, timeout=10)
        await workers_idle(pilot)
        assert user_lines(chat)[-2:] == ["Y1", "Y2"]


async def test_a_reply_another_window_writes_shows_here_once_it_settles(corpus_tavern: Tavern,
                                                                         scripted: ScriptedProvider) -> None:
    # Seen in a trial: `tavern chat --say` claimed the line queued here and answered it; the chat
    # showed the line but never the reply. Enter on the queued line meets the other's step (busy):
    # the chat follows it and shows its reply once it settles.
    from tavern_tui.engine.events import EventKind, NewEvent

    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        head = corpus_tavern.playthroughs.playthrough(chat.playthrough_id).session_id
        lease = corpus_tavern.store.claims.claim(head, 75.0)  # the other window's step
        corpus_tavern.inbox.add(chat.playthrough_id, "are you there?")
        chat.reload()
        await wait_until(pilot, lambda: len(chat.queue.items) == 1)
        await pilot.press("enter")  # empty composer, a line queued: answer it (the other has the step)
        await wait_until(pilot, lambda: chat.status.detail == "a reply is being written in another window")
        assert scripted.requests == [] and chat._watch is not None
        corpus_tavern.store.events.append(head, [
            NewEvent(EventKind.USER_MESSAGE, "user", {"content": "are you there?"}),
            NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant", {"content": "*From the other window.*"})])
        corpus_tavern.store.claims.release(lease.token)
        await wait_until(pilot, lambda: chat.transcript.boxes[-1].text == "*From the other window.*", timeout=30)
        assert chat._watch is None and chat.status.detail == ""


def _burst(app: TavernApp, keys: str) -> None:
    """Hand keys to the app's driver at once, as a terminal's burst arrives (`pilot.press` lets
    the app go idle between keys, which a person typing fast does not)."""
    for key in keys:
        name = {"\r": "enter"}.get(key, key)
        event = events.Key(name, None if name == "enter" else key)
        event.set_sender(app)
        app._driver.send_message(event)  # type: ignore[union-attr]


async def test_keys_in_the_same_burst_as_enter_go_to_the_chat_not_the_filter(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        listing = app.screen.query_one("#characters", OptionList)
        await wait_until(pilot, lambda: listing.option_count > 0)
        names = [str(listing.get_option_at_index(i).prompt).split("\n")[0] for i in range(listing.option_count)]
        listing.highlighted = names.index("Skynet")
        _burst(app, "\rHello1")  # Enter, then typing at once: "Hello1" matches no character
        await wait_until(pilot, lambda: isinstance(app.screen, DraftScreen) and app.screen.draft is not None)
        draft = app.screen
        assert isinstance(draft, DraftScreen)
        assert draft.draft is not None and draft.draft.character_name == "Skynet"
        await wait_until(pilot, lambda: draft.prompt.value == "Hello1")
