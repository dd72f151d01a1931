"""Closing a chat gives the heap back to the collector once: its world-info warm-up froze the heap
(`gc.freeze`, so full collections skip the books), and once the chat is closed and home painted a
worker collects once and freezes what is alive again (`release_heap`). Unfreezing alone left the
whole heap to the next full collection, which then ran inside the next chat's opening."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.home import HomeScreen
from tests.tui.conftest import wait_until, workers_idle
from tests.tui.test_app import open_seraphina


@pytest.fixture(autouse=True)
def _thaw() -> Iterator[None]:
    yield
    gc.unfreeze()  # the test process's objects go back to the collector


def _full_collections() -> int:
    return int(gc.get_stats()[2]["collections"])


async def test_closing_a_chat_collects_once_and_freezes_the_heap_again(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_seraphina(pilot)
        await workers_idle(pilot)  # the warm-up has run: the heap is frozen
        frozen = gc.get_freeze_count()
        assert frozen > 0
        before = _full_collections()
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await wait_until(pilot, lambda: _full_collections() > before and not app.workers)
        assert gc.get_freeze_count() > 0  # what is alive is frozen again, not left to the next opening
