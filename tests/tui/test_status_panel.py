"""Pilot tests with the MVU demo card (青空 理, six regex scripts): its status page, which a page script
fills, is one folded line under the reply's own words; and the regex-script question comes before the
first request, so that request already goes through the allowed scripts."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Collapsible, Static

from tavern_tui.scripts.panels import PANEL_MARK
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.messages import PlaythroughChosen
from tavern_tui.tui.modals.confirm import ConfirmScreen
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.draft import DraftScreen
from tests.tui.conftest import ScriptedProvider, open_character, screen_text, wait_until, workers_idle
from tests.tui.test_app import SIZE, send

REPLY = ("理轻轻点头，露出微笑。\n\n“欢迎您，牧师先生。”\n"
         "<UpdateVariable>\n_.set('理.好感度[0]', 15, 20);//第一次见面很愉快\n</UpdateVariable>\n"
         "<StatusPlaceHolderImpl/>")


def import_card(tavern: Tavern, corpus_dir: Path) -> int:
    result = tavern.imports.import_paths([corpus_dir / "stateful" / "qingkong_li_mvu.png"])[0]
    assert result.ok and result.id is not None
    return result.id


def asked(app: TavernApp) -> bool:
    return isinstance(app.screen, ConfirmScreen) and bool(app.screen.query("#confirm-question"))


async def test_the_status_page_is_one_line_under_the_reply(corpus_tavern: Tavern, scripted: ScriptedProvider,
                                                           corpus_dir: Path) -> None:
    character_id = import_card(corpus_tavern, corpus_dir)
    corpus_tavern.scripts.set_allowed(character_id)
    playthrough_id = corpus_tavern.playthroughs.new_playthrough(character_id).id
    corpus_tavern.timeline.swipe(playthrough_id, 1)  # greeting 2, which carries the update block
    scripted.enqueue(REPLY)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await open_character(pilot, "青空 理")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and bool(app.screen.transcript.boxes))
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await send(pilot, chat, "你好")
        reply = chat.transcript.boxes[-1]
        await wait_until(pilot, lambda: reply.view is not None and bool(reply.query(".panel")))
        await workers_idle(pilot)
        await pilot.pause()
        shown = screen_text(app)
        # The reply's own words are on screen; the page is its one line, its static defaults are not.
        assert "理轻轻点头，露出微笑。" in shown and "“欢迎您，牧师先生。”" in shown
        assert "[status panel 角色状态: ctrl+g shows the live state]" in shown
        assert "仅显示变更" not in shown and "UpdateVariable" not in shown and "_.set(" not in shown
        panel = reply.query_one(".panel", Collapsible)
        assert panel.collapsed and panel.outer_size.height <= 2
        # The greeting (display depth 2) folds its page too.
        greeting = chat.transcript.boxes[0]
        assert len(greeting.query(".panel")) == 1 and greeting.query_one(".panel", Collapsible).collapsed
        # Enter on the panel's line shows the page's static text, with the note saying why it may be stale.
        panel.query_one("CollapsibleTitle").focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: not panel.collapsed)
        page = str(panel.query_one(".panel-text").render())
        assert page.startswith("(a page script fills in this panel") and "好感度" in page
        # The log keeps the raw reply.
        assert corpus_tavern.playthroughs.messages(playthrough_id)[-1].content == REPLY
        assert PANEL_MARK not in corpus_tavern.playthroughs.messages(playthrough_id)[-1].content


async def test_the_draft_asks_before_the_first_request(corpus_tavern: Tavern, scripted: ScriptedProvider,
                                                       corpus_dir: Path) -> None:
    character_id = import_card(corpus_tavern, corpus_dir)
    scripted.enqueue("理安静地听着。")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await open_character(pilot, "青空 理", playthrough=False)  # never played: an opening draft
        await wait_until(pilot, lambda: asked(app))
        assert "6 embedded regex script(s)" in str(app.screen.query_one("#confirm-question").content)
        assert scripted.requests == [] and corpus_tavern.playthroughs.playthroughs(character_id) == []
        await pilot.press("y")
        await wait_until(pilot, lambda: corpus_tavern.scripts.allowed(character_id)
                         and isinstance(app.screen, DraftScreen))
        draft = app.screen
        assert isinstance(draft, DraftScreen)
        await pilot.press("ctrl+right")
        await wait_until(pilot, lambda: draft.draft is not None and draft.draft.greeting_index == 1)
        # The swiped greeting is redrawn through the card's display scripts in a worker: wait for it.
        def greeting() -> str:  # the Markdown source the draft draws
            return str(getattr(draft.query_one("#draft-greeting-text", Static).content, "markup", ""))

        await wait_until(pilot, lambda: "“我叫理。”她说" in greeting() and "<UpdateVariable>" not in greeting()
                         and "_.set(" not in greeting())
        await pilot.press(*"你好", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and len(scripted.requests) == 1)
        chat = app.screen
        await wait_until(pilot, lambda: not chat.generating and chat.transcript.boxes[-1].text == "理安静地听着。")
        sent = "\n".join(str(m.get("content", "")) for m in scripted.requests[0].messages)
        assert "“我叫理。”她说" in sent  # greeting 2 was sent ...
        assert "<UpdateVariable>" not in sent and "_.set(" not in sent  # ... without its update block
        assert "StatusPlaceHolderImpl" not in sent
        assert not asked(app)  # asked once: the chat did not ask again


async def test_a_chat_holds_its_opening_line_until_the_question_is_answered(corpus_tavern: Tavern,
                                                                            scripted: ScriptedProvider,
                                                                            corpus_dir: Path) -> None:
    character_id = import_card(corpus_tavern, corpus_dir)
    playthrough_id = corpus_tavern.playthroughs.new_playthrough(character_id).id
    corpus_tavern.timeline.swipe(playthrough_id, 1)
    scripted.enqueue("理安静地听着。")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await workers_idle(pilot)
        app.post_message(PlaythroughChosen(playthrough_id, send="你好"))  # as a draft's first send opens it
        await wait_until(pilot, lambda: asked(app))
        await workers_idle(pilot)
        assert scripted.requests == []  # the line waits for the answer
        await pilot.press("y")
        await wait_until(pilot, lambda: len(scripted.requests) == 1)
        sent = "\n".join(str(m.get("content", "")) for m in scripted.requests[0].messages)
        assert "你好" in sent and "“我叫理。”她说" in sent
        assert "<UpdateVariable>" not in sent and "StatusPlaceHolderImpl" not in sent


async def test_a_refusal_lets_the_chat_play_without_the_scripts(corpus_tavern: Tavern, scripted: ScriptedProvider,
                                                                corpus_dir: Path) -> None:
    character_id = import_card(corpus_tavern, corpus_dir)
    playthrough_id = corpus_tavern.playthroughs.new_playthrough(character_id).id
    corpus_tavern.timeline.swipe(playthrough_id, 1)
    scripted.enqueue("理安静地听着。")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await open_character(pilot, "青空 理")
        await wait_until(pilot, lambda: asked(app))
        assert scripted.requests == []
        await pilot.press("n")  # refused: the scripts stay off, and the chat can be played
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await send(pilot, chat, "你好")
        await wait_until(pilot, lambda: len(scripted.requests) == 1)
        assert not corpus_tavern.scripts.allowed(character_id)
        sent = "\n".join(str(m.get("content", "")) for m in scripted.requests[0].messages)
        assert "<UpdateVariable>" in sent  # not allowed: SillyTavern sends the greeting as it is
