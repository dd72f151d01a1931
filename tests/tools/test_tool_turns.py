"""A turn with tool calls through the service, against the loopback OpenAI server (issue 19):
call → `tool/result` → final reply, each step its own request and trace linked to the turn;
the step limit; a cancel between steps keeps what settled; a swipe re-runs the whole turn; a
steer queued meanwhile is claimed at the step boundary."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tavern_tui.config import Settings, ToolSettings
from tavern_tui.engine.step import StepStarted, ToolResultStored, TurnLimitReached, open_step
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.providers.openai_compat import OpenAICompatProvider
from tavern_tui.service import Tavern
from tavern_tui.tools import Toolbox, ToolSpec
from tavern_tui.tools.builtin import RollDice
from tavern_tui.tools.guard import Guard
from tests.support.loopback import LoopbackServer, sse_chunks_for, sse_tool_call_chunks

KEY = "sk-loop-SECRET-0123456789"
ROLL = ("call_r1", "roll_dice", '{"expression": "2d6+1"}')



def make_tavern(db_url: str, server: LoopbackServer, *, strategy: str = "preset-slots-first",
                max_steps: int = 4) -> Tavern:
    settings = Settings(db_url=db_url, default_strategy=strategy,
                        provider=ProviderSettings(base_url=server.base_url, model="m", api_key=KEY, timeout=5),
                        tools=ToolSettings(enabled=("roll_dice", "lore_search"), max_steps=max_steps))
    return Tavern(settings, provider=OpenAICompatProvider(settings.provider, backoff=0.01))


@pytest.fixture
def playthrough(corpus_dir: Path) -> Any:
    def start(tavern: Tavern) -> int:
        cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id or 0
        return tavern.playthroughs.new_playthrough(cid, user_name="Ada").id
    return start


async def drain(updates: Any) -> list[Any]:
    return [u async for u in updates]


def session_events(tavern: Tavern, pid: int) -> list[Any]:
    return tavern.store.events.surface_events(tavern.playthroughs.playthrough(pid).session_id)


@pytest.mark.parametrize("strategy", ["compat", "preset-slots-first"])
async def test_call_result_final_reply(db_url: str, server: LoopbackServer, playthrough: Any, strategy: str) -> None:
    tavern = make_tavern(db_url, server, strategy=strategy)
    pid = playthrough(tavern)
    server.enqueue_sse(sse_tool_call_chunks([ROLL], text="*Seraphina reaches for the dice.* "))
    server.enqueue_sse(sse_chunks_for("You act first."))
    updates = await drain(tavern.steps.send(pid, "Roll for initiative!"))

    [stored] = [u for u in updates if isinstance(u, ToolResultStored)]
    events = session_events(tavern, pid)
    calls_msg = next(e for e in events if e.kind == "assistant/message" and e.body.get("tool_calls"))
    assert calls_msg.body["tool_calls"] == [{"id": "call_r1", "type": "function", "function": {
        "name": "roll_dice", "arguments": '{"expression": "2d6+1"}'}}]
    assert calls_msg.content == "*Seraphina reaches for the dice.* "
    result = next(e for e in events if e.kind == "tool/result")
    assert result.role == "tool" and result.body["toolCallId"] == "call_r1" and result.body["status"] == "ok"
    rolled = json.loads(result.content)
    assert len(rolled["rolls"]) == 2 and all(1 <= r <= 6 for r in rolled["rolls"])
    assert rolled["total"] == sum(rolled["rolls"]) + 1 and stored.event.ref == result.ref
    final = [e for e in events if e.kind == "assistant/message"][-1]
    assert final.content == "You act first." and not final.body.get("tool_calls")

    first, second = (r.json for r in server.requests)
    assert [t["function"]["name"] for t in first["tools"]] == ["roll_dice", "lore_search"]
    tail = second["messages"][-2:]
    assert tail[0]["role"] == "assistant" and tail[0]["tool_calls"][0]["id"] == "call_r1"
    assert tail[1] == {"role": "tool", "tool_call_id": "call_r1", "content": result.content}
    assert not any(m["role"] == "user" and result.content in str(m["content"]) for m in second["messages"])

    traces = [e for e in events if e.kind == "trace/request"]
    assert len(traces) == 2
    assert traces[1].body["turn"] == {"step": 2, "first": list(traces[0].ref), "previous": list(traces[0].ref)}
    assert traces[1].body["tool_results"] == [{"ref": list(result.ref), "toolCallId": "call_r1",
                                               "name": "roll_dice", "status": "ok"}]
    header = next(e for e in events if e.kind == "request/header")
    schemas = json.dumps(first["tools"], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert header.body["tools"] == {"names": ["roll_dice", "lore_search"],
                                    "sha256": hashlib.sha256(schemas.encode()).hexdigest(),
                                    "offered": first["tools"]}  # the array as sent, for export and replay
    for trace in traces:  # verify rebuilds the calls and results exactly as sent
        check = tavern.traces.verify_trace(f"{trace.ref[0]}:{trace.ref[1]}")
        assert check.ok
    rebuilt = tavern.traces.verify_trace(f"{traces[1].ref[0]}:{traces[1].ref[1]}").messages
    assert rebuilt == second["messages"]
    tavern.close()


async def test_the_step_limit_is_named_when_hit(db_url: str, server: LoopbackServer, playthrough: Any) -> None:
    tavern = make_tavern(db_url, server, max_steps=2)
    pid = playthrough(tavern)
    server.enqueue_sse(sse_tool_call_chunks([ROLL]))
    server.enqueue_sse(sse_tool_call_chunks([("call_r2", "roll_dice", '{"expression": "d20"}')]))
    updates = await drain(tavern.steps.send(pid, "Roll until you win."))
    [limit] = [u for u in updates if isinstance(u, TurnLimitReached)]
    assert limit.limit == 2 and "limit of 2 requests" in limit.message
    assert len(server.requests) == 2
    results = [e for e in session_events(tavern, pid) if e.kind == "tool/result"]
    assert [r.body["status"] for r in results] == ["ok", "limit"]
    assert results[1].body["toolCallId"] == "call_r2" and "limit of 2" in results[1].content
    tavern.close()


async def test_closing_between_calls_keeps_what_settled(db_url: str, server: LoopbackServer,
                                                        playthrough: Any) -> None:
    tavern = make_tavern(db_url, server)
    pid = playthrough(tavern)
    server.enqueue_sse(sse_tool_call_chunks([ROLL, ("call_r2", "roll_dice", '{"expression": "d8"}')]))
    updates = tavern.steps.send(pid, "Two rolls, please.")
    async for update in updates:
        if isinstance(update, ToolResultStored):
            break  # the person stops the turn after the first result
    await updates.aclose()
    events = session_events(tavern, pid)
    results = [e for e in events if e.kind == "tool/result"]
    assert [(r.body["toolCallId"], r.body["status"]) for r in results] == [("call_r1", "ok"), ("call_r2", "cancelled")]
    assert len(server.requests) == 1  # no next step
    assert open_step(tavern.store.events, tavern.playthroughs.playthrough(pid).session_id) is None
    assert not tavern.inbox.step_in_progress(pid)
    tavern.close()


class GatedTool:
    """A safe tool that waits on a gate, so the test can cancel while it runs."""

    spec = ToolSpec("wait_a_moment", "waits", {"type": "object", "properties": {}}, "safe")

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.calls = 0

    async def call(self, arguments: dict[str, Any]) -> tuple[str, str]:
        self.calls += 1
        self.entered.set()
        await asyncio.Event().wait()
        return "never", "never"


async def test_a_cancel_while_a_tool_runs(db_url: str, server: LoopbackServer, playthrough: Any,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    tavern = make_tavern(db_url, server)
    pid = playthrough(tavern)
    gated = GatedTool()
    monkeypatch.setattr(tavern.tools, "toolbox", lambda _pid: Toolbox([RollDice(), gated], Guard()))
    server.enqueue_sse(sse_tool_call_chunks([ROLL, ("call_w", "wait_a_moment", "{}")]))
    task = asyncio.ensure_future(drain(tavern.steps.send(pid, "Roll, then wait.")))
    await asyncio.wait_for(gated.entered.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    results = [e for e in session_events(tavern, pid) if e.kind == "tool/result"]
    assert [(r.body["name"], r.body["status"]) for r in results] == [("roll_dice", "ok"),
                                                                     ("wait_a_moment", "cancelled")]
    assert len(server.requests) == 1
    assert not tavern.inbox.step_in_progress(pid)
    tavern.close()


async def test_a_swipe_of_a_tool_turn_reruns_the_whole_turn(db_url: str, server: LoopbackServer,
                                                            playthrough: Any) -> None:
    tavern = make_tavern(db_url, server)
    pid = playthrough(tavern)
    server.enqueue_sse(sse_tool_call_chunks([ROLL]))
    server.enqueue_sse(sse_chunks_for("A seven."))
    await drain(tavern.steps.send(pid, "Roll for me."))
    server.enqueue_sse(sse_tool_call_chunks([("call_s1", "roll_dice", '{"expression": "2d6+1"}')]))
    server.enqueue_sse(sse_chunks_for("An eleven."))
    await drain(tavern.steps.regenerate(pid))
    first, _, third, fourth = (r.json for r in server.requests)
    assert third["messages"] == first["messages"]  # the turn re-ran from the person's message
    assert fourth["messages"][-1]["tool_call_id"] == "call_s1"
    assert all(m.get("tool_call_id") != "call_r1" for m in fourth["messages"])
    _view, shown = tavern.timeline.last_message(pid)
    assert shown is not None and shown.content == "An eleven."
    timeline = tavern.timeline.timeline(pid)
    calls = [v for v in timeline.variants if v.role == "assistant" and v.depth == next(
        w.depth for w in timeline.variants if w.role == "user" and w.origin == "customer") + 1]
    assert len(calls) == 2  # the first call message has a sibling: a new variant of the turn
    tavern.close()


async def test_a_steer_is_claimed_after_the_tool_result(db_url: str, server: LoopbackServer,
                                                        playthrough: Any) -> None:
    tavern = make_tavern(db_url, server)
    pid = playthrough(tavern)
    server.enqueue_sse(sse_tool_call_chunks([ROLL]))
    server.enqueue_sse(sse_chunks_for("Fine, quickly then."))
    started = 0
    async for update in tavern.steps.send(pid, "Roll for initiative."):
        if isinstance(update, StepStarted):
            started += 1
            if started == 1:  # queued while the first step streams
                tavern.inbox.add(pid, "Make it quick!", steer=True)
                tavern.inbox.add(pid, "And then tell me a story.")  # next turn: stays queued
    second = server.requests[1].json["messages"]
    assert second[-1] == {"role": "user", "content": "Make it quick!"}
    assert second[-2]["role"] == "tool"
    assert [i.text for i in tavern.inbox.pending(pid)] == ["And then tell me a story."]
    traces = [e for e in session_events(tavern, pid) if e.kind == "trace/request"]
    assert "inbox" in traces[1].body and len(traces[1].body["inbox"]["items"]) == 1
    tavern.close()
