"""The status line's token gauge: the widget owns the quiet-moment wait and asks for the gauge with
`StatusLine.GaugeWanted`; the chat screen computes it off the event loop and hands it back."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from textual.message import Message

from tavern_tui.errors import TavernError
from tavern_tui.service import Tavern
from tavern_tui.tui import widgets
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.labels import compact_count
from tavern_tui.tui.widgets.status_line import StatusLine
from tests.tui.conftest import wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina


class Counted:
    """`context_gauge` wrapped: counts the calls and the threads they ran on; `fail` makes them raise."""

    def __init__(self, tavern: Tavern) -> None:
        self.real = tavern.steps.context_gauge
        self.threads: list[int] = []
        self.fail = False

    def __call__(self, playthrough_id: int) -> dict[str, Any]:
        self.threads.append(threading.get_ident())
        if self.fail:
            raise TavernError("the history cannot be read")
        return self.real(playthrough_id)


@pytest.fixture
def counted(corpus_tavern: Tavern, monkeypatch: pytest.MonkeyPatch) -> Counted:
    """`context_gauge` counted, and a short quiet moment (the tests wait on conditions, not on it)."""
    monkeypatch.setattr(widgets.status_line, "TOKEN_DELAY", 0.05)
    wrapped = Counted(corpus_tavern)
    monkeypatch.setattr(corpus_tavern.steps, "context_gauge", wrapped)
    return wrapped


def collect_gauge_wanted(seen: list[StatusLine.GaugeWanted]) -> Any:
    """A `message_hook` that keeps each `GaugeWanted` once (the hook sees a message at every hop)."""

    def hook(message: Message) -> None:
        if isinstance(message, StatusLine.GaugeWanted) and all(m is not message for m in seen):
            seen.append(message)

    return hook


async def test_a_burst_of_stale_calls_asks_once_and_shows_what_the_service_computed(
        corpus_tavern: Tavern, counted: Counted) -> None:
    wanted: list[StatusLine.GaugeWanted] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=collect_gauge_wanted(wanted)) as pilot:
        chat = await open_seraphina(pilot)
        await wait_until(pilot, lambda: chat.status.gauge is not None)  # the opening's own estimate
        await workers_idle(pilot)
        assert len(wanted) == len(counted.threads)  # each ask, one service call
        wanted.clear()
        counted.threads.clear()
        chat.status.show_gauge(None)  # so what shows next is this burst's answer

        for _ in range(3):  # well within the quiet moment: one estimate for the burst
            chat.status.gauge_stale()
        await wait_until(pilot, lambda: chat.status.gauge is not None)
        await workers_idle(pilot)

        assert chat.status._gauge_timer is None  # nothing more is waiting to ask
        assert [m.status_line for m in wanted] == [chat.status]
        assert len(counted.threads) == 1
        assert counted.threads[0] != threading.get_ident()  # in a worker, off the event loop
        expected = await asyncio.to_thread(counted.real, chat.playthrough_id)
        assert chat.status.gauge == expected
        assert chat.status.tokens == expected["tokens"] is not None
        assert f"{compact_count(expected['used'])} / {compact_count(expected['limit'])} tokens" in chat.status.line


async def test_a_gauge_the_service_cannot_compute_shows_none(corpus_tavern: Tavern, counted: Counted) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await wait_until(pilot, lambda: chat.status.gauge is not None)
        await workers_idle(pilot)
        assert "tokens" in chat.status.line
        counted.fail = True
        chat._update_tokens()  # what the screen calls after showing the chat again
        await wait_until(pilot, lambda: chat.status.gauge is None)
        await workers_idle(pilot)
        assert len(counted.threads) == 2 and chat.status.tokens is None
        assert "tokens" not in chat.status.line
