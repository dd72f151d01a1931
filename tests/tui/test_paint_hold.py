"""The screen's repaints are held from Enter until the step's request has gone out
(`reply.PaintHold`): never longer than `HOLD_LIMIT` when the opening stalls, and never left held
after a step that settles, fails before its first update, or is refused; the footer's rebuild
waits for the same moment (`FitFooter.wait`)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tavern_tui.service import Tavern
from tavern_tui.service.steps.runner import StepRunner
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import reply
from tavern_tui.tui.widgets.fit_footer import FitFooter
from tests.tui.conftest import GATE, ScriptedProvider, wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina, send
from tests.tui.test_narrow import footer_keys


def _held(app: TavernApp) -> bool:
    return app._batch_count > 0  # Textual's count of open `batch_update` blocks


async def test_a_settled_step_and_a_failed_opening_leave_nothing_held(corpus_tavern: Tavern,
                                                                    scripted: ScriptedProvider,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    scripted.enqueue("By the river.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "Where is the mill?")
        await wait_until(pilot, lambda: not _held(app))  # released at the latest by the first update's timer
        assert chat.transcript.boxes[-1].text == "By the river."

        def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the card's build broke")

        monkeypatch.setattr(StepRunner, "_prepare_step", broken)  # fails before any update
        await send(pilot, chat, "And the road?")
        assert not chat.generating and not _held(app)


async def test_a_stalled_opening_paints_again_after_the_hold_limit(corpus_tavern: Tavern,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    go_on = threading.Event()
    prepare = StepRunner._prepare_step

    def stalled(self: Any, *args: Any, **kwargs: Any) -> Any:
        go_on.wait(30)  # a big book's index still being built, say
        return prepare(self, *args, **kwargs)

    monkeypatch.setattr(StepRunner, "_prepare_step", stalled)
    monkeypatch.setattr(reply, "HOLD_LIMIT", 0.05)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: chat.generating and not _held(app))
        assert not go_on.is_set()  # still opening: the screen paints again all the same
        go_on.set()
        await workers_idle(pilot, timeout=30)
        await wait_until(pilot, lambda: not chat.generating)
        assert not _held(app) and chat.transcript.boxes[-1].text == "Hm."


async def test_the_footer_is_rebuilt_once_the_request_has_gone_out(corpus_tavern: Tavern, scripted: ScriptedProvider,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    scripted.enqueue(GATE, "Hm.")  # the reply waits, so the chat is still replying when the footer is read
    go_on = threading.Event()
    prepare = StepRunner._prepare_step

    def stalled(self: Any, *args: Any, **kwargs: Any) -> Any:
        go_on.wait(30)
        return prepare(self, *args, **kwargs)

    monkeypatch.setattr(StepRunner, "_prepare_step", stalled)
    monkeypatch.setattr(reply, "HOLD_LIMIT", 30.0)  # held until the opening is let go
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        footer = chat.query_one(FitFooter)
        await wait_until(pilot, lambda: ("esc", "Stop") not in footer_keys(chat))
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: chat.generating and footer.waiting)
        await pilot.pause()
        # The keys changed (a reply is starting: Stop), but the rebuild waits for the request.
        assert _held(app) and ("esc", "Stop") not in footer_keys(chat)
        go_on.set()
        await wait_until(pilot, lambda: not _held(app) and not footer.waiting)
        await wait_until(pilot, lambda: ("esc", "Stop") in footer_keys(chat))
        scripted.gate.set()
        await workers_idle(pilot, timeout=30)
        await wait_until(pilot, lambda: not chat.generating)
