"""Home lists an imported chat with the name new lines get and the file's name for its old lines
(ctrl+y chooses), and a compacted chat with what was played and how much is summarised."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from textual.widgets import OptionList

from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.choose import ChooseScreen
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.home import HomeScreen
from tests.service.test_played_counts_and_names import write_imported
from tests.tui.conftest import ScriptedProvider, open_character, wait_until, workers_idle


def prompts(app: TavernApp) -> list[str]:
    listing = app.screen.query_one("#playthroughs", OptionList)
    return [str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count)]


async def test_home_says_who_you_play_as_and_counts_played_and_summarised(
        corpus_tavern: Tavern, scripted: ScriptedProvider, tmp_path: Path) -> None:
    corpus_tavern.ctx.settings = dataclasses.replace(corpus_tavern.ctx.settings, user_name="Ada")
    [chat] = corpus_tavern.imports.import_paths([write_imported(tmp_path / "Seraphina - 2024.jsonl", 40)])
    assert chat.ok
    seraphina = corpus_tavern.library.find_character("Seraphina")
    played = corpus_tavern.playthroughs.new_playthrough(seraphina.id).id
    session = corpus_tavern.playthroughs.playthrough(played).session_id
    corpus_tavern.store.events.append(session, [
        NewEvent(EventKind.USER_MESSAGE if n % 2 == 0 else EventKind.ASSISTANT_MESSAGE,
                 "user" if n % 2 == 0 else "assistant", {"content": f"Line {n}."}) for n in range(1999)])
    scripted.enqueue("A recap.")
    await corpus_tavern.compaction.compact(played, keep=11)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_character(pilot, "Seraphina", playthrough=False)
        # Enter opened a chat (pushed once its playthrough is read): back to home, the character highlighted
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await workers_idle(pilot)
        await wait_until(pilot, lambda: len(prompts(app)) == 2)
        compacted = next(p for p in prompts(app) if f"#{played} " in p)
        assert f"#{played} · 2,000 messages · 1,989 summarised · " in compacted
        imported = next(p for p in prompts(app) if f"#{chat.id} " in p)
        assert f"#{chat.id} · 40 messages · " in imported
        assert "you play as Ada (imported lines: User) · ctrl+y changes" in imported
        # ctrl+y on the imported chat: choose the file's name for new lines.
        listing = app.screen.query_one("#playthroughs", OptionList)
        listing.focus()
        listing.highlighted = next(i for i, p in enumerate(prompts(app)) if f"#{chat.id} " in p)
        await pilot.press("ctrl+y")
        await wait_until(pilot, lambda: isinstance(app.screen, ChooseScreen) and app.screen.is_mounted)
        await pilot.press("down", "enter")
        await wait_until(pilot, lambda: corpus_tavern.playthroughs.playthrough(chat.id).user_name == "User")
        await workers_idle(pilot)
        await wait_until(pilot, lambda: any(n.text == f"#{chat.id}: new lines are written as User."
                                            for n in app.notices))
        assert await asyncio.to_thread(lambda: corpus_tavern.playthroughs.playthrough(chat.id).imported_user) == "User"


async def test_home_reads_its_lists_once_at_start_and_again_after_a_chat(corpus_tavern: Tavern,
                                                                          scripted: ScriptedProvider) -> None:
    reads: list[bool] = []
    characters = corpus_tavern.library.characters
    corpus_tavern.library.characters = lambda **kw: reads.append(True) or characters(**kw)  # type: ignore[method-assign]
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: "Seraphina" in prompts_of(app, "#characters"))
        await workers_idle(pilot)
        assert len(reads) == 1
        await open_character(pilot, "Seraphina")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await wait_until(pilot, lambda: len(reads) == 2)  # coming back re-reads (counts changed)
        await workers_idle(pilot)
        assert len(reads) == 2


def prompts_of(app: TavernApp, selector: str) -> str:
    listing = app.screen.query_one(selector, OptionList)
    return " ".join(str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count))
