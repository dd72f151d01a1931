"""Provides the session-log protocols (sync and awaited) and the message surface derived from them.

Rules: seed 000 §1 (`Session.deriveMessages()`: the model-visible messages, after surface
replacement, without step boundaries or stream chunks; `inspect()` pins an inclusive
`throughSeq`, `page()` reads a bounded stable slice of that snapshot) and §1.1 (forks).
The step awaits its log (`AsyncSessionLog`) so the event loop never waits on SQL; `ThreadedLog`
adapts a synchronous log by running each call in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect as _inspect
import operator
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from tavern_tui.engine.events import (
    MESSAGE_KINDS,
    Event,
    EventKind,
    NewEvent,
    Origin,
    effective_origin,
    is_agent,
    is_customer,
    wire_message,
)

SYSTEM_PROMPT_SOURCE = "system-prompt"
"""`source` of the system section the engine admits each step; only the newest one is effective."""

PLACEHOLDER_SOURCE = "placeholder"
"""`source` of a reply from a placeholder provider (the offline demo): origin engine, shown in
the chat but never sent to a model, which did not write it."""


SUMMARY_SOURCE = "summary"
"""`source` of a summary node: a `surface/replaced` event (origin engine, or operator once the
person edits it) whose message recaps the contiguous range it obscures (seed 000 §1.1:
compaction is a surface replacement; the originals stay in the log). Requests never drop it."""


class SessionLog(Protocol):
    """What the engine needs from storage. `store.EventLog` implements it; tests use `MemoryLog`."""

    def create_session(self, parent_id: int | None = None, fork_seq: int | None = None,
                       playthrough_id: int | None = None) -> int:
        """Create a session (a fork when `parent_id` is given; `playthrough_id` names the
        timeline it belongs to, where the log keeps one) and return its id."""
        ...

    def append(self, session_id: int, events: Sequence[NewEvent]) -> list[Event]:
        """Append events atomically with the next gapless seqs; return them as stored.

        Raises:
            NotFound: no such session.
        """
        ...

    def surface_events(self, session_id: int, through_seq: int | None = None) -> list[Event]:
        """Events visible from a session: for each ancestor, its events through the fork point,
        then the session's own events through `through_seq` (inclusive; None = all), in order."""
        ...

    def head_seq(self, session_id: int) -> int:
        """The last seq the session itself holds (0 when empty)."""
        ...


class AsyncSessionLog(Protocol):
    """The log calls a step makes (`engine.step.run_step`), awaited: the async counterparts of
    `SessionLog.append` and `SessionLog.surface_events`, same arguments, results and errors.

    A call, once awaited, runs to its end even when the awaiting task is cancelled meanwhile
    (the cancel is raised after it): a step relies on each append being complete before its
    next one, cancelled or not. `ThreadedLog` adapts any `SessionLog` this way.
    """

    async def append(self, session_id: int, events: Sequence[NewEvent]) -> list[Event]:
        """`SessionLog.append`, awaited."""
        ...

    async def surface_events(self, session_id: int, through_seq: int | None = None) -> list[Event]:
        """`SessionLog.surface_events`, awaited."""
        ...

    async def append_if_unchanged(self, session_id: int, events: Sequence[NewEvent], kind: str,
                                  after_seq: int) -> list[Event] | None:
        """Append only when the session holds no own event of `kind` after `after_seq`, else
        None (the inbox's compare-and-append, `engine.inbox`)."""
        ...


_T = TypeVar("_T")


async def until_done(awaitable: Awaitable[_T]) -> tuple[_T, asyncio.CancelledError | None]:
    """Await `awaitable` to its end even when the awaiting task is cancelled meanwhile (once or
    more): for work that must not be cut short, such as a write whose order matters.

    Returns:
        (its result, the first `CancelledError` delivered meanwhile or None). The caller
        re-raises that error once it has finished what it must (the cancel is late, not lost).

    Raises:
        whatever `awaitable` raises; `CancelledError` when it was itself cancelled (the loop
        shutting down cancels every task).
    """
    task = asyncio.ensure_future(awaitable)
    cancel: asyncio.CancelledError | None = None
    while True:
        try:
            return await asyncio.shield(task), cancel
        except asyncio.CancelledError as exc:
            if task.cancelled():
                raise
            cancel = cancel or exc


async def _in_thread(call: Callable[..., _T], *args: Any) -> _T:
    # What `asyncio.to_thread` does, minus its coroutine (an executor future needs no task to
    # shield). A thread cannot be stopped: on a cancel, wait for the call, then let the cancel
    # through, so the caller's next call never overtakes this one.
    context = contextvars.copy_context()
    future = asyncio.get_running_loop().run_in_executor(None, functools.partial(context.run, call, *args))
    result, cancel = await until_done(future)
    if cancel is not None:
        raise cancel
    return result


class ThreadedLog:
    """An `AsyncSessionLog` over a synchronous `SessionLog`: each call runs in the default
    executor (as `asyncio.to_thread` does), so a database log's round trips never block the event loop.

    One call at a time per awaiting coroutine: each completes (even when cancelled) before
    the coroutine goes on. The wrapped log must accept calls from any thread, one after
    another (`store.EventLog` does: pooled connections, one transaction per call).

    Attributes:
        sync: the wrapped synchronous log.
    """

    def __init__(self, log: SessionLog) -> None:
        self.sync = log

    async def append(self, session_id: int, events: Sequence[NewEvent]) -> list[Event]:
        """`SessionLog.append` in a worker thread."""
        return await _in_thread(self.sync.append, session_id, list(events))

    async def append_if_unchanged(self, session_id: int, events: Sequence[NewEvent], kind: str,
                                  after_seq: int) -> list[Event] | None:
        """The wrapped log's compare-and-append (`engine.inbox`) in a worker thread: append only
        when the session holds no own event of `kind` after `after_seq`, else None. A wrapped log
        without one gets a check then an append, atomic only within this process."""
        guarded = getattr(self.sync, "append_if_unchanged", None)
        if guarded is not None:
            return await _in_thread(guarded, session_id, list(events), kind, after_seq)

        def check_then_append() -> list[Event] | None:
            own = [e for e in self.sync.surface_events(session_id) if e.session_id == session_id]
            if any(e.kind == kind and e.seq > after_seq for e in own):
                return None
            return self.sync.append(session_id, list(events))

        return await _in_thread(check_then_append)

    async def surface_events(self, session_id: int, through_seq: int | None = None) -> list[Event]:
        """`SessionLog.surface_events` in a worker thread."""
        return await _in_thread(self.sync.surface_events, session_id, through_seq)


def awaited_log(log: SessionLog | AsyncSessionLog) -> AsyncSessionLog:
    """`log` itself when its `append` is a coroutine function (an `AsyncSessionLog`), else the
    synchronous log wrapped in `ThreadedLog`."""
    if _inspect.iscoroutinefunction(getattr(log, "append", None)):
        return log  # type: ignore[return-value]
    return ThreadedLog(log)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class SurfaceMessage:
    """One model-visible message of the effective surface.

    Attributes:
        ref: (session_id, seq) of the event that holds the body.
        origin: the declared origin, None when it is the role's natural producer.
        partial: True for an `assistant/attempt` (a reply cut off by cancel or error).
    """

    ref: tuple[int, int]
    kind: str
    role: str
    content: str
    origin: Origin | None
    source: str | None
    created_at: datetime
    body: dict[str, Any]

    @property
    def partial(self) -> bool:
        """True when the message is a cancelled or failed reply kept as an attempt."""
        return self.kind == EventKind.ASSISTANT_ATTEMPT

    @property
    def effective_origin(self) -> Origin | None:
        """The declared origin, else the role's natural producer (seed 001)."""
        return effective_origin(self.role, self.origin)

    @property
    def by_person(self) -> bool:
        """Did the person write this? (customer origin; seed 001)."""
        return is_customer(self.role, self.origin)

    @property
    def by_model(self) -> bool:
        """Did the model write this? (agent origin; seed 001)."""
        return is_agent(self.role, self.origin)

    def to_request(self) -> dict[str, Any]:
        """The OpenAI-style message this surface entry sends (`events.wire_message`: role, content,
        `name`, an assistant's `tool_calls`, a tool result's `tool_call_id`)."""
        return wire_message(self.role, self.content, self.body)


def _to_surface(event: Event) -> SurfaceMessage:
    role = event.role or "system"
    return SurfaceMessage(event.ref, event.kind, role, event.content, event.origin, event.source, event.created_at,
                          event.body)


def derive_messages(log: SessionLog, session_id: int, through_seq: int | None = None, *,
                    include_failed: bool = False) -> list[SurfaceMessage]:
    """The effective message surface of a session (seed 000 §1 `deriveMessages`).

    Only message kinds count; inbox, request and checkpoint events never become messages.
    The newest `system/message` with source "system-prompt" is the system section and comes
    first; older ones are superseded. An `assistant/attempt` with no text is dropped (a failure
    before the first token says nothing to the model); one with text stays, marked partial,
    as SillyTavern keeps a stopped reply in the chat.

    Args:
        include_failed: keep empty attempts too (a chat view shows that a reply failed).

    Returns:
        Messages in surface order, each pointing at its event by `ref`.
    """
    return surface_of(log.surface_events(session_id, through_seq), include_failed=include_failed)


def surface_of(events: Sequence[Event], *, include_failed: bool = False) -> list[SurfaceMessage]:
    """`derive_messages` on events already read (in surface order); see there for the rules.

    A `surface/replaced` event obscures the messages it targets (body `targets`: [[session,
    seq], …], a contiguous range) and puts its `message` (None = a delete) where the first one
    was (DESIGN.md: edit and delete are surface replacements; the originals stay in the log).

    A surface that extends one folded recently (its first events the very same objects, as the
    store's cached surface keeps them) is folded from there on only (`fold_surface`).
    """
    return fold_surface(events, include_failed=include_failed).result()


def fold_surface(events: Sequence[Event], *, include_failed: bool = False) -> SurfaceFold:
    """`SurfaceFold(...).add(events)`, going on from a recent fold whose events are a prefix of
    `events` (identical objects, checked one by one: the log never changes an event, so the fold
    of the same objects is the same). A step on a 5,000-message chat derives its surface several
    times (the assembler, MVU's head, the claim); between two steps only a dozen events are new,
    so each derivation folds those instead of all 5,000 (~25 ms each on the loop or a worker).
    Returns a fold of the caller's own (extending it does not change the cache)."""
    return _FOLDS.fold(events, include_failed)


class _FoldCache:
    """The last `SIZE` surfaces folded (of at least `SMALLEST` events), with their folds."""

    SIZE = 4
    SMALLEST = 200  # below this a fold costs less than keeping it

    def __init__(self) -> None:
        self._entries: list[tuple[tuple[Event, ...], bool, SurfaceFold]] = []
        self._lock = threading.Lock()  # the loop and worker threads derive surfaces at once

    def fold(self, events: Sequence[Event], include_failed: bool) -> SurfaceFold:
        if len(events) < self.SMALLEST:
            return SurfaceFold(include_failed=include_failed).add(events)
        with self._lock:
            entries = list(self._entries)
        base = max((entry for entry in entries if entry[1] == include_failed and starts_with(events, entry[0])),
                   key=lambda entry: len(entry[0]), default=None)
        if base is not None and len(base[0]) == len(events):
            return base[2].copy()
        if base is None:
            fold = SurfaceFold(include_failed=include_failed).add(events)
        else:
            fold = base[2].copy().add(events[len(base[0]):])
        # The base stays: the step's own list (events it appended) and the store's re-read (the
        # same events decoded again) branch from it.
        kept = (tuple(events), include_failed, fold.copy())
        with self._lock:
            self._entries = [*self._entries[-(self.SIZE - 1):], kept]
        return fold


def starts_with(items: Sequence[object], base: Sequence[object]) -> bool:
    """Whether `items` starts with exactly the objects of `base` (identity, one by one; False
    for an empty `base`): what was derived from `base` holds for that part of `items`."""
    n = len(base)
    if n > len(items) or not n or base[-1] is not items[n - 1] or base[0] is not items[0]:
        return False
    return all(map(operator.is_, base, items))


_FOLDS = _FoldCache()


class SurfaceFold:
    """`surface_of` as a fold that can go on: `add` events in surface order, `result` the surface
    so far, `copy` to extend a surface with what was stored after it without deriving it again
    (a step derives its history at the claim, then the request's surface after the opening stored
    its system section and input: ~10-20 ms of the event loop each on a 5,000-message chat)."""

    __slots__ = ("include_failed", "messages", "system")

    def __init__(self, *, include_failed: bool = False) -> None:
        self.include_failed = include_failed
        self.system: SurfaceMessage | None = None
        self.messages: list[SurfaceMessage] = []

    def add(self, events: Iterable[Event]) -> SurfaceFold:
        """Fold `events` (in surface order, after those added before) in; returns self."""
        messages, include_failed = self.messages, self.include_failed
        for event in events:
            if event.kind == EventKind.SURFACE_REPLACED:
                _replace(messages, event)
                continue
            if event.kind not in MESSAGE_KINDS:
                continue
            if event.kind == EventKind.SYSTEM_MESSAGE and event.source == SYSTEM_PROMPT_SOURCE:
                self.system = _to_surface(event)
                continue
            if event.kind == EventKind.ASSISTANT_ATTEMPT and not event.content and not include_failed:
                continue
            messages.append(_to_surface(event))
        return self

    def result(self) -> list[SurfaceMessage]:
        """The surface so far: the newest system section first, then the messages."""
        return ([self.system] if self.system else []) + self.messages

    def copy(self) -> SurfaceFold:
        """An independent fold at the same point (the messages themselves are immutable)."""
        other = SurfaceFold(include_failed=self.include_failed)
        other.system, other.messages = self.system, list(self.messages)
        return other


def _replace(messages: list[SurfaceMessage], event: Event) -> None:
    targets = {(int(t[0]), int(t[1])) for t in event.body.get("targets", ())}
    hits = [i for i, m in enumerate(messages) if m.ref in targets]
    if not hits:
        return  # its targets are not on this surface (already obscured)
    replacement = event.body.get("message")
    for index in reversed(hits):
        del messages[index]
    if isinstance(replacement, dict):
        role = str(replacement.get("role") or event.role or "assistant")
        content = replacement.get("content")
        messages.insert(hits[0], SurfaceMessage(
            event.ref, REPLACED_KIND.get(role, EventKind.SYSTEM_MESSAGE), role,
            content if isinstance(content, str) else "", event.origin, event.source, event.created_at,
            replacement))


REPLACED_KIND = {"user": EventKind.USER_MESSAGE, "assistant": EventKind.ASSISTANT_MESSAGE,
                 "system": EventKind.SYSTEM_MESSAGE, "tool": EventKind.TOOL_RESULT}
"""The message kind a replacement shows as, by its role."""

EDIT_SOURCE = "edit"
"""`source` of a `surface/replaced` event the person made (an edit or a delete)."""

COMPOSER_SOURCE = "impersonation_to_composer"
"""`source` of the `surface/replaced` delete that takes an impersonated line out of the chat
because it went into the composer instead (SillyTavern's send box); counted out of the
message count, as the line was never in the chat."""


def replacement_event(targets: Sequence[tuple[int, int]], message: dict[str, Any] | None,
                      origin: Origin | None = None, source: str = EDIT_SOURCE) -> NewEvent:
    """A `surface/replaced` event obscuring `targets` with `message` (None = delete them).

    Args:
        targets: refs of a contiguous run of surface messages.
        message: the replacement `{"role", "content", …}`, or None.
        origin: the replacement's origin (operator for an assistant message the person rewrote).
    """
    role = message.get("role") if message else None
    return NewEvent(EventKind.SURFACE_REPLACED, role if isinstance(role, str) else None,
                    {"targets": [list(t) for t in targets], "message": message}, origin, source)


HIDDEN_KEY = "hidden"
"""Body flag of a message shown in the chat but never sent (SillyTavern `is_system`)."""


def sent_to_model(message: SurfaceMessage) -> bool:
    """Whether a surface message goes into requests: not a placeholder reply, not hidden
    (SillyTavern `is_system`: "hidden from the prompt, still displayed")."""
    return message.source != PLACEHOLDER_SOURCE and not message.body.get(HIDDEN_KEY)


def request_messages(surface: list[SurfaceMessage]) -> list[dict[str, Any]]:
    """The OpenAI message array a surface sends (the messages `sent_to_model` keeps)."""
    return [m.to_request() for m in surface if sent_to_model(m)]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A pinned view of a session: its surface through `through_seq` (inclusive)."""

    session_id: int
    through_seq: int


@dataclass(frozen=True, slots=True)
class Page:
    """A bounded slice of a snapshot's surface: `messages` start at `offset` of `total`."""

    snapshot: Snapshot
    offset: int
    total: int
    messages: list[SurfaceMessage]


def inspect(log: SessionLog, session_id: int) -> Snapshot:
    """Pin the session's current head so later pages read one stable surface."""
    return Snapshot(session_id, log.head_seq(session_id))


def tail(log: SessionLog, snapshot: Snapshot, limit: int = 50, *, include_failed: bool = False) -> list[SurfaceMessage]:
    """The last `limit` chat messages of a snapshot (the system section left out), read with
    a bounded query when the log offers `tail_events` (the store does: one index scan per
    ancestor, never the whole history); otherwise derived in full and sliced.

    Edits and deletes inside the window apply; a window that deletes thinned is read again
    wider, so the result is the same as slicing the whole surface.
    """
    reader = getattr(log, "tail_events", None)
    if reader is None:
        surface = [m for m in derive_messages(log, snapshot.session_id, snapshot.through_seq,
                                              include_failed=include_failed) if m.source != SYSTEM_PROMPT_SOURCE]
        return surface[-limit:] if limit > 0 else []
    window = limit + 8
    while True:
        events, complete = reader(snapshot.session_id, window, snapshot.through_seq)
        surface = [m for m in surface_of(events, include_failed=include_failed) if m.source != SYSTEM_PROMPT_SOURCE]
        if len(surface) >= limit or complete:
            return surface[-limit:] if limit > 0 else []
        window *= 4


def page(log: SessionLog, snapshot: Snapshot, offset: int = 0, limit: int = 50) -> Page:
    """Read `limit` surface messages of a snapshot from `offset`; a negative offset counts
    from the end (-50 = the last 50). Appends after the snapshot never shift a page."""
    surface = derive_messages(log, snapshot.session_id, snapshot.through_seq)
    total = len(surface)
    start = max(0, total + offset) if offset < 0 else min(offset, total)
    return Page(snapshot, start, total, surface[start : start + max(0, limit)])
