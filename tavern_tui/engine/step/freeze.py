"""Provides the last stages of a step's opening: the frozen request (the exact messages sent,
with a `SentMessage` reference per message) and the step's `trace/request` record.

Rules: DESIGN.md "One step" (derive the frozen request) and seed 000 §4 (the trace record:
references and hashes of exactly what is sent, no bodies).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from itertools import compress, count, islice
from operator import attrgetter, is_not, not_
from typing import Any

from tavern_tui.engine.events import Event
from tavern_tui.engine.log import (
    SYSTEM_PROMPT_SOURCE,
    AsyncSessionLog,
    SurfaceMessage,
    sent_to_model,
    surface_of,
)
from tavern_tui.engine.step.claim import Claimed, extended, inbox_trace
from tavern_tui.engine.step.header import Header
from tavern_tui.engine.step.options import StepOptions
from tavern_tui.engine.step.turn import TurnStep, turn_trace, with_transaction
from tavern_tui.engine.step.types import CONTEXT_SOURCES, Assembly
from tavern_tui.engine.stream import Provider
from tavern_tui.engine.trace import SentMessage, message_hash, trace_record

Messages = list[dict[str, Any]]


async def freeze_request(log: AsyncSessionLog, session_id: int, assembly: Assembly, header: Header,
                         claimed: Claimed, admitted: tuple[Event, ...],
                         written: list[Event] | None = None) -> tuple[Messages, list[SentMessage]]:
    """The messages sent and what each is: a projected request as the assembler built it (a tool
    turn's transaction put back), else the model-visible surface now, less `assembly.omit`,
    rewritten messages replaced, then the request-only messages. The surface now is the claim's
    (`claimed.events`) plus `written`, what the opening stored since, when nothing else was written
    in between (`claim.extended`); else it is read again.

    Returns:
        (the request's messages, one `SentMessage` each, in the same order).
    """
    if assembly.request is not None:
        return _projected(assembly, header, claimed)
    extra = header.extra
    events = extended(claimed.events, session_id, written) if claimed.events and written else None
    if events is not None and claimed.fold is not None:  # go on from the claim's surface
        derived = claimed.fold.copy().add(events[len(claimed.events):]).result()
    else:
        derived = surface_of(events if events is not None else await log.surface_events(session_id))
    sendable, refs = _SENDABLE.of(derived)
    surface = list(compress(sendable, map(not_, map(assembly.omit.__contains__, refs)))) if assembly.omit else sendable
    messages = [_rewritten(m, assembly.rewrite) for m in surface] + extra
    # A rewritten message points at its sent text in the request/assembly record (after `append`).
    slot = {tuple(r["ref"]): len(extra) + i for i, r in enumerate(header.rewritten)}
    record = header.assembly_event
    # zip truncates on purpose: `messages` ends with the request-only ones, hashed below
    sent = [SentMessage(m.role, _source_of(m, admitted), record.ref, slot[m.ref], message_hash(message))
            if m.ref in slot and record is not None
            else SentMessage(m.role, _source_of(m, admitted), m.ref, None, message_hash(message))
            for m, message in zip(surface, messages)]
    if extra:
        assert record is not None
        sent += [SentMessage(m["role"], "request-only", record.ref, i, message_hash(m)) for i, m in enumerate(extra)]
    return messages, sent


def _projected(assembly: Assembly, header: Header, claimed: Claimed) -> tuple[Messages, list[SentMessage]]:
    """A projected request's messages, each pointing at its place in the `request/assembly` record."""
    assert assembly.request is not None and header.assembly_event is not None
    record = header.assembly_event
    messages = [dict(m) for m in assembly.request]
    # zip truncates on purpose: parts padded to at least the messages' length
    sent = [SentMessage(m["role"], str(part.get("source", "request-only")), record.ref, i, message_hash(m))
            for i, (m, part) in enumerate(zip(messages, list(assembly.request_parts) + [{}] * len(messages)))]
    if claimed.transaction:
        messages, sent = with_transaction(messages, sent, claimed.transaction)
    return messages, sent


async def record_trace(log: AsyncSessionLog, session_id: int, provider: Provider, assembly: Assembly, header: Header,
                       sent: list[SentMessage], claimed: Claimed, options: StepOptions,
                       turn: TurnStep | None) -> Event:
    """Append the step's `trace/request` record: references and hashes of exactly what is sent,
    no bodies (seed 000 §4), with the inbox claim, the turn's links and the `request/context`
    record's ref (`request_context`)."""
    generation, meta = options.generation, assembly.meta
    record = trace_record(
        header.event, provider.name, header.model, strategy=meta.get("strategy", "compat"),
        generation=generation.type, config=assembly.config, submitted_at=options.now().isoformat(),
        context=meta.get("context"), sent=sent, strategy_snapshot=meta.get("strategy_snapshot"),
        replay_of=meta.get("replay_of"), **inbox_trace(claimed), **(turn_trace(turn) if turn is not None else {}),
        **({"request_context": list(header.context_event.ref)} if header.context_event is not None else {}))
    return (await log.append(session_id, [record]))[0]


def _rewritten(message: SurfaceMessage, rewrite: Mapping[tuple[int, int], dict[str, Any]]) -> dict[str, Any]:
    sent = rewrite.get(message.ref)
    return dict(sent) if sent is not None else message.to_request()


def _source_of(message: SurfaceMessage, claimed: tuple[Event, ...]) -> str:
    if message.source == SYSTEM_PROMPT_SOURCE:
        return "system"
    if message.source in CONTEXT_SOURCES:
        return "context"
    return "input" if any(message.ref == e.ref for e in claimed) else "history"


class _Sendable:
    """Which messages of the last surface frozen go to the model (`sent_to_model`): each step's
    request walks its whole surface (5,000 messages: ~3.5 ms of the event loop), and between two
    steps the surface holds the same messages with a few new ones after them. A message is known
    by its body (the stored event's own dict, shared by every message derived from that event;
    `sent_to_model` reads only it and the event's source), so only the messages after the part
    shared with the last surface are looked at. The first message is always looked at: it is the
    system section, whose newest version a step may have just stored."""

    def __init__(self) -> None:
        self._last: tuple[tuple[object, ...], tuple[bool, ...]] = ((), ())
        self._lock = threading.Lock()  # steps of several sessions freeze on the loop; tests in threads

    def of(self, messages: Sequence[SurfaceMessage]) -> tuple[list[SurfaceMessage], list[Any]]:
        """(the messages sent to the model, in order; their refs)."""
        bodies = tuple(map(_BODY, messages))
        with self._lock:
            last_bodies, last_flags = self._last
        # The length of the part after the first message shared with the last surface, found in C.
        shared = min(len(bodies), len(last_bodies)) - 1
        if shared > 0:
            shared = next(compress(count(), map(is_not, islice(bodies, 1, None), islice(last_bodies, 1, None))), shared)
        shared = max(shared, 0)
        flags = (tuple(map(sent_to_model, messages[:1])) + last_flags[1:1 + shared]
                 + tuple(map(sent_to_model, messages[1 + shared:])))
        with self._lock:
            self._last = (bodies, flags)
        sendable = list(compress(messages, flags))
        return sendable, list(map(_REF, sendable))


_BODY = attrgetter("body")
_REF = attrgetter("ref")
_SENDABLE = _Sendable()
