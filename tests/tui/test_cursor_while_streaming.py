"""While a reply streams the message cursor moves over the settled messages (the streaming one is
not stored yet): alt+↑ right after a regenerate takes the newest settled one, and a key that would change the chat (`e`
edit) says it waits for the reply instead of the letter landing in the message box unnoticed;
Esc leaves the cursor first, and the reply streams on. Once it has settled alt+↑ takes it."""

from __future__ import annotations

from textual.message import Message

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tests.tui.conftest import GATE, ScriptedProvider, notes, wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina, send


async def test_the_cursor_moves_while_a_reply_streams_and_edits_once_it_settles(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue("Hi.")
    scripted.enqueue("The first words", GATE, " and the rest.")
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "Hello")
        await pilot.press("ctrl+r")  # the trial's case: the cursor wanted right after a regenerate
        await wait_until(pilot, lambda: chat.generating and chat.reply_stream.box is not None)
        await pilot.press("alt+up")
        assert chat.cursor_message is not None and chat.cursor_message.content == "Hello"
        await pilot.press("e")
        await wait_until(pilot, lambda: any("works once the reply has settled" in n for n in notes(seen)))
        assert chat.prompt.value == "" and app.screen is chat  # no editor, nothing typed
        await pilot.press("escape")  # leaves the cursor; the reply goes on
        assert chat.cursor_ref is None and chat.generating and app.focused is chat.prompt
        scripted.gate.set()
        await workers_idle(pilot)
        await wait_until(pilot, lambda: not chat.generating)
        await pilot.press("alt+up")
        assert chat.cursor_message is not None and chat.cursor_message.content == "The first words and the rest."


async def test_the_first_cursor_of_a_chat_says_its_keys_once(corpus_tavern: Tavern) -> None:
    from tavern_tui.tui.screens.message_cursor import CURSOR_BINDINGS, CURSOR_HINT

    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        await pilot.press("alt+up")
        assert chat.cursor_message is not None
        await pilot.press("escape", "alt+up")
        assert notes(seen).count(CURSOR_HINT) == 1
        letters = {b.key for b in CURSOR_BINDINGS if len(b.key) == 1}  # every letter key is named in the hint
        assert letters == {"e", "d", "b", "c", "y", "x", "t"} and all(f"{k} " in CURSOR_HINT for k in letters)
