"""Engine-level tool turn rules (issue 19) on an in-memory log: a crash that left a reply's calls
without results gets them answered before the next request; a call in a reply no tools were
offered to is not stored or run; without `tools` a step stays one step."""

from __future__ import annotations

from collections.abc import AsyncIterator

from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.engine.memory import MemoryLog
from tavern_tui.engine.step import Assembly, run_step
from tavern_tui.engine.stream import BaseProvider, ChatRequest, Finished, TextDelta, ToolCall, ToolCalls
from tavern_tui.engine.tooling import INTERRUPTED_CALL, ToolOutcome


class Scripted(BaseProvider):
    name = "scripted"
    model = "m"

    def __init__(self, *replies: list[object]) -> None:
        self.replies = list(replies)
        self.requests: list[ChatRequest] = []

    async def stream(self, request: ChatRequest) -> AsyncIterator[object]:
        self.requests.append(request)
        for event in self.replies.pop(0):
            yield event


def assemble(history: list, claimed: list[str]) -> Assembly:
    return Assembly(system="You are Sera.")


class NoTools:
    async def offered(self) -> tuple[dict, ...]:
        return ({"type": "function", "function": {"name": "roll_dice", "parameters": {"type": "object"}}},)

    async def run(self, call: ToolCall) -> ToolOutcome:
        return ToolOutcome('{"total": 4}', "ok", {"summary": "d4 → [4] = 4"})


async def test_a_crash_between_calls_and_results_is_answered_before_the_next_request() -> None:
    log = MemoryLog()
    sid = log.create_session()
    log.append(sid, [NewEvent(EventKind.USER_MESSAGE, "user", {"content": "Roll."}),
                     NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant", {"content": "", "tool_calls": [
                         {"id": "call_x", "type": "function",
                          "function": {"name": "roll_dice", "arguments": "{}"}}]})])
    provider = Scripted([TextDelta("Where were we?"), Finished("stop")])
    [u async for u in run_step(log, sid, provider, assemble, "Hello again.")]
    sent = provider.requests[0].messages
    tool = next(m for m in sent if m["role"] == "tool")
    assert tool["tool_call_id"] == "call_x" and INTERRUPTED_CALL in tool["content"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "user"]


async def test_a_call_without_tools_offered_is_not_stored_and_a_step_stays_one_step() -> None:
    log = MemoryLog()
    sid = log.create_session()
    stray = ToolCalls((ToolCall("c1", "roll_dice", "{}"),))
    provider = Scripted([TextDelta("Hm."), stray, Finished("tool_calls")])
    [u async for u in run_step(log, sid, provider, assemble, "Hi.")]
    reply = [e for e in log.surface_events(sid) if e.kind == EventKind.ASSISTANT_MESSAGE][-1]
    assert "tool_calls" not in reply.body and len(provider.requests) == 1
    assert not any(e.kind == EventKind.TOOL_RESULT for e in log.surface_events(sid))


async def test_with_tools_the_engine_runs_its_own_boundary_claim() -> None:
    log = MemoryLog()
    sid = log.create_session()
    provider = Scripted([ToolCalls((ToolCall("c1", "roll_dice", "{}"),)), Finished("tool_calls")],
                        [TextDelta("Four."), Finished("stop")])
    updates = [u async for u in run_step(log, sid, provider, assemble, "Roll a d4.", tools=NoTools())]
    assert len(provider.requests) == 2 and provider.requests[1].tools == provider.requests[0].tools
    assert provider.requests[1].messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": '{"total": 4}'}
    assert type(updates[-1]).__name__ == "StepSettled"
