"""A reply that failed before any text says why in the chat, where its text would be: the
status line says it once (cut short at 80 columns) and not at all after a restart."""

from __future__ import annotations

from tavern_tui.errors import NetworkError
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tests.tui.conftest import ScriptedProvider, wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina, send

WHY = "Could not connect to the endpoint (http://127.0.0.1:5999/v1/chat/completions). Is the server running there?"


async def test_a_reply_that_failed_before_any_text_shows_why_after_a_restart(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue(NetworkError(WHY))
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "Are you there?")
    app = TavernApp(corpus_tavern)  # a restart: only what is stored
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await workers_idle(pilot)
        failed = chat.transcript.boxes[-1]
        assert failed.view is not None and failed.view.partial and failed.view.content == ""
        assert str(failed.header.mark) == "error · network"  # type: ignore[union-attr]
        await wait_until(pilot, lambda: str(failed.body.render()) == f"no reply: {WHY}")


async def test_a_swipe_back_to_a_reply_that_failed_shows_why(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    # A trial: after a failed reply and a regeneration, ctrl+← showed "error · network" over an
    # empty body (the swipe shows the other variant in the same box, which drew only its text).
    scripted.enqueue(NetworkError(WHY))
    scripted.enqueue("The lantern is lit again.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "Are you there?")
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: not chat.generating and chat.status.swipe == "swipe 2/2")
        await workers_idle(pilot)
        await pilot.press("ctrl+left")
        await wait_until(pilot, lambda: chat.status.swipe == "swipe 1/2")
        await workers_idle(pilot)
        failed = chat.transcript.boxes[-1]
        assert failed.view is not None and failed.view.partial
        assert str(failed.body.render()) == f"no reply: {WHY}"
