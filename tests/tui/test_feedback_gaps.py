"""Small feedback gaps, each on the real app (or the real CLI / world-info engine): a swipe that
cannot move says why, the queued line being edited is marked, the tool guard's buttons move with
←/→, the chat title names the preset, `mvu init --greeting` counts from 1, a world-info reason
says how far back the message is, and the swipe counter leaves the status line while a reply streams."""

from __future__ import annotations

import io
from pathlib import Path

from textual.widgets import Button

from tavern_tui.cli import main
from tavern_tui.lore.context import ActivationContext, ScanMessage
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.tool_ask import ToolAskScreen
from tavern_tui.tui.screens.chat import ChatScreen
from tests.lore._util import book, entry, run
from tests.tui.conftest import GATE, ScriptedProvider, wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina, send
from tests.tui.test_composer import start_gated_reply, type_and_enter


async def test_swiping_a_one_greeting_cards_greeting_says_so(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        before = [b.text for b in chat.transcript.boxes]
        await pilot.press("ctrl+right")
        await wait_until(pilot, lambda: any(n.title == "Swipe" for n in app.notices))
        assert [n.text for n in app.notices if n.title == "Swipe"] == [
            "This card has one greeting: there is nothing to swipe to."]
        await workers_idle(pilot)
        assert [b.text for b in chat.transcript.boxes] == before


async def test_the_queued_line_being_edited_is_marked(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await start_gated_reply(pilot, chat, scripted)
        await type_and_enter(pilot, "first queued")
        await type_and_enter(pilot, "second queued")
        await wait_until(pilot, lambda: len(chat.queue.items) == 2)
        await pilot.press("up", "up")
        assert chat.prompt.value == "first queued"
        lines = str(chat.queue.content).splitlines()
        assert lines == ["✎ 1 · queued · editing · first queued", "2 · queued · second queued"]
        spans = [(span.style, str(chat.queue.content)[span.start:span.end])
                 for span in chat.queue.content.spans]  # type: ignore[attr-defined]
        assert ("reverse bold", "✎ 1 · queued · editing · first queued") in spans
        await pilot.press("escape")  # leave the edit: the item is as it was, unmarked
        assert str(chat.queue.content).splitlines() == ["1 · queued · first queued",
                                                              "2 · queued · second queued"]
        scripted.gate.set()
        await wait_until(pilot, lambda: not chat.generating)
        await workers_idle(pilot)


async def test_the_tool_guard_buttons_move_with_the_arrow_keys(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        answers: list[str | None] = []
        await app.push_screen(ToolAskScreen("roll_dice", "builtin", "low", {"sides": 6}), answers.append)
        await wait_until(pilot, lambda: isinstance(app.screen, ToolAskScreen) and app.screen.is_mounted)

        def focused() -> str | None:
            return app.focused.id if isinstance(app.focused, Button) else None

        await wait_until(pilot, lambda: focused() is not None)
        await pilot.press("left", "left", "left")  # stops at the first
        assert focused() == "once"
        await pilot.press("right")
        assert focused() == "always"
        await pilot.press("right", "right")  # stops at the last
        assert focused() == "refuse"
        await pilot.press("left")
        assert focused() == "always"
        await pilot.press("enter")
        await wait_until(pilot, lambda: answers == ["always"])


async def test_the_chat_title_names_the_bound_preset(corpus_tavern: Tavern, corpus_dir: Path) -> None:
    [preset] = corpus_tavern.imports.import_paths([corpus_dir / "presets" / "st_openai_default_staging.json"])
    seraphina = corpus_tavern.library.find_character("Seraphina")
    pid = corpus_tavern.playthroughs.new_playthrough(seraphina.id).id
    corpus_tavern.presets.bind_preset(pid, preset.id)
    name = corpus_tavern.presets.find_preset(str(preset.id)).name
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = ChatScreen(corpus_tavern, pid)
        await app.push_screen(chat)
        title = chat.query_one("#chat-title")
        await wait_until(pilot, lambda: f"· preset {name}" in str(title.content))  # type: ignore[attr-defined]
        assert f"preset #{preset.id}" not in str(title.content)  # type: ignore[attr-defined]


def test_mvu_init_counts_greetings_from_one(corpus_dir: Path) -> None:
    card = str(corpus_dir / "stateful" / "qingkong_li_mvu.png")
    out, err = io.StringIO(), io.StringIO()
    assert main(["mvu", "init", card, "--greeting", "2", "--json"], out, err) == 0, err.getvalue()
    import json

    result = json.loads(out.getvalue())
    assert result["greeting"] == 2 and result["record"]["stat_data"]["理"]["好感度"][0] == 15  # the second greeting
    out = io.StringIO()
    assert main(["mvu", "init", card, "--json"], out, io.StringIO()) == 0
    assert json.loads(out.getvalue())["record"]["stat_data"]["理"]["好感度"][0] == 0  # default: the first
    err = io.StringIO()
    assert main(["mvu", "init", card, "--greeting", "0"], io.StringIO(), err) != 0
    assert "--greeting counts from 1 (1 = the card's first greeting, 2… its alternate greetings), not 0" \
        in err.getvalue()
    err = io.StringIO()
    assert main(["mvu", "init", card, "--greeting", "9"], io.StringIO(), err) != 0
    assert "no greeting 9 (the card has 4: 1 to 4)" in err.getvalue()


def test_a_world_info_reason_says_how_far_back_the_message_is() -> None:
    messages = [ScanMessage("Bob", "a dragon", (6, 159)), ScanMessage("Alice", "oh", (6, 160)),
                ScanMessage("Bob", "hm", (6, 161))]
    ctx = ActivationContext(messages=messages, input=None, user_name="User", char_name="Alice")
    decision = run(book(entry(1, ["dragon"]), scan_depth=5), ctx).decision("book", 1)
    assert decision.matched_in == (6, 159)
    assert decision.detail == "key 'dragon' found in the 3rd newest message (Bob)"
    # With a line being sent, that line is the newest message: the one before it is the 2nd newest.
    sent = ActivationContext(messages=messages[2:], input="a dragon?", user_name="User", char_name="Alice")
    assert run(book(entry(1, ["hm"]), scan_depth=5), sent).decision("book", 1).detail == \
        "key 'hm' found in the 2nd newest message (Bob)"


async def test_the_swipe_counter_leaves_the_status_while_a_new_reply_streams(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue("Reply one.")
    scripted.enqueue("Reply two.")
    scripted.enqueue("Reply ", GATE, "three.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "hello")
        await pilot.press("ctrl+right")
        await wait_until(pilot, lambda: not chat.generating and chat.status.swipe == "swipe 2/2")
        await pilot.press("ctrl+left")
        await wait_until(pilot, lambda: chat.status.swipe == "swipe 1/2")
        await send(pilot, chat, "and then?", wait=False)
        await wait_until(pilot, lambda: chat.generating and chat.status.state == "streaming")
        assert chat.status.swipe == "" and "swipe" not in chat.status.line
        scripted.gate.set()
        await wait_until(pilot, lambda: not chat.generating and chat.transcript.boxes[-1].text == "Reply three.")
        assert chat.status.swipe == ""  # the new reply has no other swipes
