"""Provides a step's opening, stage by stage, up to the request it sends: recover or refuse →
claim → assemble → pre-step → request (call config) → prepare → refresh context → admit → header
(and `request/context`) → frozen request → trace record.

Rules: DESIGN.md "One step" and seed 000 §1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tavern_tui.engine.events import Event
from tavern_tui.engine.log import AsyncSessionLog
from tavern_tui.engine.step.admit import admit
from tavern_tui.engine.step.assemble import Prebuilt, assemble_claimed, put_back
from tavern_tui.engine.step.claim import claim_input
from tavern_tui.engine.step.freeze import freeze_request, record_trace
from tavern_tui.engine.step.header import context_record, write_header
from tavern_tui.engine.step.lease import Claim, Lease
from tavern_tui.engine.step.one_hop import in_one_hop
from tavern_tui.engine.step.options import StepOptions
from tavern_tui.engine.step.prepare import prepare_adapter
from tavern_tui.engine.step.prestep import pre_step
from tavern_tui.engine.step.recovery import recover_or_refuse
from tavern_tui.engine.step.refresh import refresh_context
from tavern_tui.engine.step.request import request_config
from tavern_tui.engine.step.timing import Stopwatch
from tavern_tui.engine.step.turn import TurnStep
from tavern_tui.engine.step.types import Assembler
from tavern_tui.engine.stream import ChatRequest, Provider


@dataclass(frozen=True, slots=True)
class Opened:
    """What a step's opening wrote and decided, up to the request it sends."""

    user_event: Event | None
    trace_event: Event
    request: ChatRequest
    model: str
    claimed: tuple[Event, ...] = ()
    stages: dict[str, float] = field(default_factory=dict)
    """Milliseconds each opening stage took (`STAGES`), for the trace's timing."""


async def open_request(log: AsyncSessionLog, session_id: int, provider: Provider, assemble: Assembler,
                       text: str | None, options: StepOptions, lease: Lease | None = None,
                       turn: TurnStep | None = None) -> Opened:
    """A step's opening, in order: recover a stale step or refuse a live one; the inbox insert
    and claim (one compare-and-append); assemble on history plus the claimed batch; pre-step (the
    hooks accept, replace or reject the proposed input); request (the hooks set the call config);
    prepare the call (the provider validates the config and binds its adapter); refresh the runtime context;
    admit system, the refreshed context and the batch; records, the request header and
    `request/context`; the trace record. Returns what the stream needs. An assembler, prepare or
    refresh that raises, or a pre-step or request hook, puts the claimed batch back in the inbox
    (nothing was admitted). With a
    `lease`, it is taken first (one atomic insert) and released again if the opening fails.

    Raises:
        StepBusy: another live process holds the step's lease or is streaming in this session
            (nothing is written).
        InboxEmpty: `options.claim` without `text` and nothing pending (nothing is written).
        CallNotPrepared: the provider refused the call config (nothing admitted, input kept).
        InputRejected: a pre-step hook rejected the input (nothing admitted, input kept).
    """
    held = await lease.take(session_id, options.stale_after) if lease is not None else None
    try:
        return await _open_held(log, session_id, provider, assemble, text, options, held, turn)
    except BaseException:
        if lease is not None:
            await lease.release()
        raise


async def _open_held(log: AsyncSessionLog, session_id: int, provider: Provider, assemble: Assembler,
                     text: str | None, options: StepOptions, held: Claim | None, turn: TurnStep | None) -> Opened:
    """`open_request` once the step's lease is held (`held`; None without leases: the staleness check)."""
    watch = Stopwatch()
    surface, recovered = await recover_or_refuse(log, session_id, options, held)
    # After a recovery the surface read above is stale: the claim reads it again.
    claimed = await claim_input(log, session_id, text, options, turn, None if recovered else surface)
    watch.lap("claim")
    assembly = await assemble_claimed(log, session_id, assemble, claimed)
    watch.lap("assemble")
    if isinstance(assemble, Prebuilt) and assemble.used:  # built ahead, off the loop: that is the stage's time
        watch.laps["assemble"] = assemble.build_ms
        if assemble.gather_ms:
            watch.laps["gather"] = assemble.gather_ms
        if assemble.ahead_ms:
            watch.laps["ahead"] = assemble.ahead_ms
    assembly = await pre_step(log, session_id, assembly, claimed, options.generation, options.pre_step_hooks)
    watch.lap("pre_step")
    try:
        assembly = request_config(assembly, options.request_hooks)
    except BaseException:
        await put_back(log, session_id, claimed)
        raise
    watch.lap("request")
    call = await prepare_adapter(log, session_id, provider, assembly, claimed)
    watch.lap("prepare")
    refreshed = await refresh_context(log, session_id, assembly, claimed, options.refresh)
    watch.lap("refresh")

    async def write(log: AsyncSessionLog) -> Opened:  # the input, the header, the trace: one hop
        admitted, stored = await admit(log, session_id, assembly, claimed, options.generation, refreshed.context)
        watch.lap("admit")
        header = await write_header(log, session_id, provider, assembly, admitted, options.generation, turn,
                                    context_record(call, refreshed.to_json()))
        messages, sent = await freeze_request(log, session_id, assembly, header, claimed, admitted,
                                              [*stored, *header.stored])
        trace_event = await record_trace(log, session_id, provider, assembly, header, sent, claimed, options, turn)
        watch.lap("record")
        request = ChatRequest(messages, header.model, dict(assembly.config), tuple(header.tools))
        return Opened(admitted[-1] if admitted else None, trace_event, request, header.model, admitted, watch.laps)

    return await in_one_hop(log, write)
