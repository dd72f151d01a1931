"""The step's pre-step and request stages (seed 000 §1 and §5, DESIGN.md "One step"), against the
real OpenAI-compatible adapter and the loopback SSE server:

- pre-step runs after assembly on the claimed input: its hooks accept it, replace it (what is
  admitted and sent is the replacement) or reject it (nothing admitted, the input back in the
  inbox, the reason said); they see the frozen system section but cannot change it;
- request owns the call config alone: a hook's config is what the endpoint receives and what
  `request/context` records; history and system stay as assembled;
- both stages are timed in the trace, once per step, in DESIGN's order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from tavern_tui.engine.events import EventKind
from tavern_tui.engine.inbox import projection
from tavern_tui.engine.log import SurfaceMessage
from tavern_tui.engine.memory import MemoryLog
from tavern_tui.engine.step import (
    STAGES,
    Assembly,
    InputRejected,
    Proposed,
    Rejection,
    StepOptions,
    StepSettled,
    run_step,
)
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.providers.openai_compat import OpenAICompatProvider
from tests.support.loopback import LoopbackServer, sse_chunks_for


class Assembler:
    """A fixed system section and call config; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, history: list[SurfaceMessage], claimed: list[str]) -> Assembly:
        self.calls += 1
        return Assembly(system="You are Sera.", config={"temperature": 0.5, "max_tokens": 300})


async def _step(server: LoopbackServer | None, log: MemoryLog, sid: int, text: str | None,
                **options: Any) -> list[object]:
    base = server.base_url if server is not None else "http://127.0.0.1:9/v1"
    provider = OpenAICompatProvider(ProviderSettings(base_url=base, model="loop-1", api_key="k", timeout=10),
                                    max_retries=0)
    try:
        return [u async for u in run_step(log, sid, provider, Assembler(), text, options=StepOptions(**options))]
    finally:
        await provider.aclose()


def _user_texts(log: MemoryLog, sid: int) -> list[str]:
    return [e.body["content"] for e in log.surface_events(sid) if e.kind == EventKind.USER_MESSAGE]


def test_pre_step_and_request_come_between_assemble_and_prepare() -> None:
    # DESIGN "One step": claim → assemble → pre-step → request → prepare → refresh → admit.
    order = ["claim", "assemble", "pre_step", "request", "prepare", "refresh", "admit"]
    assert [s for s in STAGES if s in order] == order


async def test_a_rejection_admits_nothing_keeps_the_input_queued_and_says_why() -> None:
    log = MemoryLog()
    sid = log.create_session()

    def no_shouting(proposed: Proposed) -> None:
        if any(t.isupper() for t in proposed.texts):
            raise Rejection("in character, please: no shouting")

    with pytest.raises(InputRejected) as rejected:  # no server: a request would fail differently
        await _step(None, log, sid, "HELLO", pre_step_hooks=(no_shouting,))
    assert str(rejected.value) == "in character, please: no shouting" and rejected.value.kept
    kinds = [e.kind for e in log.surface_events(sid)]
    assert EventKind.USER_MESSAGE not in kinds and EventKind.SYSTEM_MESSAGE not in kinds
    assert EventKind.REQUEST_HEADER not in kinds
    assert [item.content for item in projection(log, sid).items] == ["HELLO"]
    with LoopbackServer() as server:  # without the hook the queued line is sent as typed
        server.enqueue_sse(sse_chunks_for("Hm.", pieces=1))
        updates = await _step(server, log, sid, None, claim=True)
        assert [m["content"] for m in server.requests[0].json["messages"]] == ["You are Sera.", "HELLO"]
    assert isinstance(updates[-1], StepSettled) and projection(log, sid).items == []


async def test_hooks_run_in_order_and_the_replacement_is_admitted_and_sent() -> None:
    log = MemoryLog()
    sid = log.create_session()
    seen: list[tuple[tuple[str, ...], str]] = []

    def trim(proposed: Proposed) -> Sequence[str]:
        seen.append((proposed.texts, proposed.system))
        return [t.strip() for t in proposed.texts]

    def accept(proposed: Proposed) -> None:
        seen.append((proposed.texts, proposed.system))

    with LoopbackServer() as server:
        server.enqueue_sse(sse_chunks_for("Hm.", pieces=1))
        await _step(server, log, sid, "  under the oak  ", pre_step_hooks=(trim, accept))
        sent = server.requests[0].json["messages"]
    assert seen == [(("  under the oak  ",), "You are Sera."), (("under the oak",), "You are Sera.")]
    assert [m["content"] for m in sent] == ["You are Sera.", "under the oak"]
    assert _user_texts(log, sid) == ["under the oak"]


async def test_a_replacement_of_the_wrong_size_admits_nothing() -> None:
    log = MemoryLog()
    sid = log.create_session()
    with pytest.raises(ValueError, match="one text per claimed message"):
        await _step(None, log, sid, "one line", pre_step_hooks=(lambda proposed: ["a", "b"],))
    assert _user_texts(log, sid) == [] and [i.content for i in projection(log, sid).items] == ["one line"]


async def test_a_regenerate_proposes_nothing_so_the_hooks_do_not_run() -> None:
    log = MemoryLog()
    sid = log.create_session()
    called: list[Proposed] = []
    with LoopbackServer() as server:
        server.enqueue_sse(sse_chunks_for("One.", pieces=1))
        server.enqueue_sse(sse_chunks_for("Two.", pieces=1))
        await _step(server, log, sid, "hi")
        await _step(server, log, sid, None, pre_step_hooks=(called.append,))  # a step with no input
    assert called == []


async def test_the_request_stage_owns_the_call_config_alone() -> None:
    log = MemoryLog()
    sid = log.create_session()
    seen: list[tuple[str, dict[str, Any]]] = []

    def cooler(model: str, config: Mapping[str, Any]) -> dict[str, Any]:
        seen.append((model, dict(config)))
        return {**config, "temperature": 0.2}

    def no_max_tokens(model: str, config: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in config.items() if k != "max_tokens"}

    with LoopbackServer() as server:
        server.enqueue_sse(sse_chunks_for("Hm.", pieces=1))
        updates = await _step(server, log, sid, "hi", request_hooks=(cooler, no_max_tokens))
        body = server.requests[0].json
    assert seen == [("", {"temperature": 0.5, "max_tokens": 300})]
    assert body["temperature"] == 0.2 and "max_tokens" not in body
    assert [m["content"] for m in body["messages"]] == ["You are Sera.", "hi"]
    [context] = [e for e in log.surface_events(sid) if e.kind == EventKind.REQUEST_CONTEXT]
    assert context.body["adapter"]["config"] == {"temperature": 0.2}
    settled = updates[-1]
    assert isinstance(settled, StepSettled)
    stages = settled.event.body["timing"]["stages"]
    assert [s for s in STAGES if s in stages][:4] == ["claim", "assemble", "pre_step", "request"]


async def test_a_request_hook_that_returns_no_mapping_admits_nothing() -> None:
    log = MemoryLog()
    sid = log.create_session()
    with pytest.raises(TypeError, match="not a call config mapping"):
        await _step(None, log, sid, "hi", request_hooks=(lambda model, config: ["temperature"],))  # type: ignore[arg-type,return-value]
    assert _user_texts(log, sid) == [] and [i.content for i in projection(log, sid).items] == ["hi"]
