"""Pilot tests of the trace pane (F7 in the chat: the requests sent, read back from the log) on
the real app and service with the scripted provider, and its SVG snapshot."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Collapsible, Static

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.trace import HISTORY_LABEL, TraceScreen
from tavern_tui.views import TraceView
from tests.tui.conftest import ScriptedProvider, notes, wait_until
from tests.tui.test_app import SIZE, open_seraphina, send

QUESTION = "Tell me about the forest of Eldoria"
"""Fires Seraphina's book entry "eldoria" on its key in the input (checked in the test)."""



def listed(screen: TraceScreen) -> list[str]:
    """The request list's lines as shown (plain text)."""
    requests = screen.requests
    return [str(requests.get_option_at_index(i).prompt) for i in range(requests.option_count)]


async def open_trace(pilot: Pilot[object]) -> TraceScreen:
    """Press F7 in the chat and wait until the newest request's detail shows."""
    await pilot.press("f7")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, TraceScreen) and pilot.app.screen.shown_id is not None)
    screen = pilot.app.screen
    assert isinstance(screen, TraceScreen)
    return screen


def input_decision(tavern: Tavern, playthrough_id: int, text: str) -> str:
    """The detail of the entry `text` fires by a key found in the input (as the pane words it)."""
    result = tavern.steps.world_info_preview(playthrough_id, text)
    fired = [d for d in result.decisions if d.fired and d.matched_in == "input"]
    assert fired, f"{text!r} fires nothing by its own words"
    decision = fired[0]
    return f"{decision.book}#{decision.uid} {decision.comment} — {decision.reason.value}: {decision.detail}"


async def test_requests_detail_verify_and_jump(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue("*Seraphina looks out at the trees.* Eldoria was once a place of wonder.")
    scripted.enqueue("*She smiles.* A second answer.")
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        pid = chat.playthrough_id
        expected = input_decision(corpus_tavern, pid, QUESTION)
        assert "key 'eldoria' found in the input" in expected
        await send(pilot, chat, QUESTION)

        screen = await open_trace(pilot)
        assert screen.detail.border_title == HISTORY_LABEL == "HISTORY — what was sent"
        [trace] = corpus_tavern.traces.traces(pid)
        assert screen.shown_id == trace.id and len(listed(screen)) == 1
        # shown means verified: the mark is set and every body is the one sent
        assert "✓ verified" in listed(screen)[0] and "script-1" in listed(screen)[0]
        assert "10+5 tok" in listed(screen)[0] and "slots-first" in listed(screen)[0] and "ok" in listed(screen)[0]
        text = screen.detail_text
        assert "✓ verified: 3 messages rebuilt from the log" in text
        assert expected in text  # the fired entry with its reason, as recorded when sent
        assert "3. user · input" in text and QUESTION in text
        assert "1 skipped" in text and "over_budget" in text
        assert "timing  submitted → first byte +" in text
        assert "stages: gather " in text and " ms · claim " in text and " ms · first byte " in text
        # collapsed but the last two
        sections = list(screen.detail.query(Collapsible))
        assert [s.collapsed for s in sections] == [True, False, False]

        await pilot.press("v")
        await wait_until(pilot, lambda: "verified: 3 messages" in notes(seen))
        assert screen.mark(trace.id) == "✓ verified" and "✓ verified" in listed(screen)[0]

        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat)

        # a second exchange; then Enter on the first request jumps the chat back to its reply
        # (an earlier message of the same chat: the newer exchange becomes a branch)
        first_reply = corpus_tavern.playthroughs.messages(pid)[-1]
        assert trace.reply == f"{first_reply.ref[0]}:{first_reply.ref[1]}"
        await corpus_tavern_swipe_to_new_branch(pilot, chat)
        screen = await open_trace(pilot)
        assert len(listed(screen)) == 2 and screen.shown_id != trace.id  # newest first
        await pilot.press("down")
        await wait_until(pilot, lambda: screen.shown_id == trace.id)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen is chat)
        await wait_until(pilot, lambda: chat.transcript.boxes[-1].text == first_reply.content)
        assert corpus_tavern.playthroughs.messages(pid)[-1].ref == first_reply.ref


async def corpus_tavern_swipe_to_new_branch(pilot: Pilot[object], chat: ChatScreen) -> None:
    """Regenerate the last reply (ctrl+r): a second request, whose reply the chat then shows."""
    before = chat.transcript.boxes[-1].text
    await pilot.press("ctrl+r")
    await pilot.app.workers.wait_for_complete()
    await wait_until(pilot, lambda: not chat.generating and chat.transcript.boxes[-1].text != before)


async def test_a_changed_body_is_a_mismatch(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "hello there")
        real = corpus_tavern.traces.verify_trace

        def tampered(trace_id: str) -> Any:
            verification = real(trace_id)
            checks = list(verification.checks)
            checks[-1] = dataclasses.replace(checks[-1], status="changed", detail="tampered")
            messages = [*verification.messages[:-1], None]
            return dataclasses.replace(verification, checks=checks, messages=messages)

        corpus_tavern.traces.verify_trace = tampered  # type: ignore[method-assign]
        screen = await open_trace(pilot)
        assert "✗ mismatch" in listed(screen)[0]
        assert "(changed since sent)" in screen.detail_text and "hello there" not in screen.detail_text
        await pilot.press("v")
        await wait_until(pilot, lambda: "mismatch: message 3 changed" in notes(seen))


async def test_no_requests_yet(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await open_seraphina(pilot)
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen.is_mounted)
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        await pilot.pause()
        assert screen.requests.option_count == 0
        assert "No requests yet" in str(screen.query_one("#trace-empty", Static).content)
        await pilot.press("enter", "v", "escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)


@pytest.mark.usefixtures("no_cursor_blink")
def test_trace_screen_snapshot(snap_compare, corpus_tavern: Tavern, scripted: ScriptedProvider,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    scripted.enqueue("*Seraphina looks out at the trees.* ", "Eldoria was once a place of wonder.")
    # Fixed timings, so the snapshot does not depend on how fast the scripted reply streamed.
    traces, trace = corpus_tavern.traces.traces, corpus_tavern.traces.trace

    def fixed_traces(playthrough_id: int) -> list[TraceView]:
        return [dataclasses.replace(t, latency_ms=340) for t in traces(playthrough_id)]

    def fixed_trace(trace_id: str) -> dict[str, Any]:
        data = trace(trace_id)
        data["timing"] = {"submitted": "2026-01-01T12:00:00+00:00", "first_byte": "2026-01-01T12:00:00.340000+00:00",
                          "last_byte": "2026-01-01T12:00:02.400000+00:00"}
        return data

    monkeypatch.setattr(corpus_tavern.traces, "traces", fixed_traces)
    monkeypatch.setattr(corpus_tavern.traces, "trace", fixed_trace)

    async def _open_the_trace(pilot: Pilot[object]) -> None:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, QUESTION)
        await open_trace(pilot)
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=(120, 40), run_before=_open_the_trace)
