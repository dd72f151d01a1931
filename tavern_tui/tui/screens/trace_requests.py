"""The trace pane's request list: tokens, durations and the order it lists requests in."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from tavern_tui.views import TraceView


def moment_of(text: str | None) -> datetime | None:
    """An ISO time as stored (naive read as UTC), or None when missing or unreadable."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def duration(ms: float | None) -> str:
    """"340 ms", "2.4 s", "—" when unknown."""
    if ms is None:
        return "—"
    return f"{int(ms)} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def request_tokens(view: TraceView) -> str:
    """"10+5 tok" (the provider's counts: the request's prompt + the reply's completion; its
    total alone when only that was reported); when it reported none, the request's own count as
    it was assembled, marked as an estimate ("~123 tok (est.)"); "? tok" when neither is known."""
    reported = view.tokens_label()
    if reported is not None:
        return f"{reported} tok"
    if view.assembled_tokens is not None:
        return f"~{view.assembled_tokens} tok (est.)"
    return "? tok"


def newest_first(traces: Sequence[TraceView]) -> list[TraceView]:
    """`traces` newest first by the time each was sent (ids only break ties: a session's
    sequence numbers say nothing about another session's, so id order is not time order)."""
    def key(view: TraceView) -> tuple[datetime, int, int]:
        session, _, seq = view.id.partition(":")
        moment = moment_of(view.submitted_at) or datetime.min.replace(tzinfo=UTC)
        return moment, int(session or 0), int(seq or 0)

    return sorted(traces, key=key, reverse=True)
