"""Issue 21 item 3, the rest of it: F4 fills the composer for the person to edit and send (as
SillyTavern puts an impersonation in its send box, `#send_textarea`), `[tui] impersonate_direct`
keeps the direct post (also when switched in the settings screen, without a restart); `t` under
the message cursor opens the trace on that message's own request (that reply, that swipe);
`b` and `[` / `]` on a middle message; the narrow stacking of the trace and strategy panes (item
8) and the character list offered for an imported chat whose character is missing (item 5)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from textual.widgets import Checkbox, Input, OptionList

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.edit_message import EditMessageScreen
from tavern_tui.tui.modals.import_screen import CharacterPicker, ImportScreen
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.home import HomeScreen
from tavern_tui.tui.screens.settings import SettingsScreen
from tavern_tui.tui.screens.strategy import StrategyScreen
from tavern_tui.tui.screens.trace import TraceScreen
from tests.tui.conftest import GATE, ScriptedProvider, open_character, wait_until, workers_idle

SIZE = (120, 40)


def _direct(tavern: Tavern, direct: bool) -> None:
    tavern.settings = dataclasses.replace(tavern.settings,
                                          tui=dataclasses.replace(tavern.settings.tui, impersonate_direct=direct))


async def _open_chat(pilot) -> ChatScreen:  # type: ignore[no-untyped-def]
    await open_character(pilot, "Seraphina")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChatScreen)
                     and pilot.app.screen.is_mounted and bool(pilot.app.screen.transcript.boxes))
    await workers_idle(pilot)
    return pilot.app.screen


async def _exchange(pilot, chat: ChatScreen, scripted: ScriptedProvider, line: str, reply: str) -> None:  # type: ignore[no-untyped-def]
    scripted.enqueue(reply)
    await pilot.press(*line)
    await pilot.press("enter")
    await wait_until(pilot, lambda: not chat.generating
                     and any(b.text == reply and b.view is not None for b in chat.transcript.boxes))
    await workers_idle(pilot)


def _stored(tavern: Tavern, chat: ChatScreen) -> list[tuple[str, str, str | None]]:
    return [(m.role, m.content, m.origin) for m in tavern.playthroughs.messages(chat.playthrough_id)]


async def test_f4_fills_the_composer_to_edit_and_send(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue("I look around the glade.")
    scripted.enqueue("Seraphina smiles.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await _open_chat(pilot)
        before = _stored(corpus_tavern, chat)
        await pilot.press("f4")
        await wait_until(pilot, lambda: not chat.generating and chat.prompt.value == "I look around the glade.")
        await workers_idle(pilot)
        # Not in the chat, shown or stored: the line is the person's to edit.
        assert [b.text for b in chat.transcript.boxes] == [m[1] for m in before]
        assert _stored(corpus_tavern, chat) == before
        assert app.focused is chat.prompt
        # The request is in the trace, with the line it produced.
        traces = corpus_tavern.traces.traces(chat.playthrough_id)
        assert [t.generation for t in traces] == ["impersonate"] and traces[0].outcome == "ok"
        assert "[Write your next reply from the point of view of" in str(scripted.requests[0].messages)
        await pilot.press("end", *" Then I wave.")
        await pilot.press("enter")
        await wait_until(pilot, lambda: not chat.generating and chat.transcript.boxes[-1].text == "Seraphina smiles.")
        await workers_idle(pilot)
        # Sent as the person's own line (origin customer, seed 001), answered by a normal generation.
        assert _stored(corpus_tavern, chat)[len(before):] == [
            ("user", "I look around the glade. Then I wave.", "customer"), ("assistant", "Seraphina smiles.", "agent")]
        assert [t.generation for t in corpus_tavern.traces.traces(chat.playthrough_id)] == ["impersonate", "normal"]
        # The hidden impersonated line is not in what the model read next.
        sent = [m["content"] for m in scripted.requests[1].messages if m["role"] == "user"]
        assert sent[-1] == "I look around the glade. Then I wave."
        assert "I look around the glade." not in sent[:-1]


async def test_f4_keeps_what_is_typed_and_a_stopped_one_lands_in_the_composer(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue("I ask about", GATE, " the wards.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await _open_chat(pilot)
        before = _stored(corpus_tavern, chat)
        await pilot.press(*"Hmm.")
        await pilot.press("f4")
        await wait_until(pilot, lambda: chat.generating and bool(chat.transcript.boxes)
                         and chat.transcript.boxes[-1].text == "I ask about")
        assert "composer" in chat.transcript.boxes[-1].mark
        await pilot.press("escape")  # Esc stops the streaming impersonation
        await wait_until(pilot, lambda: not chat.generating)
        await workers_idle(pilot)
        # The typed text stays first; the partial line follows it, and it is out of the chat.
        assert chat.prompt.value == "Hmm.\nI ask about"
        assert [b.text for b in chat.transcript.boxes] == [m[1] for m in before]
        assert _stored(corpus_tavern, chat) == before
        assert [t.outcome for t in corpus_tavern.traces.traces(chat.playthrough_id)] == ["stopped"]


async def test_impersonate_direct_posts_at_once(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    _direct(corpus_tavern, True)
    scripted.enqueue("I look around the glade.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await _open_chat(pilot)
        await pilot.press("f4")
        await wait_until(pilot, lambda: not chat.generating and chat.transcript.boxes[-1].text
                         == "I look around the glade.")
        await workers_idle(pilot)
        assert chat.prompt.value == ""
        assert _stored(corpus_tavern, chat)[-1] == ("user", "I look around the glade.", "agent")
        assert chat.transcript.boxes[-1].view.ref == corpus_tavern.playthroughs.messages(chat.playthrough_id)[-1].ref


async def test_impersonate_direct_switched_in_settings_applies_without_a_restart(
        corpus_tavern: Tavern, scripted: ScriptedProvider, isolated_profile: Path) -> None:
    scripted.enqueue("I wave.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await _open_chat(pilot)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, SettingsScreen) and app.screen.is_mounted)
        app.screen.query_one("#impersonate-direct", Checkbox).value = True
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen is chat)
        await workers_idle(pilot)
        assert corpus_tavern.settings.tui.impersonate_direct is True
        await pilot.press("f4")
        await wait_until(pilot, lambda: not chat.generating and chat.transcript.boxes[-1].text == "I wave.")
        await workers_idle(pilot)
        assert _stored(corpus_tavern, chat)[-1] == ("user", "I wave.", "agent") and chat.prompt.value == ""


async def test_t_opens_the_trace_on_the_messages_own_request(corpus_tavern: Tavern,
                                                           scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await _open_chat(pilot)
        await _exchange(pilot, chat, scripted, "First words", "First answer.")
        await _exchange(pilot, chat, scripted, "Second words", "Second answer.")
        scripted.enqueue("Second answer, again.")
        await pilot.press("ctrl+r")  # a second swipe of the last reply
        await wait_until(pilot, lambda: not chat.generating and chat.transcript.boxes[-1].text
                         == "Second answer, again.")
        await workers_idle(pilot)
        traces = corpus_tavern.traces.traces(chat.playthrough_id)
        assert [t.generation for t in traces] == ["normal", "normal", "swipe"]  # ctrl+r is a swipe (SillyTavern)
        refs = {m.content: f"{m.ref[0]}:{m.ref[1]}" for m in corpus_tavern.playthroughs.messages(chat.playthrough_id)}

        async def trace_of(ups: int) -> TraceScreen:
            await pilot.press(*["alt+up"] * ups)
            await pilot.press("t")
            await wait_until(pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen.loaded)
            screen = app.screen
            assert isinstance(screen, TraceScreen)
            return screen

        # The middle reply: its own request, not the newest one.
        screen = await trace_of(3)
        assert screen.current is not None and screen.current.reply == refs["First answer."]
        assert screen.current.id == traces[0].id
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat)
        await pilot.press("escape")  # leave the cursor (the trace left it on the message)
        # The person's middle line: the request that carried it (which wrote "Second answer.").
        screen = await trace_of(2)
        assert screen.current is not None and screen.current.id == traces[1].id
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat)
        await pilot.press("escape")
        # The shown swipe of the last reply: the regenerate; the swipe before it: the first request.
        screen = await trace_of(1)
        assert screen.current is not None and screen.current.id == traces[2].id
        assert screen.current.reply == refs["Second answer, again."]
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat)
        await pilot.press("left_square_bracket")
        await wait_until(pilot, lambda: chat.transcript.boxes[-1].text == "Second answer.")
        await workers_idle(pilot)
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen.loaded)
        assert app.screen.current is not None and app.screen.current.id == traces[1].id
        # The greeting: no request wrote it; the newest is shown and it is said.
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat)
        await pilot.press("escape")
        screen = await trace_of(5)
        assert chat.cursor_message is not None and chat.cursor_message.source == "opening"
        assert screen.current is not None and screen.current.id == traces[-1].id
        assert any(n.title == "Trace" and "No request wrote" in n.text for n in app.notices)


async def test_variant_and_branch_keys_on_a_middle_message(corpus_tavern: Tavern,
                                                            scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await _open_chat(pilot)
        await _exchange(pilot, chat, scripted, "First words", "First answer.")
        scripted.enqueue("First answer, again.")
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: not chat.generating and chat.transcript.boxes[-1].text
                         == "First answer, again.")
        await _exchange(pilot, chat, scripted, "Second words", "Second answer.")
        greeting = chat.transcript.boxes[0].text
        # The middle reply has two variants: `[` shows the first (its branch ends there), `]` the second again.
        await pilot.press("alt+up", "alt+up", "alt+up")
        assert chat.cursor_message is not None and chat.cursor_message.content == "First answer, again."
        await pilot.press("left_square_bracket")
        await wait_until(pilot, lambda: [b.text for b in chat.transcript.boxes]
                         == [greeting, "First words", "First answer."])
        await workers_idle(pilot)
        assert chat.cursor_message is not None and chat.cursor_message.content == "First answer."
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: [b.text for b in chat.transcript.boxes]
                         == [greeting, "First words", "First answer, again.", "Second words", "Second answer."])
        await workers_idle(pilot)
        # `b` on the middle reply: a new playthrough ending there, opened in place of this chat.
        first = chat.playthrough_id
        await pilot.press("escape")
        await pilot.press("alt+up", "alt+up", "alt+up")
        assert chat.cursor_message is not None and chat.cursor_message.content == "First answer, again."
        await pilot.press("b")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and app.screen.playthrough_id != first
                         and bool(app.screen.transcript.boxes))
        await workers_idle(pilot)
        branch = app.screen
        assert [b.text for b in branch.transcript.boxes] == [greeting, "First words", "First answer, again."]
        assert [m.content for m in corpus_tavern.playthroughs.messages(first)][-1] == "Second answer."
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.is_mounted)


async def test_trace_and_strategy_panes_stack_when_narrow(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    """Issue 21 item 8: under 100 columns the request list sits above the detail, the strategy
    list above its preview; at 120 they are side by side again."""
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(80, 24)) as pilot:
        chat = await _open_chat(pilot)
        await _exchange(pilot, chat, scripted, "Hello", "Hi.")
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen.loaded)
        await pilot.pause()
        trace = app.screen
        requests, detail = trace.query_one("#requests").region, trace.query_one("#trace-detail").region
        assert requests.bottom <= detail.y and requests.width == detail.width == 80  # stacked, full width
        await pilot.resize_terminal(120, 40)
        await pilot.pause(0.2)
        requests, detail = trace.query_one("#requests").region, trace.query_one("#trace-detail").region
        assert requests.right <= detail.x and requests.y == detail.y  # side by side
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat)
        await pilot.resize_terminal(80, 24)
        await pilot.press("f6")
        await wait_until(pilot, lambda: isinstance(app.screen, StrategyScreen) and app.screen.shown_key is not None)
        await pilot.pause()
        side, preview = app.screen.query_one("#strategy-side").region, app.screen.query_one("#preview").region
        assert side.bottom <= preview.y and side.width == preview.width


async def test_a_chat_whose_character_is_missing_offers_the_character_list(corpus_tavern: Tavern,
                                                                            tmp_path: Path) -> None:
    """Issue 21 item 5: the TUI cannot pass `--character`; a SillyTavern chat naming a character the
    library lacks asks which one it is with, then imports it onto that one."""
    header = {"user_name": "Ann", "character_name": "Nobody", "create_date": "2024-7-12@01h31m37s",
              "chat_metadata": {}}
    line = {"name": "Nobody", "is_user": False, "is_system": False, "send_date": "2024-07-12T01:31:37.000Z",
            "mes": "Who goes there?", "extra": {}}
    chat_file = tmp_path / "stranger.jsonl"
    chat_file.write_text("\n".join(json.dumps(o) for o in (header, line)) + "\n", encoding="utf-8")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await workers_idle(pilot)
        seraphina = corpus_tavern.library.find_character("Seraphina")
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, ImportScreen) and app.screen.is_mounted)
        app.screen.query_one("#import-path", Input).value = f'"{chat_file}"'
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, CharacterPicker) and app.screen.is_mounted)
        assert "Nobody" in str(app.screen.query_one("Static").content)
        listing = app.screen.query_one("#picker-list", OptionList)
        names = [str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count)]
        assert "Seraphina" in names
        listing.highlighted = names.index("Seraphina")
        await pilot.press("enter")
        await wait_until(pilot, lambda: bool(corpus_tavern.playthroughs.playthroughs(seraphina.id)))
        await workers_idle(pilot)
        [played] = corpus_tavern.playthroughs.playthroughs(seraphina.id)
        assert [m.content for m in corpus_tavern.playthroughs.messages(played.id)] == ["Who goes there?"]


async def test_typing_with_the_message_cursor_on_goes_to_the_composer(corpus_tavern: Tavern,
                                                                     scripted: ScriptedProvider) -> None:
    # A trial: with the cursor on a message, "ok" typed vanished (the transcript had the focus).
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await _open_chat(pilot)
        await _exchange(pilot, chat, scripted, "First words", "First answer.")
        await pilot.press("alt+up")
        assert chat.cursor_message is not None and app.focused is chat.transcript
        await pilot.press("o", "k")
        assert chat.prompt.value == "ok" and app.focused is chat.prompt
        assert chat.cursor_message is None  # the cursor left with the first key typed
        await pilot.press("alt+up", "e")  # the cursor's own keys still act
        await wait_until(pilot, lambda: isinstance(app.screen, EditMessageScreen))
