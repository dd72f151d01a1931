"""Provides `ExitWatchdog`: a quit signal (SIGTERM, SIGHUP) or a lost terminal ends the TUI's
process within a few seconds, whatever a worker thread or the event loop is blocked on.

The app is asked to quit cleanly first (a streaming reply settles with its text, leases are
released); if the process is still alive `grace` seconds later (a worker waits on the SQLite
write lock, an `asyncio.to_thread` call never returns, the interpreter joins a stuck thread at
exit), the settle hooks run (each bounded) and the process ends with `os._exit`. A step lease of
a dead process counts for nothing (`store.StepLeases`), so the next open recovers its reply.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

QUIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals that quit the app (a streaming reply settles first)."""

EXIT_GRACE = 4.0
"""Seconds a clean exit has after a quit signal or a lost terminal before the process is ended."""

TERMINAL_LOST = 129
"""Exit status when the terminal went away (as for SIGHUP: 128 + 1)."""


class ExitWatchdog:
    """Turns quit signals and a lost terminal into a clean exit request, and ends the process
    when that exit does not finish within `grace` seconds.

    Args:
        grace: seconds the clean exit has.
        exit_now: what ends the process (`os._exit`; tests may pass another).
    """

    def __init__(self, grace: float = EXIT_GRACE, exit_now: Callable[[int], object] = os._exit) -> None:
        self.grace = grace
        self.exit_now = exit_now
        self.reason: str | None = None
        """Why the exit was asked ("SIGHUP", "terminal lost", …), None until then."""
        self.status = 0
        self._tripped = threading.Event()
        self._request: Callable[[], None] | None = None
        self._settle: list[Callable[[], None]] = []
        self._previous: dict[int, object] = {}
        self._watcher: threading.Thread | None = None

    @property
    def tripped(self) -> bool:
        """Whether a quit signal came or the terminal went away."""
        return self._tripped.is_set()

    def install(self, request_exit: Callable[[], None]) -> None:
        """Handle the quit signals (in place of the loop's) and watch the terminal; `request_exit`
        asks the app to quit cleanly and must be safe to call from any thread."""
        self._request = request_exit
        for sig in QUIT_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, name="tavern-exit-watchdog", daemon=True)
            self._watcher.start()

    def on_settle(self, hook: Callable[[], None]) -> None:
        """Run `hook` (best effort, in the watchdog's thread) before the process is ended."""
        self._settle.append(hook)

    def trip(self, reason: str, status: int) -> None:
        """Ask for the clean exit now; the process ends `grace` seconds later if it is still alive.
        A second trip (a second signal) ends it at once."""
        if self._tripped.is_set():
            self._settle_and_exit()
            return
        self.reason, self.status = reason, status
        self._tripped.set()
        request = self._request
        if request is not None:
            with contextlib.suppress(Exception):  # the loop may be closed already: the deadline still holds
                request()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.trip(signal.Signals(signum).name, 128 + signum)

    def _watch(self) -> None:
        # Polling stdin for HUP catches a closed terminal even when no SIGHUP reaches us.
        poller = _hangup_poller()
        while not self._tripped.is_set():
            if poller is None:
                self._tripped.wait()
                break
            if any(mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _fd, mask in poller.poll(250)):
                self.trip("terminal lost", TERMINAL_LOST)
        threading.Event().wait(self.grace)  # a clean exit ends the process (and this daemon thread) first
        self._settle_and_exit()

    def _settle_and_exit(self) -> None:
        for hook in self._settle:
            done = threading.Event()

            def run(hook: Callable[[], None] = hook, done: threading.Event = done) -> None:
                with contextlib.suppress(BaseException):
                    hook()
                done.set()

            threading.Thread(target=run, name="tavern-exit-settle", daemon=True).start()
            done.wait(1.0)  # a hook blocked on the same lock must not hold the exit
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        self.exit_now(self.status or 1)


def _hangup_poller() -> select.poll | None:
    """A poller reporting only hang-ups and errors of stdin when it is a terminal, else None."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    if not os.isatty(fd) or not hasattr(select, "poll"):
        return None
    poller = select.poll()
    poller.register(fd, 0)  # no events asked: HUP, ERR and NVAL are always reported
    return poller
