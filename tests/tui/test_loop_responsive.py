"""The event loop never waits on the database: every store call from the screens runs in a worker thread.

Rule: issue 14 part 3 / structure-review.md change 3 ("one concurrency rule for the TUI"); the anchor
is harlequin's threading model (all database work in `@work(thread=True)` workers).
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from sqlalchemy import event

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.trace import TraceScreen
from tavern_tui.tui.screens.tree import TreeScreen
from tests.tui.conftest import ScriptedProvider, wait_until
from tests.tui.test_app import SIZE, open_seraphina, send

DELAY = 0.05
"""Seconds every SQL statement sleeps (a slow database, e.g. PostgreSQL over a network)."""

TICK = 0.05
"""The probe timer's interval in seconds."""

@dataclass
class SlowStore:
    """Makes every SQL statement on a store's engine sleep `DELAY` and records where it ran.

    Hooked on SQLAlchemy's `before_cursor_execute`, so it sees every statement the store, its
    repositories and its event log send, whoever calls them; `EventLog.append` is wrapped too,
    because its SQLite hot path writes on the driver connection, below SQLAlchemy's events.
    """

    loop_thread: int
    calls: list[tuple[int, traceback.StackSummary]] = field(default_factory=list)

    def before_execute(self, *_: object) -> None:
        """Record the thread (and, on the loop, the stack) of one statement, then sleep."""
        ident = threading.get_ident()
        stack = traceback.extract_stack(limit=40) if ident == self.loop_thread else traceback.StackSummary()
        self.calls.append((ident, stack))
        time.sleep(DELAY)

    @property
    def loop_calls(self) -> list[str]:
        """Statements run on the event-loop thread, each as its innermost tavern_tui frames."""
        return [_summary(stack) for ident, stack in self.calls if ident == self.loop_thread]


def _summary(stack: traceback.StackSummary) -> str:
    frames = [f for f in stack if "/tavern_tui/" in f.filename]
    return " <- ".join(f"{f.filename.split('/tavern_tui/')[-1]}:{f.lineno} {f.name}" for f in reversed(frames[-6:]))


@pytest.fixture
def slow_tavern(corpus_tavern: Tavern, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], SlowStore]]:
    """Install the slow hooks on the corpus service's store once the corpus is imported."""
    assert corpus_tavern.store is not None
    engine = corpus_tavern.store.engine
    log = corpus_tavern.store.events
    installed: list[SlowStore] = []

    def install(loop_thread: int) -> SlowStore:
        slow = SlowStore(loop_thread)
        event.listen(engine, "before_cursor_execute", slow.before_execute)
        append = log.append

        def slow_append(*args: object, **kwargs: object) -> object:
            slow.before_execute()
            return append(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(log, "append", slow_append)
        installed.append(slow)
        return slow

    yield install
    for slow in installed:
        event.remove(engine, "before_cursor_execute", slow.before_execute)


@pytest.mark.slow
async def test_no_store_call_runs_on_the_event_loop(corpus_tavern: Tavern, scripted: ScriptedProvider,
                                                    slow_tavern: Callable[[int], SlowStore]) -> None:
    """Open a chat, send, swipe, open the tree (F5) and the trace (F7) against a store whose every
    statement takes 50 ms.

    Deterministic part: no statement may run on the event-loop thread (its `threading.get_ident()`
    is taken when the app starts): not the screens' reads and writes (thread workers), and not
    the step's (the service prepares a step in a thread, the engine's log writes go through
    `engine.log.ThreadedLog`).

    Responsiveness part: an app timer ticks every 50 ms; a loop blocked by the database delays
    or skips ticks (Textual's timers skip the ones missed), so the ticks counted must be at least
    half of elapsed/interval. Measured on a loaded 2-core machine: the screens' old on-loop reads
    gave 104 ticks in 348 intervals (0.30); with every statement off the loop, 269 in 271 (0.99).
    Rendering takes loop time too, hence the margin.
    """
    scripted.enqueue("The first reply.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        slow = slow_tavern(threading.get_ident())
        ticks = 0

        def tick() -> None:
            nonlocal ticks
            ticks += 1

        started = time.monotonic()
        app.set_interval(TICK, tick)

        chat = await open_seraphina(pilot)
        await send(pilot, chat, "hello there")
        await pilot.press("ctrl+right")  # past the last reply: a new variant is generated
        await wait_until(pilot, lambda: not chat.generating and chat.status.swipe == "swipe 2/2", timeout=20)
        await pilot.press("f5")
        await wait_until(pilot, lambda: isinstance(app.screen, TreeScreen) and app.screen.loaded)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen.loaded)
        elapsed = time.monotonic() - started

    assert len(slow.calls) > 20  # the session did read and write the database
    print(f"{ticks} ticks in {elapsed:.1f} s ({elapsed / TICK:.0f} intervals); {len(slow.calls)} statements")
    assert slow.loop_calls == []
    assert ticks >= 0.5 * elapsed / TICK, (ticks, elapsed)
