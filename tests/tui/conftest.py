"""Fixtures for the TUI tests: a scripted provider, a service with the corpus imported, helpers."""

from __future__ import annotations

import asyncio
import gc
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from textual.message import Message
from textual.notifications import Notification, Notify
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, TextArea

from tavern_tui.config import Settings
from tavern_tui.engine.stream import BaseProvider, ChatRequest, Finished, ReasoningDelta, StreamEvent, TextDelta, Usage
from tavern_tui.service import Tavern
from tests.conftest import seed_database

GATE = object()
"""A script step that waits until the test opens `ScriptedProvider.gate` (never, to test Esc)."""


@dataclass(frozen=True)
class Think:
    """A script step that yields a reasoning delta."""

    text: str


class ScriptedProvider(BaseProvider):
    """A provider whose replies are scripts: strings are text deltas, `Think` reasoning deltas,
    `GATE` waits for `gate`, an exception is raised where it stands."""

    name = "scripted"
    model = "script-1"

    def __init__(self) -> None:
        self.scripts: deque[tuple[object, ...]] = deque()
        self.requests: list[ChatRequest] = []
        self._gate: asyncio.Event | None = None

    @property
    def gate(self) -> asyncio.Event:
        """Opened by the test to let a gated script continue (created on the running loop)."""
        if self._gate is None:
            self._gate = asyncio.Event()
        return self._gate

    def enqueue(self, *steps: object) -> None:
        """Script the next reply."""
        self.scripts.append(steps)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Play the next script (a default one-word reply when none is queued)."""
        self.requests.append(request)
        steps = self.scripts.popleft() if self.scripts else ("Hm.",)
        for step in steps:
            await asyncio.sleep(0)
            if step is GATE:
                await self.gate.wait()
            elif isinstance(step, BaseException):
                raise step
            elif isinstance(step, Think):
                yield ReasoningDelta(step.text)
            else:
                yield TextDelta(str(step))
        yield Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
        yield Finished("stop")


@pytest.fixture(autouse=True)
def _unfreeze_heap() -> Iterator[None]:
    """Opening a chat freezes the heap (`Tavern.steps.warm_world_info`); give the next test a normal one."""
    yield
    gc.unfreeze()


@pytest.fixture(autouse=True)
def _fine_idle_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Textual's `Pilot.press` and `Pilot.pause` wait for the process to look idle by sleeping 20 ms
    and checking it used under 1 ms of CPU, twice per key: 40 ms or more a key, so typing one
    sentence took seconds in every test. The same test at a 4 ms grain (idle: under 0.2 ms of CPU)."""
    import textual._wait

    monkeypatch.setattr(textual._wait, "SLEEP_GRANULARITY", 0.004)
    monkeypatch.setattr(textual._wait, "SLEEP_IDLE", 0.004 / 20)


@pytest.fixture(autouse=True)
def _no_unseen_frames(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Headless, Textual composes every frame's lines and then drops them (`App._display` returns
    when headless): about a third of a TUI test's CPU. Here the top screen's refresh keeps its
    bookkeeping (dirty regions cleared, the mouse-over updated) without composing lines nobody
    sees. Layout, messages, focus and every widget's state run as they do in a terminal;
    `export_screenshot` (the SVG snapshots) still renders in full, and the last screen of every
    test is composed once as it closes. Snapshot tests compose every frame, as a terminal does:
    some widgets settle what they show while drawing (a text area's scroll bar)."""
    if "snap_compare" in request.fixturenames:
        return
    from textual.app import App
    from textual.screen import Screen

    real = Screen._compositor_refresh

    def refresh(self: Screen) -> None:
        app = self.app
        if not (app.is_headless and self is app.screen and not app.is_inline):
            real(self)
            return
        self._compositor._dirty_regions.clear()
        self._dirty_widgets.clear()
        app._update_mouse_over(self)

    monkeypatch.setattr(Screen, "_compositor_refresh", refresh)

    real_shutdown = App._shutdown

    async def shutdown(self: App[object]) -> None:
        # The last screen is composed once, so a widget that cannot render still fails its test.
        if self.is_headless and self._screen_stack and self._running:
            self.screen._compositor.render_update(full=True, screen_stack=self._background_screens)
        await real_shutdown(self)

    monkeypatch.setattr(App, "_shutdown", shutdown)


@pytest.fixture
def scripted() -> ScriptedProvider:
    """A fresh scripted provider."""
    return ScriptedProvider()


@pytest.fixture
def make_tavern(db_url: str, corpus_dir: Path, database_templates: dict[str, Path]) -> Iterator[Callable[..., Tavern]]:
    """Build services on the test's database (several may share it, like two app runs). The
    first, with `import_corpus`, starts from the database with the corpus cards imported (a copy
    of `database_templates["corpus"]` on SQLite; imported here on PostgreSQL)."""
    opened: list[Tavern] = []

    def make(provider: object, *, import_corpus: bool = True) -> Tavern:
        seeded = import_corpus and not opened and db_url.startswith("sqlite:///")
        if seeded:
            seed_database(database_templates["corpus"], db_url)
        service = Tavern(Settings(db_url=db_url), provider=provider)  # type: ignore[arg-type]
        if import_corpus and not seeded:
            assert all(r.ok for r in service.imports.import_paths([corpus_dir / "cards"]))
        opened.append(service)
        return service

    yield make
    for service in opened:
        service.close()


@pytest.fixture
def corpus_tavern(make_tavern: Callable[..., Tavern], scripted: ScriptedProvider) -> Tavern:
    """The service with the corpus cards imported and the scripted provider."""
    return make_tavern(scripted)


@pytest.fixture
def no_cursor_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the Input and TextArea (composer) cursors steady so screenshots do not depend on timing."""
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)
    monkeypatch.setattr(TextArea, "_toggle_cursor_blink_visible", lambda self: None)


def started_on(tavern: Tavern, playthrough_id: int, when: datetime) -> None:
    """Store `when` as the playthrough's start, so a title made from its day ("3 Dec 2026") is the
    same on every run of a snapshot test."""
    import sqlalchemy as sa

    from tavern_tui.store.models import Base

    table = Base.metadata.tables["playthroughs"]
    with tavern.store.engine.begin() as conn:
        conn.execute(sa.update(table).where(table.c.id == playthrough_id).values(created_at=when))
    tavern.playthroughs._titles.clear()  # titles are kept per log version, and no event was appended


async def wait_until(pilot: Pilot[object], predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    """Let the app process messages until `predicate()` holds (short pauses, bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await pilot.pause(0.01)


def notifications(seen: list[Message]) -> list[Notification]:
    """Every notification a `message_hook` list has seen so far (the app dispatches `Notify` in
    its own task: a check of one waits for it, see `noted`)."""
    return [m.notification for m in seen if isinstance(m, Notify)]


def notes(seen: list[Message]) -> list[str]:
    """Every notification's message text a `message_hook` list has seen so far."""
    return [n.message for n in notifications(seen)]


async def noted(pilot: Pilot[object], seen: list[Message], match: str | Callable[[str], bool]) -> str:
    """Wait until a notification equal to `match` (or one it accepts) has been seen; return it.

    The app dispatches `Notify` in its own task, so a screen can finish the work that notified
    (a reload, say) before the app has handled the notification: a check waits for it."""
    accept = match if callable(match) else match.__eq__
    await wait_until(pilot, lambda: any(accept(n) for n in notes(seen)))
    return next(n for n in notes(seen) if accept(n))


async def open_character(pilot: Pilot[object], name: str, *, playthrough: bool = True) -> None:
    """On the home screen, move the cursor to `name` with the arrow keys and press Enter.

    Enter opens the latest playthrough, and on a character with none an opening draft (issue
    20): with `playthrough` (the default, for tests of a chat) one is started first through the
    service when the character has none, as a person who played it before would have.
    """
    if playthrough:  # off the event loop, as the app's own service calls are
        tavern = pilot.app.tavern  # type: ignore[attr-defined]

        def ensure() -> None:
            character = tavern.library.find_character(name)
            if not tavern.playthroughs.playthroughs(character.id, limit=1):
                tavern.playthroughs.new_playthrough(character.id)

        await asyncio.to_thread(ensure)
    listing = pilot.app.screen.query_one("#characters", OptionList)
    await wait_until(pilot, lambda: listing.option_count > 0)  # the home screen reads them in a worker
    prompts = [str(listing.get_option_at_index(i).prompt).split("\n")[0] for i in range(listing.option_count)]
    target = prompts.index(name)
    while listing.highlighted != target:
        await pilot.press("down" if (listing.highlighted or 0) < target else "up")
    await pilot.press("enter")


async def workers_idle(pilot: Pilot[object], timeout: float = 10.0) -> None:
    """Let the app run until no worker is pending or running and no status line waits to ask for
    its token gauge (the screens read and write the service in thread workers; what one hands
    back may start the next)."""
    from textual.worker import WorkerState

    from tavern_tui.tui.widgets.status_line import StatusLine

    def busy() -> bool:
        # A status line's gauge waits for a quiet moment on a timer before its worker starts.
        return any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in pilot.app.workers) or any(
            line.gauge_pending for line in pilot.app.screen.query(StatusLine))

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    quiet = 0
    while quiet < 2:  # twice in a row: a handler may start a worker right after one ends
        await pilot.pause(0.01)
        quiet = 0 if busy() else quiet + 1
        if loop.time() > deadline:
            raise AssertionError(f"workers still running after {timeout}s")


def screen_text(app: object) -> str:
    """What the terminal shows now, as plain text, one line per row (from the app's SVG screenshot:
    each row's text pieces joined, entities decoded)."""
    import html
    import re

    rows: dict[int, list[str]] = {}
    svg = app.export_screenshot()  # type: ignore[attr-defined]
    for line, text in re.findall(r'<text [^>]*clip-path="url\(#terminal-\d+-line-(\d+)\)">([^<]*)</text>', svg):
        rows.setdefault(int(line), []).append(html.unescape(text).replace("\xa0", " "))
    return "\n".join("".join(rows[n]) for n in sorted(rows))


async def search_settled(pilot: Pilot[object], screen: object) -> None:
    """Wait until the search screen has searched its whole query: each key restarts a short
    timer, and an earlier word's search (a worker) may show its hits first."""
    await wait_until(pilot, lambda: screen._timer is None)  # type: ignore[attr-defined]
    await workers_idle(pilot)
