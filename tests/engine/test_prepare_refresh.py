"""The step's prepare and refresh stages and its `request/context` record (seed 000 §1, DESIGN.md
"One step"), against the real OpenAI-compatible adapter and the loopback SSE server:

- prepare validates the call config and binds the adapter before anything is admitted: a refused
  config admits nothing, puts the input back in the inbox and names what to fix; the next step,
  with the config fixed, sends it;
- refresh re-reads the runtime context before admission: admission uses the refreshed snapshot,
  context messages carry source `runtime-context`, and a context that stopped applying since the
  last step is recorded as cleared (once);
- `request/context` holds the adapter context (provider, model, endpoint host, parameters) and
  never the API key.
"""

from __future__ import annotations

import json

import pytest

from tavern_tui.engine.events import EventKind
from tavern_tui.engine.inbox import projection
from tavern_tui.engine.log import SurfaceMessage
from tavern_tui.engine.memory import MemoryLog
from tavern_tui.engine.step import (
    CONTEXT_SOURCE,
    STAGES,
    Assembly,
    CallNotPrepared,
    ContextSnapshot,
    StepOptions,
    StepSettled,
    run_step,
)
from tavern_tui.engine.trace import TRACE_REQUEST
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.providers.openai_compat import OpenAICompatProvider
from tests.support.loopback import LoopbackServer, sse_chunks_for

FAKE_KEY = "sk-fake-PREPARE-7f3a9c1e5b"


class ContextAssembler:
    """A fixed system section and call config, and the runtime context the test sets per step."""

    def __init__(self) -> None:
        self.context: ContextSnapshot = ()

    def __call__(self, history: list[SurfaceMessage], claimed: list[str]) -> Assembly:
        return Assembly(system="You are Sera.", config={"temperature": 0.5}, context=self.context)


def _provider(base_url: str) -> OpenAICompatProvider:
    return OpenAICompatProvider(ProviderSettings(base_url=base_url, model="loop-1", api_key=FAKE_KEY, timeout=10),
                                max_retries=0)


async def _step(log: MemoryLog, sid: int, provider: OpenAICompatProvider, assembler: ContextAssembler,
                text: str | None, **options: object) -> list[object]:
    try:
        return [u async for u in run_step(log, sid, provider, assembler, text, options=StepOptions(**options))]
    finally:
        await provider.aclose()


def _kinds(log: MemoryLog, sid: int) -> list[str]:
    return [e.kind for e in log.surface_events(sid)]


def test_the_stages_a_step_times_include_prepare_and_refresh_in_order() -> None:
    assert STAGES.index("assemble") < STAGES.index("prepare") < STAGES.index("refresh") < STAGES.index("admit")


@pytest.mark.parametrize("base_url", ["ftp://127.0.0.1/v1", "not a url"])
async def test_a_refused_config_admits_nothing_keeps_the_input_queued_and_the_fixed_config_sends_it(
        base_url: str) -> None:
    log = MemoryLog()
    sid = log.create_session()
    assembler = ContextAssembler()
    with pytest.raises(CallNotPrepared) as refused:
        await _step(log, sid, _provider(base_url), assembler, "Hello under the oak")
    message = str(refused.value)
    assert "must start with http:// or https://" in message and "[provider] base_url in config.toml" in message
    assert "TAVERN_API_BASE" in message and refused.value.kept
    kinds = _kinds(log, sid)
    assert EventKind.USER_MESSAGE not in kinds and EventKind.SYSTEM_MESSAGE not in kinds
    assert EventKind.REQUEST_HEADER not in kinds and EventKind.REQUEST_CONTEXT not in kinds
    assert [item.content for item in projection(log, sid).items] == ["Hello under the oak"]  # still queued
    with LoopbackServer() as server:
        server.enqueue_sse(sse_chunks_for("*Sera nods.* Welcome.", pieces=2))
        updates = await _step(log, sid, _provider(server.base_url), assembler, None, claim=True)
        sent = server.requests[0].json
    assert isinstance(updates[-1], StepSettled) and updates[-1].event.content == "*Sera nods.* Welcome."
    assert [(m["role"], m["content"]) for m in sent["messages"]] == [
        ("system", "You are Sera."), ("user", "Hello under the oak")]
    assert projection(log, sid).items == []
    assert [e.body["content"] for e in log.surface_events(sid) if e.kind == EventKind.USER_MESSAGE] == [
        "Hello under the oak"]


async def test_request_context_records_the_adapter_context_and_never_the_key() -> None:
    log = MemoryLog()
    sid = log.create_session()
    with LoopbackServer() as server:
        server.enqueue_sse(sse_chunks_for("Hm.", pieces=1))
        await _step(log, sid, _provider(server.base_url), ContextAssembler(), "Hi")
        assert server.requests[0].headers["authorization"] == f"Bearer {FAKE_KEY}"  # the key was used
        port = server.base_url.split(":")[2].split("/")[0]
    events = log.surface_events(sid)
    [call] = [e for e in events if e.kind == EventKind.REQUEST_CONTEXT]
    assert call.body["adapter"] == {"provider": "openai-compatible", "model": "loop-1",
                                    "endpoint": f"http://127.0.0.1:{port}", "config": {"temperature": 0.5}}
    header = next(e for e in events if e.kind == EventKind.REQUEST_HEADER)
    trace = next(e for e in events if e.kind == TRACE_REQUEST)
    assert call.seq == header.seq + 1 and trace.body["request_context"] == list(call.ref)
    for event in events:
        assert FAKE_KEY not in json.dumps(event.body) and "PREPARE-7f3a9c1e5b" not in json.dumps(event.body)


async def test_refresh_admits_the_reread_context_and_records_a_cleared_one_once() -> None:
    log = MemoryLog()
    sid = log.create_session()
    assembler = ContextAssembler()
    memory = {"text": "- likes tea"}

    async def refresh(proposed: ContextSnapshot) -> ContextSnapshot:  # the memory read again at admission
        return tuple((ident, memory["text"] if ident == "memory" else text) for ident, text in proposed)

    with LoopbackServer() as server:
        for _ in range(3):
            server.enqueue_sse(sse_chunks_for("Hm.", pieces=1))
        assembler.context = (("memory", "- stale"), ("note", "It is raining."))
        await _step(log, sid, _provider(server.base_url), assembler, "one", refresh=refresh)
        assembler.context = (("memory", "- stale"),)  # the note stopped applying
        memory["text"] = "- likes tea\n- fears storms"
        await _step(log, sid, _provider(server.base_url), assembler, "two", refresh=refresh)
        await _step(log, sid, _provider(server.base_url), assembler, "three", refresh=refresh)
        sent = [r.json["messages"] for r in server.requests]
    contexts = [e for e in log.surface_events(sid) if e.kind == EventKind.USER_MESSAGE and "context" in e.body]
    assert [(e.body["context"], e.body["content"], e.source) for e in contexts] == [
        ("memory", "- likes tea", CONTEXT_SOURCE), ("note", "It is raining.", CONTEXT_SOURCE),
        ("memory", "- likes tea\n- fears storms", CONTEXT_SOURCE)]
    assert CONTEXT_SOURCE == "runtime-context"
    assert all("- stale" not in json.dumps(messages) for messages in sent)  # the proposal was replaced
    records = [e.body["context"] for e in log.surface_events(sid) if e.kind == EventKind.REQUEST_CONTEXT]
    assert records == [
        {"applied": ["memory", "note"], "changed": ["memory"], "cleared": []},
        {"applied": ["memory"], "changed": ["memory"], "cleared": ["note"]},
        {"applied": ["memory"], "changed": ["memory"], "cleared": []},  # cleared once, not every step
    ]


async def test_a_chat_from_before_the_record_clears_against_its_context_messages() -> None:
    """A surface without `request/context` (stored before it existed): the context messages on it,
    stored with the old source "context", stand for the last step's snapshot."""
    from tavern_tui.engine.events import NewEvent, Origin

    log = MemoryLog()
    sid = log.create_session()
    log.append(sid, [NewEvent(EventKind.USER_MESSAGE, "user", {"content": "old note", "context": "note"},
                              Origin.ENGINE, "context")])
    with LoopbackServer() as server:
        server.enqueue_sse(sse_chunks_for("Hm.", pieces=1))
        await _step(log, sid, _provider(server.base_url), ContextAssembler(), "Hi")
        sent = server.requests[0].json["messages"]
    [call] = [e for e in log.surface_events(sid) if e.kind == EventKind.REQUEST_CONTEXT]
    assert call.body["context"] == {"applied": [], "changed": [], "cleared": ["note"]}
    assert ("user", "old note") in [(m["role"], m["content"]) for m in sent]  # earlier bodies stay history
