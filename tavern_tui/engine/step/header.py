"""Provides the header stage of a step's opening: the assembler's records, the step's
`request/assembly` record when the request differs from the surface, `request/header`
(the final call config and the tools offered) and `request/context` (the adapter context and the
refreshed runtime context).

Rules: DESIGN.md "One step" (`request/header`: final config + tools) and seed 000 §1
("request/header records config + tools; request/context records adapter context"), §4.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tavern_tui.engine.events import Event, EventKind, NewEvent
from tavern_tui.engine.log import AsyncSessionLog
from tavern_tui.engine.step.turn import TurnStep, turn_header
from tavern_tui.engine.step.types import Assembly, Generation
from tavern_tui.engine.stream import CallContext, Provider


@dataclass(frozen=True, slots=True)
class Header:
    """What the header stage wrote and decided.

    Attributes:
        event: the stored `request/header`.
        assembly_event: the stored `request/assembly` record, None when there is none.
        context_event: the stored `request/context` record, None when none was asked for.
        model: the model this request asks for (the assembler's, else the provider's).
        extra: messages this request alone carries after the surface (continue text, a one-off
            instruction); never part of the surface, kept in the `request/assembly` record.
        rewritten: `{"ref", "message"}` per surface message sent rewritten (after `extra` in
            the record's `append`).
        tools: the OpenAI `tools` array offered (empty outside a tool turn).
        stored: every event the header stage stored, in order.
    """

    event: Event
    assembly_event: Event | None
    model: str
    extra: list[dict[str, Any]] = field(default_factory=list)
    rewritten: list[dict[str, Any]] = field(default_factory=list)
    tools: tuple[dict[str, Any], ...] = ()
    context_event: Event | None = None
    stored: tuple[Event, ...] = ()


def context_record(call: CallContext, refreshed: dict[str, Any] | None) -> NewEvent:
    """The step's `request/context` record: `{"adapter": CallContext.to_json(), "context":
    {"applied", "changed", "cleared"}}` (the refreshed runtime context, `refresh.Refreshed`).
    `refreshed` None (a request beside the steps, which admits no runtime context: a
    compaction's summary) leaves `context` out, so the next step still compares its context with
    the last step's (`types.applied_context`). Never a credential: the adapter context holds none
    (`CallContext`)."""
    body: dict[str, Any] = {"adapter": call.to_json()}
    if refreshed is not None:
        body["context"] = refreshed
    return NewEvent(EventKind.REQUEST_CONTEXT, None, body)


async def write_header(log: AsyncSessionLog, session_id: int, provider: Provider, assembly: Assembly,
                       claimed: tuple[Event, ...], generation: Generation, turn: TurnStep | None,
                       context: NewEvent | None = None) -> Header:
    """Append the assembler's records, the step's `request/assembly` (if any), its
    `request/header` and then its `request/context` (`context`, if given), in one batch, so they
    exist only for steps really sent."""
    records = list(assembly.records)
    extra: list[dict[str, Any]] = []
    rewritten: list[dict[str, Any]] = []
    if assembly.request is not None:
        records.append(_projection_record(assembly, claimed, generation))
    else:
        extra, rewritten = _request_only(assembly, generation)
        if extra or rewritten:
            body: dict[str, Any] = {"append": extra, "generation": generation.type}
            if rewritten:
                body["rewritten"] = rewritten
            records.append(NewEvent(EventKind.REQUEST_ASSEMBLY, None, body))
    model = assembly.model or provider.model
    header = {"provider": provider.name, "model": model, "config": assembly.config, "stream": True,
              "assembly": assembly.meta, "generation": generation.type}
    if turn is not None:
        header.update(turn_header(turn))
    after = [context] if context is not None else []
    stored = await log.append(session_id, [*records, NewEvent(EventKind.REQUEST_HEADER, None, header), *after])
    assembly_event = next((e for e in stored if e.kind == EventKind.REQUEST_ASSEMBLY), None)
    context_event = stored[-1] if context is not None else None
    return Header(stored[-1 - len(after)], assembly_event, model, extra, rewritten,
                  turn.tools if turn is not None else (), context_event, tuple(stored))


def _projection_record(assembly: Assembly, claimed: tuple[Event, ...], generation: Generation) -> NewEvent:
    """The `request/assembly` record of a projected request: its messages and where each came
    from, the input's parts pointed at the events just admitted, in order."""
    assert assembly.request is not None
    origins = [dict(p) for p in assembly.request_parts]
    inputs = iter(claimed)
    for part in origins:
        if part.get("source") == "input" and part.get("ref") is None:
            event = next(inputs, None)
            if event is not None:
                part["ref"] = list(event.ref)
    return NewEvent(EventKind.REQUEST_ASSEMBLY, None, {
        "messages": list(assembly.request), "parts": origins, "generation": generation.type})


def _request_only(assembly: Assembly, generation: Generation) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages this request alone carries after the surface, the rewritten surface messages)."""
    extra: list[dict[str, Any]] = []
    if generation.type == "continue":
        extra.append({"role": "assistant", "content": generation.continue_text})
    if generation.instruction:
        extra.append({"role": "system", "content": generation.instruction})
    rewritten = [{"ref": list(ref), "message": dict(m)} for ref, m in assembly.rewrite.items()]
    return extra, rewritten
