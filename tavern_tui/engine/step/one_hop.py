"""Provides `in_one_hop`: a chain of a step's stages that only await the session log, run whole in
one worker thread over an `InlineLog` (the log's calls made at once on that thread) instead of one
hop to a thread and back per call.

Rules: DESIGN.md "One step" (the log's round trips never block the event loop; each write
completes before the next, even when the step is cancelled: `engine.log.ThreadedLog`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from tavern_tui.engine import log as engine_log
from tavern_tui.engine.events import Event, NewEvent
from tavern_tui.engine.log import AsyncSessionLog

_T = TypeVar("_T")


class InlineLog(engine_log.ThreadedLog):
    """An `AsyncSessionLog` whose calls run at once on the calling thread: for a chain of a step's
    stages run whole in one worker thread (`in_one_hop`), where a hop per call would only add a
    round trip through the event loop."""

    async def append(self, session_id: int, events: Sequence[NewEvent]) -> list[Event]:
        """`SessionLog.append`, on this thread."""
        return self.sync.append(session_id, list(events))

    async def append_if_unchanged(self, session_id: int, events: Sequence[NewEvent], kind: str,
                                  after_seq: int) -> list[Event] | None:
        """`ThreadedLog.append_if_unchanged`, on this thread."""
        guarded = getattr(self.sync, "append_if_unchanged", None)
        if guarded is not None:
            return guarded(session_id, list(events), kind, after_seq)  # type: ignore[no-any-return]
        own = [e for e in self.sync.surface_events(session_id) if e.session_id == session_id]
        if any(e.kind == kind and e.seq > after_seq for e in own):
            return None
        return self.sync.append(session_id, list(events))

    async def surface_events(self, session_id: int, through_seq: int | None = None) -> list[Event]:
        """`SessionLog.surface_events`, on this thread."""
        return self.sync.surface_events(session_id, through_seq)


async def in_one_hop(log: AsyncSessionLog, chain: Callable[[AsyncSessionLog], Coroutine[Any, Any, _T]]) -> _T:
    """`await chain(log)`, and where `log` is a `ThreadedLog` the whole chain in one worker thread
    over an `InlineLog` of the same log: a step's opening writes its input, its request header and
    its trace record one after another, and each call's hop to a thread and back cost ~1-2 ms of
    the time before the request goes out. The chain must only await the log it is given (a
    coroutine that would wait for anything else raises `RuntimeError` here). As `_in_thread`: it
    runs to its end even when the caller is cancelled meanwhile, and the cancel comes after."""
    if type(log) is not engine_log.ThreadedLog:
        return await chain(log)
    inline = InlineLog(log.sync)

    def run() -> _T:
        coroutine = chain(inline)
        try:
            coroutine.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        coroutine.close()
        raise RuntimeError("a chain run in one hop waited for something other than its log")

    return await engine_log._in_thread(run)  # (looked up here: tests count the hops)
