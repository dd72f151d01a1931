"""Issue 16: a 120×40 snapshot of a chat whose oldest messages a summary replaced (the summary
block, its collapsed originals, the context gauge)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from tavern_tui.engine.events import EventKind, NewEvent, Origin
from tavern_tui.engine.log import SUMMARY_SOURCE, derive_messages
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tests.tui.conftest import wait_until, workers_idle
from tests.tui.test_context_gauge import bound_playthrough

pytestmark = pytest.mark.usefixtures("no_cursor_blink")


def test_chat_with_a_summary_block(snap_compare, corpus_tavern: Tavern, corpus_dir: Path, tmp_path: Path) -> None:
    pid = bound_playthrough(corpus_tavern, corpus_dir, tmp_path, 32768, 12)
    session = corpus_tavern.playthroughs.playthrough(pid).session_id
    chat = [m for m in derive_messages(corpus_tavern.store.events, session) if m.source != "system-prompt"]
    # Fixed dates, so the block's title does not follow the day the test runs.
    corpus_tavern.store.events.append(session, [NewEvent(EventKind.SURFACE_REPLACED, "system", {
        "targets": [list(m.ref) for m in chat[:9]],
        "message": {"role": "system", "content": "Ann woke in Seraphina's glade; they spoke of the lantern and "
                    "the old tower. Open thread: who lit the tower's lamp?",
                    "summary": {"covers": 9, "from": "2026-03-12T09:00:00+00:00", "to": "2026-03-14T21:00:00+00:00"}}},
        Origin.ENGINE, SUMMARY_SOURCE)])

    async def opened(pilot: Pilot[object]) -> None:
        screen = ChatScreen(corpus_tavern, pid)
        await pilot.app.push_screen(screen)
        await wait_until(pilot, lambda: bool(screen.transcript.boxes) and screen.status.gauge is not None)
        await workers_idle(pilot)
        screen.transcript.scroll_home(animate=False)
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=(120, 40), run_before=opened)
