"""`TavernScreen` and `TavernModal`: screens handed the service (attributes down) that call it off
the event loop, with one place that reports its refusals.

The rule (issue 14, structure-review.md change 3; anchor: harlequin's threading model): every
service call made from `on_mount`, an action or a handler runs in a thread through `call` (a
worker that waits its turn on the loop and hands the call to `asyncio.to_thread`), so a slow
database (PostgreSQL over a network) never freezes rendering. The result comes back to `then` on
the event loop; an error ends the worker in ERROR and the one `Worker.StateChanged` handler here
says it. The chat's generation worker is the exception: it is
an async worker, so Esc cancels the service's step where it stands.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from textual import events, on
from textual.message_pump import MessagePump
from textual.screen import ModalScreen, Screen
from textual.widgets import Input
from textual.worker import Worker, WorkerState

from tavern_tui.errors import TavernError

if TYPE_CHECKING:
    from tavern_tui.service import Tavern


ScreenResultT = TypeVar("ScreenResultT")
ResultT = TypeVar("ResultT")

Severity = Literal["information", "warning", "error"]

CALL_GROUP = "tavern"
"""The worker group of `call`s not given one."""

POLL = 0.05
"""Seconds between re-checks of a queued call's turn (an earlier call may be cancelled unseen)."""

ESC_AGAIN = 4.0
"""Seconds in which a second Esc leaves a screen the first Esc stayed on (text in the chat's
composer, unsaved settings); the warning says them and shows as long (2 s was missed in a trial)."""


@dataclass(eq=False)
class _Link:
    """One call's place in its screen's queue: a call runs once every earlier one has ended.

    A call cancelled before its worker ran (a newer `exclusive` call, the screen closing) never
    runs and never sets `done`, and Textual reports no state for it; so a cancelled link counts
    as ended once the links before it have, and nothing waits on it forever.
    """

    before: _Link | None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    worker: Worker[Any] | None = None

    def pending(self) -> _Link | None:
        """The latest earlier call that has not ended, or None (skips cancelled ones)."""
        link = self.before
        while link is not None:
            if link.done.is_set():
                return None
            if link.worker is None or not link.worker.is_cancelled:
                return link
            link = link.before
        return None

    def ended(self) -> bool:
        """This call returned, or was cancelled and nothing before it is still pending."""
        if self.done.is_set():
            return True
        return self.worker is not None and self.worker.is_cancelled and self.pending() is None

    async def wait_turn(self) -> None:
        """Wait on the loop (holding no thread) until every earlier call has ended."""
        while (earlier := self.pending()) is not None:
            with contextlib.suppress(TimeoutError):  # re-check: it may be cancelled meanwhile
                await asyncio.wait_for(earlier.done.wait(), POLL)

    def finish(self) -> None:
        """Mark the call ended and let go of the links before it (the queue stays short)."""
        self.done.set()
        self.before = None


@dataclass(frozen=True)
class _Call:
    """How one running call reports an error (kept until its worker ends)."""

    severity: Severity
    failed: Callable[[BaseException], object] | None
    link: _Link


TYPE_AHEAD_QUIET = 0.1
"""Seconds without a key before a screen that took typed-ahead keys gives its field the focus."""


class TypeAhead:
    """Keys typed into a screen before its field has the focus, kept and typed into the field in
    order. A screen just pushed gets its focus after its mount (Textual moves it later), and
    the keys of a fast typist (or a paste into tmux) that arrive first were lost (a trial: the
    settings' endpoint URL came out "http:/"). While keys come this way the field is given the
    focus only once they pause (`TYPE_AHEAD_QUIET`): a key the app sent to the screen before
    that must not be typed after one it sends to the field directly.

    The screen calls `take` from its `on_key` and `mounted` at the end of its `on_mount`.
    Printable keys and the field's own keys are taken while nothing has the focus; any other
    (Esc, the screen's keys) is left to the screen's bindings.

    Args:
        screen: the screen the keys reach.
        field: returns the field (the screen's widgets exist only once it is mounted).
    """

    def __init__(self, screen: Screen[Any], field: Callable[[], Input]) -> None:
        self.screen, self.field = screen, field
        self._early: list[events.Key] = []  # keys before the mount: the field does not exist yet
        self._timer: Any = None

    async def take(self, event: events.Key) -> None:
        """Type `event` into the field if it is one for it and nothing else has the focus."""
        screen = self.screen
        if not screen.is_mounted:
            self._stop(event)
            self._early.append(event)
            return
        field = self.field()
        if screen.focused is not None or not self._for_field(event, field):
            return  # the focused widget had the key (one it left bubbles here), or not the field's
        self._stop(event)
        await self._type(event, field)

    async def mounted(self) -> None:
        """The screen is mounted: type what came before, then focus the field (at once when
        nothing came; else once the keys pause)."""
        field, early = self.field(), self._early
        self._early = []
        for event in early:
            if self._for_field(event, field):
                await self._type(event, field)
        if self._timer is None:  # nothing was typed ahead (or only keys not for the field): focus now
            self.screen.set_focus(field)

    @staticmethod
    def _for_field(event: events.Key, field: Input) -> bool:
        return bool(field._bindings.key_to_bindings.get(event.key)) or (  # noqa: SLF001 - the field's own keys
            event.is_printable and bool(event.character))

    @staticmethod
    def _stop(event: events.Key) -> None:
        event.stop()
        event.prevent_default()

    async def _type(self, event: events.Key, field: Input) -> None:
        bindings = field._bindings.key_to_bindings.get(event.key)  # noqa: SLF001
        if bindings:
            await field.run_action(bindings[0].action)
        elif event.character:
            field.insert_text_at_cursor(event.character)
        if self.screen.focused is None:
            if self._timer is not None:
                self._timer.stop()
            self._timer = self.screen.set_timer(TYPE_AHEAD_QUIET, lambda: self.screen.set_focus(field))


class TavernCalls(MessagePump):
    """The `call` machinery shared by `TavernScreen` and `TavernModal`, mixed in before the Screen
    class (a MessagePump, so its `@on` handlers are collected; not a DOMNode, so the screen's CSS
    type chain stays Screen's or ModalScreen's)."""

    _calls: dict[Worker[Any], _Call]
    _last_call: _Link | None

    def call(self, fn: Callable[..., ResultT], *args: Any, title: str,
             then: Callable[[ResultT], object] | None = None, group: str = CALL_GROUP, exclusive: bool = False,
             severity: Severity = "error", failed: Callable[[BaseException], object] | None = None,
             **kwargs: Any) -> Worker[ResultT | None]:
        """Run `fn(*args, **kwargs)` (a service call) in a thread, off the event loop.

        Args:
            title: the worker's description, and the notification's title when it fails.
            then: called on the event loop with the result (awaited when it is a coroutine function);
                not called when the worker was cancelled (an `exclusive` newer call, or the screen
                closed) or `fn` raised.
            group, exclusive: as `@work`: a new exclusive call cancels the group's running ones (a
                thread cannot be stopped, but its result is then dropped).
            severity: the notification's severity when `fn` raises a `TavernError`.
            failed: called on the event loop with the error after it was notified (e.g. to close).

        Returns:
            The worker (`harlequin`'s `@work(exit_on_error=False, group=…, description=…)`, started
            with `run_worker` because group and exclusivity vary by call).

        A screen's calls run one at a time, in the order made (as they did on the loop: a swipe
        then a swipe back must not cross); a cancelled call that has not started is skipped. The
        worker is an async one that waits its turn on the loop and hands `fn` to a thread
        (`asyncio.to_thread`), so a queued call holds no thread: thread workers waiting in a
        thread would fill the loop's small default pool and then wait for a call that has none.
        """
        if not hasattr(self, "_calls"):
            self._calls, self._last_call = {}, None
        link = _Link(self._last_call)
        self._last_call = link

        async def work() -> ResultT | None:
            try:
                await link.wait_turn()
                result = await asyncio.to_thread(fn, *args, **kwargs)
                if then is not None:
                    outcome = then(result)
                    # a coroutine `then` is awaited; a dismiss() AwaitComplete is not (it would
                    # wait for this worker, which its screen cancels on the way out)
                    if inspect.iscoroutine(outcome):
                        await outcome
                return result
            finally:
                link.finish()

        worker: Worker[ResultT | None] = self.run_worker(  # type: ignore[attr-defined]
            work, exclusive=exclusive, exit_on_error=False, group=group, description=title)
        link.worker = worker
        self._calls[worker] = _Call(severity, failed, link)
        return worker

    async def settled(self) -> None:
        """Wait (without blocking the loop) until every call made so far has ended; the chat's
        step waits so that it reads what an earlier swipe or edit wrote."""
        last = getattr(self, "_last_call", None)
        while last is not None and not last.ended():
            await asyncio.sleep(0.01)

    @on(Worker.StateChanged)
    async def _call_ended(self, event: Worker.StateChanged) -> None:
        """The one error handler: a refusal (`TavernError`) is notified under the call's title; any
        other error too, with its type, so a bug is seen rather than swallowed."""
        calls = getattr(self, "_calls", {})
        if event.worker not in calls or event.state not in (WorkerState.SUCCESS, WorkerState.ERROR,
                                                            WorkerState.CANCELLED):
            return
        how = calls.pop(event.worker)
        error = event.worker.error
        if event.state != WorkerState.ERROR or error is None:
            return
        if isinstance(error, TavernError):
            self.notify(str(error), title=event.worker.description, severity=how.severity)  # type: ignore[attr-defined]
        else:
            self.log.error(f"{event.worker.description}: {error!r}")  # type: ignore[attr-defined]
            self.notify(f"{type(error).__name__}: {error}", title=event.worker.description,  # type: ignore[attr-defined]
                        severity="error", timeout=10)
        if how.failed is not None:
            outcome = how.failed(error)
            if inspect.iscoroutine(outcome):  # a dismiss() AwaitComplete is not awaited here
                await outcome


class TavernScreen(TavernCalls, Screen[ScreenResultT], Generic[ScreenResultT]):
    """A full screen on one service (and, for a playthrough's panes, its id), passed in."""

    def __init__(self, tavern: Tavern, playthrough_id: int | None = None) -> None:
        super().__init__()
        self.tavern = tavern
        self.playthrough_id = playthrough_id
        self._esc_armed = False  # an Esc that only warned came less than ESC_AGAIN seconds ago

    def esc_warns(self, would_lose: bool, warning: str) -> bool:
        """Whether this Esc only warns instead of leaving: when leaving now `would_lose` something
        (text in the chat's composer, unsaved settings) and no Esc came in the last `ESC_AGAIN`
        seconds, say `warning` and return True; a second Esc within them returns False (leave)."""
        if would_lose and not self._esc_armed:
            self._esc_armed = True
            self.set_timer(ESC_AGAIN, lambda: setattr(self, "_esc_armed", False))
            self.notify(warning, timeout=ESC_AGAIN)
            return True
        self._esc_armed = False
        return False


class TavernModal(TavernCalls, ModalScreen[ScreenResultT], Generic[ScreenResultT]):
    """A modal screen on one service, passed in."""

    def __init__(self, tavern: Tavern) -> None:
        super().__init__()
        self.tavern = tavern
