"""A chat's first open shows the transcript before it parses the bound world books: only MVU
state needed them there (finding an uncommitted initial record reads the books' [InitVar]
entries), and the world-info warm-up parses them after the first paint anyway (1-2 s for a
5,000-entry book). Until the warm-up has looked at MVU state the chat is not "plain" (a reply
settles as usual); then a chat without MVU state is."""

from __future__ import annotations

from pathlib import Path

import pytest

import tavern_tui.formats.worldinfo as worldinfo
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tests.tui.conftest import open_character, wait_until, workers_idle


async def test_the_first_open_shows_the_chat_before_parsing_its_books(
        corpus_tavern: Tavern, corpus_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [book] = corpus_tavern.imports.import_paths([corpus_dir / "worldbooks" / "eldoria_st_staging.json"])
    assert book.ok and book.id is not None
    corpus_tavern.lore.bind_world_book(book.id, "global", None)
    app = TavernApp(corpus_tavern)
    parsed: list[bool] = []  # per parse of a stored book: was the transcript already shown?
    parse = worldinfo.parse_world_book

    def recorded(*args, **kwargs):  # type: ignore[no-untyped-def]
        screen = app.screen
        parsed.append(isinstance(screen, ChatScreen) and bool(screen.transcript.boxes))
        return parse(*args, **kwargs)

    monkeypatch.setattr(worldinfo, "parse_world_book", recorded)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_character(pilot, "Seraphina")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and bool(app.screen.transcript.boxes))
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await workers_idle(pilot)
        await wait_until(pilot, lambda: chat.plain)  # the warm-up looked: no MVU state here
        assert parsed and all(parsed)
