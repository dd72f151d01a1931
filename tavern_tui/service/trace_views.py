"""Provides `list_traces` and the steps behind it: recorded requests as `TraceView`s, from the
events a log holds. `TraceService` calls them on the `EventLog`, and `service.list_reads` on the
sqlite3 reader it uses before the service opens (`tavern trace list`), so the two paths differ
only in their SQL.

Rules: seed 000 §4, §6 (see `engine.trace`): a trace's view is read from its own record, the event
that settled its step (the first reply, attempt or summary after it in its session) and, for a
retry, the record of the request's first attempt; nothing reads today's surface.

A light module: the views and the engine's event kinds, nothing that loads SQLAlchemy or the store.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from tavern_tui.engine.events import Event, EventKind
from tavern_tui.engine.trace import TRACE_REQUEST
from tavern_tui.views import TraceView

SETTLE_KINDS = (str(EventKind.ASSISTANT_MESSAGE), str(EventKind.ASSISTANT_ATTEMPT), str(EventKind.USER_MESSAGE),
                str(EventKind.SURFACE_REPLACED))
"""Kinds of the events that may settle a request (`settlements` keeps the ones that do)."""


class TraceReads(Protocol):
    """The reads a trace list takes: `EventLog`'s, or `list_reads.ListReader`'s."""

    def events_of_kind(self, kinds: Sequence[str], session_ids: Sequence[int] | None = None) -> list[Event]: ...
    def events_at(self, refs: Sequence[tuple[int, int]]) -> dict[tuple[int, int], Event]: ...


def ref_text(ref: tuple[int, int]) -> str:
    """(12, 7) → "12:7", a trace's or message's id as the CLI prints it."""
    return f"{ref[0]}:{ref[1]}"


def request_facts(reply: dict[str, Any], first: Event) -> tuple[dict[str, Any], list[Any]]:
    """(timing, HTTP attempts) of a request: the settling event's (a step's reply or attempt carries
    them), else those its first attempt's trace record carries (a compaction's summary request keeps
    its own, `service.compaction`: its summary node carries neither). Empty when neither has them."""
    own = first.body
    timing = reply.get("timing") if isinstance(reply.get("timing"), dict) else own.get("timing")
    attempts = reply.get("attempts") or own.get("attempts")
    return (dict(timing) if isinstance(timing, dict) else {}), (list(attempts) if isinstance(attempts, list) else [])


def settlements(log: TraceReads, traces: list[Event]) -> dict[tuple[int, int], Event]:
    """trace ref → the reply (or attempt) that settled its step: the first settling event after it
    in its session (a summary settles a compaction's request; a user line only an impersonation's)."""
    sessions = sorted({t.session_id for t in traces})
    settles = log.events_of_kind(SETTLE_KINDS, sessions) if sessions else []
    by_session: dict[int, list[Event]] = {}
    for event in settles:
        if event.kind == EventKind.SURFACE_REPLACED:
            if event.body.get("request"):
                by_session.setdefault(event.session_id, []).append(event)
        elif event.kind != EventKind.USER_MESSAGE or event.source == "impersonation":
            by_session.setdefault(event.session_id, []).append(event)
    seqs = {session: [e.seq for e in listed] for session, listed in by_session.items()}  # once a session
    result: dict[tuple[int, int], Event] = {}
    for trace in traces:
        listed = by_session.get(trace.session_id, [])
        index = bisect.bisect_right(seqs.get(trace.session_id, []), trace.seq)
        if index < len(listed):
            result[trace.ref] = listed[index]
    return result


def firsts(log: TraceReads, traces: list[Event]) -> dict[tuple[int, int], Event]:
    """trace ref → the record of its request's first attempt: the trace itself, or the record its
    `retry_of` names (a retry's record leaves the whole request's `timing` and `attempts` to the
    first, `stream.retry_records`)."""
    known = {t.ref: t for t in traces}
    named = {tuple(r) for t in traces if isinstance(r := t.body.get("retry_of"), list) and len(r) == 2}
    wanted = sorted(named - known.keys())
    if wanted:
        known.update((ref, e) for ref, e in log.events_at(wanted).items() if e.kind == TRACE_REQUEST)
    result: dict[tuple[int, int], Event] = {}
    for trace in traces:
        retry_of = trace.body.get("retry_of")
        result[trace.ref] = known.get(tuple(retry_of), trace) if isinstance(retry_of, list) else trace
    return result


def _outcome(number: int, attempts: list[Any], settled: Event | None, reply: dict[str, Any]) -> str:
    if number < len(attempts):  # a retry followed: this request was refused
        this = attempts[number - 1]
        return f"retried ({this.get('status') or this.get('error') or 'failed'})"
    if settled is None:
        return "open"
    if settled.kind == EventKind.ASSISTANT_ATTEMPT:
        return "failed" if reply.get("error") else "stopped"
    return "ok"


def trace_view(trace: Event, settled: Event | None, first: Event | None = None) -> TraceView:
    """The view of one `trace/request` event, `settled` by the event `settlements` gives (None:
    still open) and `first` the record of its request's first attempt (`firsts`; None: itself)."""
    body = trace.body
    reply = settled.body if settled is not None else {}
    timing, attempts = request_facts(reply, first if first is not None else trace)
    latency = None
    if timing.get("first_byte") and timing.get("submitted"):
        delta = datetime.fromisoformat(timing["first_byte"]) - datetime.fromisoformat(timing["submitted"])
        latency = int(delta.total_seconds() * 1000)
    number = int(body.get("attempt") or 1)
    retry_of = body.get("retry_of")
    context = recorded if isinstance(recorded := body.get("context"), dict) else {}
    used = context.get("used")
    return TraceView(ref_text(trace.ref), trace.session_id, str(body.get("submitted_at", "")),
                     str(body.get("provider", "")), str(body.get("model", "")), str(body.get("strategy", "")),
                     str(body.get("generation", "")), len(body.get("messages", [])), dict(body.get("config", {})),
                     attempts, reply.get("usage") if number >= len(attempts) else None, latency,
                     ref_text(settled.ref) if settled is not None else None,
                     _outcome(number, attempts, settled, reply), number,
                     ref_text(tuple(retry_of)) if isinstance(retry_of, list) else None,
                     dict(body.get("omitted") or {}), used if isinstance(used, int) else None,
                     # A group member's reply (or attempt) names its speaker, as the step wrote it.
                     str(reply["name"]) if isinstance(reply.get("character_id"), int) and reply.get("name")
                     else None)


def list_traces(log: TraceReads, sessions: Sequence[int] | None) -> list[TraceView]:
    """The recorded requests of these sessions (None: all), oldest first (by session, then seq)."""
    events = log.events_of_kind([TRACE_REQUEST], sessions)
    settled = settlements(log, events)
    first = firsts(log, events)
    return [trace_view(e, settled.get(e.ref), first[e.ref]) for e in events]
