"""A line the step refuses before anything is stored (it cannot fit the context) goes back into
the composer: nothing the person typed is lost, and nothing of it is stored or queued."""

from __future__ import annotations

from textual.message import Message
from textual.notifications import Notify

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tests.tui.conftest import ScriptedProvider, wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina


async def test_a_line_too_long_for_the_context_goes_back_into_the_composer(corpus_tavern: Tavern,
                                                                           scripted: ScriptedProvider) -> None:
    seen: list[Message] = []
    line = "the glade is quiet tonight " * 3000  # ~24k tokens: far past the 4,095-token default context
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        before = [m.content for m in corpus_tavern.playthroughs.messages(chat.playthrough_id)]
        chat.prompt.value = line
        await pilot.press("end", "enter")
        await wait_until(pilot, lambda: any(isinstance(m, Notify) and "does not fit" in m.notification.message
                                            for m in seen) and not chat.generating)
        await workers_idle(pilot)
        assert chat.prompt.value == line.strip()  # given back, as typed (Enter sends it stripped)
        assert [m.content for m in corpus_tavern.playthroughs.messages(chat.playthrough_id)] == before
        assert corpus_tavern.inbox.pending(chat.playthrough_id) == []
        assert scripted.requests == []  # nothing was sent
