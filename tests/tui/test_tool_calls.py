"""Pilot tests (issue 19 §4, §6): a tool call is one compact line in the transcript,
expandable (Enter on it) to its arguments and result; a call the config does not allow is
asked about in a modal — refuse (not run, the model reads the refusal), always for this tool
(runs now and next time without asking)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Collapsible

from tavern_tui.config import Settings, ToolSettings
from tavern_tui.engine.stream import (
    BaseProvider,
    ChatRequest,
    Finished,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCalls,
    Usage,
)
from tavern_tui.service import Tavern
from tavern_tui.tools import Toolbox, ToolSpec
from tavern_tui.tools.builtin import RollDice
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.tool_ask import ToolAskScreen
from tests.tui.conftest import wait_until
from tests.tui.test_app import SIZE, open_seraphina, send


class ToolModel(BaseProvider):
    """Replies from scripts: each a list of `TextDelta`/`ToolCalls` events."""

    name = "scripted"
    model = "script-1"

    def __init__(self) -> None:
        self.scripts: list[list[StreamEvent]] = []
        self.requests: list[ChatRequest] = []

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        events = self.scripts.pop(0) if self.scripts else [TextDelta("Hm.")]
        for event in events:
            yield event
        yield Usage(10, 5, 15)
        yield Finished("tool_calls" if any(isinstance(e, ToolCalls) for e in events) else "stop")


def calls(*items: tuple[str, str, str]) -> ToolCalls:
    return ToolCalls(tuple(ToolCall(cid, name, args, i) for i, (cid, name, args) in enumerate(items)))


@pytest.fixture
def model() -> ToolModel:
    return ToolModel()


@pytest.fixture
def tavern(db_url: str, corpus_dir: Path, model: ToolModel) -> Iterator[Tavern]:
    service = Tavern(Settings(db_url=db_url, tools=ToolSettings(enabled=("roll_dice",))), provider=model)
    assert all(r.ok for r in service.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"]))
    yield service
    service.close()


async def test_a_roll_is_one_line_that_expands(tavern: Tavern, model: ToolModel) -> None:
    model.scripts = [[calls(("call_1", "roll_dice", '{"expression": "2d6+1"}'))], [TextDelta("You go first.")]]
    async with TavernApp(tavern).run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "Roll for initiative!")
        result = next(m for m in tavern.playthroughs.messages(chat.playthrough_id) if m.role == "tool")
        rolled = json.loads(result.content)
        line = f"roll_dice 2d6+1 → [{rolled['rolls'][0]}, {rolled['rolls'][1]}] + 1 = {rolled['total']}"
        await wait_until(pilot, lambda: any(b.has_class("-tool") for b in chat.transcript.boxes))
        [box] = [b for b in chat.transcript.boxes if b.has_class("-tool")]
        section = box.query_one(".tool-call", Collapsible)
        assert section.title == line and section.collapsed
        assert [b.text for b in chat.transcript.boxes if b.has_class("-assistant")][-1] == "You go first."
        hidden = [b for b in chat.transcript.boxes if b.has_class("-calls-only")]
        assert len(hidden) == 1 and not hidden[0].display  # the reply that only called: its line stands for it
        section.query_one("CollapsibleTitle").focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: not section.collapsed)
        details = str(box.body.content)
        assert 'arguments: {"expression": "2d6+1"}' in details and result.content in details


class Notes:
    """An unknown-risk tool that records its calls."""

    spec = ToolSpec("burn_notes", "Burns the notes", {"type": "object", "properties": {"which": {"type": "string"}}},
                    "unknown", "mcp:lab")

    def __init__(self) -> None:
        self.ran: list[dict[str, Any]] = []

    async def call(self, arguments: dict[str, Any]) -> tuple[str, str]:
        self.ran.append(arguments)
        return "burnt", "burnt"


async def test_the_guard_asks_refuse_then_always(tavern: Tavern, model: ToolModel,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    notes = Notes()
    guard = tavern.tools.guard
    monkeypatch.setattr(tavern.tools, "toolbox", lambda _pid: Toolbox([RollDice(), notes], guard))
    burn = ("call_b", "burn_notes", '{"which": "diary"}')
    model.scripts = [[calls(burn)], [TextDelta("As you wish.")],
                     [calls(("call_c", "burn_notes", '{"which": "letters"}'))], [TextDelta("Burnt.")],
                     [calls(("call_d", "burn_notes", '{"which": "maps"}'))], [TextDelta("Again.")]]
    async with TavernApp(tavern).run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "Burn my diary.", wait=False)
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ToolAskScreen) and pilot.app.screen.is_mounted)
        assert "burn_notes" in str(pilot.app.screen.query_one("#tool-ask-what").content)
        assert '"which": "diary"' in str(pilot.app.screen.query_one("#tool-ask-arguments").content)
        await pilot.press("escape")  # refuse
        await wait_until(pilot, lambda: len(model.requests) == 2 and not chat.generating)
        assert notes.ran == []
        refusal = model.requests[1].messages[-1]
        assert refusal["role"] == "tool" and "refused" in json.loads(refusal["content"])["refused"]

        await send(pilot, chat, "Burn the letters.", wait=False)
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ToolAskScreen) and pilot.app.screen.is_mounted)
        await pilot.click("#always")
        await wait_until(pilot, lambda: len(model.requests) == 4 and not chat.generating)
        assert notes.ran == [{"which": "letters"}]
        await send(pilot, chat, "And the maps.")
        await wait_until(pilot, lambda: len(model.requests) == 6 and not chat.generating)
        assert notes.ran == [{"which": "letters"}, {"which": "maps"}]  # not asked again
        assert not isinstance(pilot.app.screen, ToolAskScreen)


async def test_the_preview_lists_the_tools_the_request_carries(tavern: Tavern, model: ToolModel,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from tavern_tui.tools.guard import Guard
    from tests.tui.test_strategy import open_strategy

    notes = Notes()
    guard = Guard()
    monkeypatch.setattr(tavern.tools, "toolbox", lambda _pid: Toolbox([RollDice(), notes], guard))
    async with TavernApp(tavern).run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        guard.asker = tavern.tools.guard.asker  # the app's modal asks: an unknown-risk call is "ask"
        screen = await open_strategy(pilot)
        assert "tools  roll_dice (safe, builtin), burn_notes (unknown, mcp:lab, ask)" in screen.preview_text
        assert " tokens · 2 tools (listed below)" in screen.preview_text.splitlines()[0]
        await pilot.press("escape")
        await wait_until(pilot, lambda: pilot.app.screen is chat)
        await send(pilot, chat, "Hello.")
        sent = [t["function"]["name"] for t in model.requests[0].tools]
        assert sent == ["roll_dice", "burn_notes"]  # what the preview listed, in order


@pytest.mark.usefixtures("no_cursor_blink")
@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_of_a_tool_call_and_its_result(snap_compare, tavern: Tavern, model: ToolModel,
                                                size: tuple[int, int]) -> None:
    # Seeded, so the roll is the same every run: 2d6 of Random(7) is [2, 1], + 1 = 4.
    model.scripts = [[TextDelta("*Seraphina tosses two dice onto the table.* "),
                      calls(("call_1", "roll_dice", '{"expression": "2d6+1", "seed": 7}'))],
                     [TextDelta("A four. The shadowfang moves first; brace yourself.")]]

    async def roll(pilot: Any) -> None:
        from tavern_tui.tui.screens.chat import TOKEN_DELAY
        from tests.tui.conftest import workers_idle

        chat = await open_seraphina(pilot)
        await send(pilot, chat, "Roll for initiative!")
        await wait_until(pilot, lambda: any(b.has_class("-tool") for b in chat.transcript.boxes)
                         and not chat.generating)
        [box] = [b for b in chat.transcript.boxes if b.has_class("-tool")]
        section = box.query_one(".tool-call", Collapsible)
        assert section.title == "roll_dice 2d6+1 → [2, 1] + 1 = 4"
        section.collapsed = False  # the call line expanded: its arguments and its result
        await pilot.pause(TOKEN_DELAY + 0.2)
        await workers_idle(pilot)
        chat.transcript.scroll_end(animate=False)
        await pilot.pause()

    assert snap_compare(TavernApp(tavern), terminal_size=size, run_before=roll)


def test_a_drafts_preview_lists_the_tools_too(tavern: Tavern) -> None:
    from tavern_tui.tui.screens.draft import preview_text

    seraphina = tavern.library.find_character("Seraphina")
    draft = tavern.openings.new_draft(seraphina.id)
    shown = tavern.steps.preview_draft(draft.id)
    assert shown["tools"] == [{"name": "roll_dice", "risk": "safe", "source": "builtin", "allowed": "allowed"}]
    assert preview_text(shown).splitlines()[1] == "tools offered: roll_dice (safe, builtin)"


async def test_the_trace_pane_names_the_tools_offered_and_the_results(tavern: Tavern, model: ToolModel) -> None:
    from tests.tui.test_trace_pane import open_trace

    model.scripts = [[calls(("call_1", "roll_dice", '{"expression": "d20", "seed": 7}'))], [TextDelta("Six.")]]
    async with TavernApp(tavern).run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "Roll.")
        await wait_until(pilot, lambda: len(model.requests) == 2 and not chat.generating)
        screen = await open_trace(pilot)
        text = screen.detail_text  # the newest request: the step after the roll
        assert "tools offered  roll_dice (schemas sha256 " in text
        assert "turn step  2, after the tool results below" in text
        assert "  result roll_dice [ok]" in text
