"""The chat's status line says "OOC" while the playthrough's out-of-character talk is on (the
roleplay policy is then not sent; `tavern ooc`), and nothing of the kind while roleplay is on."""

from __future__ import annotations

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tests.tui.conftest import open_character, wait_until


async def test_the_status_line_shows_ooc_only_while_it_is_on(corpus_tavern: Tavern) -> None:
    seraphina = corpus_tavern.library.find_character("Seraphina")
    first = corpus_tavern.playthroughs.new_playthrough(seraphina.id).id
    corpus_tavern.roleplay.set_ooc(first, True)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(120, 30)) as pilot:
        await open_character(pilot, "Seraphina")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and app.screen.status.ooc)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        assert chat.status.line.split("  ·  ")[:2] == [corpus_tavern.provider_label, "OOC"]
        chat.status.ooc = False  # as a chat with roleplay on opens
        assert "OOC" not in chat.status.line
