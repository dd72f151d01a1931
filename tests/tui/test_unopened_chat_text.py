"""A chat that cannot be opened (another process holds the database's write lock past the busy
timeout) goes back to the list with its error; what was typed into it meanwhile is not lost: it
is back in the message box when that chat opens."""

from __future__ import annotations

import asyncio
import threading

import pytest
from textual.message import Message

from tavern_tui.errors import StoreBusy
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.home import HomeScreen
from tests.tui.conftest import notes, open_character, wait_until

SIZE = (120, 40)
BUSY = "the database is busy: another tavern window or command has held its write lock"


@pytest.mark.parametrize("draft_kept", [False, True], ids=["draft write locked too", "draft written"])
async def test_text_typed_into_a_chat_that_could_not_open_comes_back_when_it_opens(
        corpus_tavern: Tavern, monkeypatch: pytest.MonkeyPatch, draft_kept: bool) -> None:
    real_open, real_save = corpus_tavern.playthroughs.open_playthrough, corpus_tavern.inbox.save_draft
    gate, asked = threading.Event(), threading.Event()

    def locked(playthrough_id: int):  # noqa: ANN202
        asked.set()
        gate.wait(10)
        raise StoreBusy(BUSY)

    def save_locked(playthrough_id: int, text: str) -> None:
        raise StoreBusy(BUSY)

    monkeypatch.setattr(corpus_tavern.playthroughs, "open_playthrough", locked)
    if not draft_kept:
        monkeypatch.setattr(corpus_tavern.inbox, "save_draft", save_locked)
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await open_character(pilot, "Seraphina")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and asked.is_set())
        pid = app.screen.playthrough_id
        await pilot.press(*"Wait for me")
        assert app.screen.prompt.value == "Wait for me"
        if draft_kept:  # the composer's quiet-moment save went through before the open failed
            await wait_until(pilot, lambda: corpus_tavern.inbox.draft(pid) == "Wait for me")
        gate.set()
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await wait_until(pilot, lambda: any(BUSY in n for n in notes(seen))
                         and any("is kept" in n for n in notes(seen)))
        monkeypatch.setattr(corpus_tavern.playthroughs, "open_playthrough", real_open)
        monkeypatch.setattr(corpus_tavern.inbox, "save_draft", real_save)
        stored = await asyncio.to_thread(corpus_tavern.inbox.draft, pid)
        assert stored == ("Wait for me" if draft_kept else "")  # the app's memory carries it when the store could not
        await pilot.press("enter")  # the same character, now the lock is gone
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted
                         and bool(app.screen.transcript.boxes))
        assert app.screen.prompt.value == "Wait for me"
