"""Pilot test: a card with regex scripts asks once for the allowance (as SillyTavern does); once
allowed, the transcript shows the scripts' display text (update block hidden, status bar as text)."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Collapsible

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.confirm import ConfirmScreen
from tavern_tui.tui.screens.chat import ChatScreen
from tests.tui.conftest import ScriptedProvider, open_character, wait_until
from tests.tui.test_app import SIZE, send

REPLY = "她笑了。\n<UpdateVariable>\n_.set('理.好感度[0]', 0, 10);//开心\n</UpdateVariable>\n<StatusPlaceHolderImpl/>"


async def test_regex_scripts_are_allowed_once_and_shape_the_transcript(corpus_tavern: Tavern,
                                                                      scripted: ScriptedProvider,
                                                                      corpus_dir: Path) -> None:
    result = corpus_tavern.imports.import_paths([corpus_dir / "stateful" / "qingkong_li_mvu.png"])[0]
    assert result.ok and result.id is not None
    scripted.enqueue(REPLY)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await open_character(pilot, "青空 理")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen)
                         and bool(app.screen.query("#confirm-question")))  # pushed, then composed
        assert "6 embedded regex script(s)" in str(app.screen.query_one("#confirm-question").content)
        await pilot.press("y")
        await wait_until(pilot, lambda: corpus_tavern.scripts.allowed(result.id))
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await send(pilot, chat, "你好")
        # The status page is folded into one line under the reply's words (its page script cannot run here).
        await wait_until(pilot, lambda: bool(chat.transcript.boxes[-1].query(".panel")))
        box = chat.transcript.boxes[-1]
        assert "角色状态" in str(box.query_one(".panel", Collapsible).title)
        shown = box.text
        assert "UpdateVariable" not in shown and "<" not in shown and shown == "她笑了。"
        # The raw reply stays in the log.
        assert corpus_tavern.playthroughs.messages(chat.playthrough_id)[-1].content == REPLY
