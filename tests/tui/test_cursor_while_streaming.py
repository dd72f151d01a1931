"""While a reply streams the message cursor waits (the transcript changes under it): alt+↑ says
so instead of doing nothing, so the next letter (`e`, meant for the cursor) is not typed into the
message box unnoticed; once the reply has settled alt+↑ takes the newest message."""

from __future__ import annotations

from textual.message import Message

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tests.tui.conftest import GATE, ScriptedProvider, notes, wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina, send


async def test_alt_up_while_a_reply_streams_says_when_the_cursor_works(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue("The first words", GATE, " and the rest.")
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "Hello", wait=False)
        await wait_until(pilot, lambda: chat.generating and chat.reply_stream.box is not None)
        await pilot.press("alt+up")
        await wait_until(pilot, lambda: "The message cursor works once the reply has settled (Esc stops it)."
                         in notes(seen))
        assert chat.cursor_ref is None and app.focused is chat.prompt
        scripted.gate.set()
        await workers_idle(pilot)
        await wait_until(pilot, lambda: not chat.generating)
        await pilot.press("alt+up")
        assert chat.cursor_message is not None and chat.cursor_message.content == "The first words and the rest."
