"""Bracketed text from a person, a model or an error is shown as written, never read as markup:
RP asides (`[OOC: back in five]`, `[Seraphina smiles]`), config keys (`[tools]`), and text that
looks like style or action tags, in every kind of widget the chat shows it in."""

from __future__ import annotations

import dataclasses

from textual.widgets import Static

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.confirm import ConfirmScreen
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.tree import TreeScreen
from tavern_tui.tui.widgets.message_box import MessageBox
from tests.tui.conftest import ScriptedProvider, screen_text, wait_until, workers_idle
from tests.tui.test_app import open_seraphina, send
from tests.tui.test_trace_pane import open_trace

ASIDES = ["[OOC: back in five]", "[Seraphina smiles]", "[tools]", "[b]bold[/b]", "[@click=app.quit]x[/]"]
LINE = " ".join(ASIDES)


def shows_all(text: str) -> bool:
    """Whether every bracketed piece is in `text` as written."""
    return all(aside in text for aside in ASIDES)


async def test_brackets_survive_in_every_widget(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue(LINE)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(160, 50)) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "hi " + LINE)
        await workers_idle(pilot)
        await pilot.pause()
        # Message bodies: the sent message and the streamed reply.
        assert screen_text(app).count("[Seraphina smiles]") == 2 and shows_all(screen_text(app))

        # A tool line (a tool result's one-line title), from a stored view given a tool result.
        stored = chat.transcript.boxes[-1].view
        assert stored is not None
        tool_view = dataclasses.replace(stored, tool_result={"name": "roll", "summary": "add it to [tools] allow "
                                                             + LINE, "status": "refused"})
        await chat.transcript.add(MessageBox.from_view(tool_view))
        await pilot.pause()
        assert shows_all(screen_text(app)) and "add it to [tools] allow" in screen_text(app)

        # A toast, as an error from the service would raise one.
        app.notify(f"limit of 4 requests ([tools] max_steps = 4) {LINE}", title="Tool [limit]", severity="error")
        # Textual's toast shows a notification without markup as `Content(message)`: literal text.
        await wait_until(pilot, lambda: any(n.title == "Tool [limit]" for n in app._notifications))
        [toast] = [n for n in app._notifications if n.title == "Tool [limit]"]
        assert toast.markup is False and toast.message == f"limit of 4 requests ([tools] max_steps = 4) {LINE}"
        # A screen's notify (how the chat says a reply failed) passes markup=True to the app.
        chat.notify("network: the connection closed (no finish_reason and no [DONE])", title="The reply failed")
        await wait_until(pilot, lambda: any(n.title == "The reply failed" for n in app._notifications))
        [failed] = [n for n in app._notifications if n.title == "The reply failed"]
        assert failed.markup is False and failed.message.endswith("no [DONE])")

        # The status line's detail (an error category or message).
        chat.status.detail = LINE
        await pilot.pause()
        assert shows_all(str(chat.status.render())) and shows_all(screen_text(app))

        # The branch tree: the variant previews are the messages' text.
        await pilot.press("f5")
        await wait_until(pilot, lambda: isinstance(app.screen, TreeScreen) and app.screen.is_mounted)
        await workers_idle(pilot)
        await pilot.pause()
        assert "[Seraphina smiles]" in screen_text(app) and "[OOC: back in five]" in screen_text(app)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)

        # A modal asking about a name with brackets.
        app.push_screen(ConfirmScreen(f"Archive {LINE}?", confirm="Archive"))
        await pilot.pause()
        question = app.screen.query_one("#confirm-question", Static)
        assert shows_all(str(question.render())) and shows_all(screen_text(app))
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)

        # The trace pane: the request list and the detail of what was sent.
        trace = await open_trace(pilot)
        await workers_idle(pilot)
        assert shows_all(trace.detail_text)

