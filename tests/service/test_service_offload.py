"""The service's async step paths never run SQL on the event loop's thread (issue 14 part 3).

The TUI awaits `steps.send`, `regenerate`, `reply`, `continue_reply`, `impersonate` and
`traces.replay` from a worker on the Textual event loop: a statement run there freezes the
screen for its round trip. Every statement is recorded with the thread that ran it, through
SQLite's own trace callback on each driver connection, so the event log's raw-driver hot path
(`EventLog._append_sqlite`) is seen as well as everything SQLAlchemy executes.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import event

from tavern_tui.config import Settings
from tavern_tui.engine.step import StepSettled, StepUpdate
from tavern_tui.errors import NotFound, TavernError
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel


class StatementThreads:
    """Every SQL statement the store's connections run, with the ident of the thread that ran it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.statements: list[tuple[int, str]] = []

    def attach(self, dbapi_connection: sqlite3.Connection, _record: object) -> None:
        dbapi_connection.set_trace_callback(self._record)

    def _record(self, statement: str) -> None:
        with self._lock:
            self.statements.append((threading.get_ident(), statement))

    def clear(self) -> None:
        with self._lock:
            self.statements.clear()

    def on(self, thread: int) -> list[str]:
        """The statements run on `thread`, in order."""
        with self._lock:
            return [sql for ident, sql in self.statements if ident == thread]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    # SQLite on purpose (not `db_url`): the trace callback is SQLite's, and it sees raw-driver statements too.
    return f"sqlite:///{tmp_path / 'tavern.sqlite3'}"


@pytest.fixture
def traced(sqlite_url: str, model: ScriptedModel) -> Iterator[tuple[Tavern, StatementThreads]]:
    service = Tavern(Settings(db_url=sqlite_url), provider=model)
    recorder = StatementThreads()
    assert service.store is not None
    event.listen(service.store.engine, "connect", recorder.attach)
    service.store.engine.dispose()  # connections pooled before the listener reconnect with the callback
    yield service, recorder
    service.close()


async def drain(steps: AsyncIterator[StepUpdate]) -> list[StepUpdate]:
    return [update async for update in steps]


def _on_loop(recorder: StatementThreads, loop_thread: int) -> list[str]:
    """The statements recorded on the loop's thread since the last call (the record is cleared);
    the step must have run some statements elsewhere, or the check would prove nothing."""
    found = recorder.on(loop_thread)
    assert len(recorder.statements) > len(found)
    recorder.clear()
    return found


async def _playthrough(service: Tavern, model: ScriptedModel, corpus_dir: Path, before: str) -> int:
    """A Seraphina playthrough, with one exchange unless `before` is "nothing", ending with an
    impersonated line of the person when `before` is "impersonated"."""
    [card] = service.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])
    assert card.id is not None
    pid = service.playthroughs.new_playthrough(card.id, user_name="Ada").id
    if before != "nothing":
        model.enqueue("First answer.")
        await drain(service.steps.send(pid, "Where am I?"))
    if before == "impersonated":
        model.enqueue("I look around.")
        await drain(service.steps.impersonate(pid))
    return pid


# (path, what the playthrough holds before it, the text the chat's last message shows after it)
PATHS = [
    ("send", "nothing", "First answer."),
    ("regenerate", "exchange", "Next answer."),
    ("continue_reply", "exchange", "First answer. Next answer."),
    ("impersonate", "exchange", "Next answer."),
    ("reply", "impersonated", "Next answer."),
    ("replay", "exchange", "Next answer."),
]


@pytest.mark.parametrize(("path", "before", "shown"), PATHS, ids=[p[0] for p in PATHS])
async def test_a_step_path_runs_no_sql_on_the_event_loop(traced, model: ScriptedModel, corpus_dir: Path,  # type: ignore[no-untyped-def]
                                                        path: str, before: str, shown: str) -> None:
    service, recorder = traced
    loop_thread = threading.get_ident()  # the test's coroutine runs on the loop's thread
    pid = await _playthrough(service, model, corpus_dir, before)
    original = service.traces.traces(pid)[-1].id if path == "replay" else None
    recorder.clear()
    # The recorder does see statements on the loop: a synchronous read made here is recorded.
    service.playthroughs.playthrough(pid)
    assert any(sql.lstrip().upper().startswith("SELECT") for sql in recorder.on(loop_thread))
    recorder.clear()

    model.enqueue("First answer." if path == "send" else "Next answer.")
    steps = {"send": lambda: service.steps.send(pid, "Where am I?"),
             "regenerate": lambda: service.steps.regenerate(pid),
             "continue_reply": lambda: service.steps.continue_reply(pid),
             "impersonate": lambda: service.steps.impersonate(pid),
             "reply": lambda: service.steps.reply(pid),
             "replay": lambda: service.traces.replay(str(original))}[path]
    updates = await drain(steps())
    assert isinstance(updates[-1], StepSettled)
    assert _on_loop(recorder, loop_thread) == []

    last = service.playthroughs.messages(pid)[-1]
    assert last.content == shown
    assert last.role == ("user" if path == "impersonate" else "assistant")
    if path == "replay":
        assert service.traces.trace(service.traces.traces(pid)[-1].id)["record"]["replay_of"] == original


# (path, what the playthrough holds before it, the error, its message)
REFUSALS = [
    ("regenerate", "nothing", TavernError, "the greeting swipes among the card's greetings"),
    ("continue_reply", "impersonated", TavernError, "continue extends the last reply"),
    ("reply", "nothing", TavernError, "nothing to answer: the chat does not end with your message"),
    ("replay", "nothing", NotFound, "no trace 1:999"),
]


@pytest.mark.parametrize(("path", "before", "error", "message"), REFUSALS, ids=[r[0] for r in REFUSALS])
async def test_a_refused_step_is_refused_from_its_thread_with_the_same_error(  # type: ignore[no-untyped-def]
        traced, model: ScriptedModel, corpus_dir: Path, path: str, before: str, error: type[Exception],
        message: str) -> None:
    service, recorder = traced
    loop_thread = threading.get_ident()
    pid = await _playthrough(service, model, corpus_dir, before)
    shown = [(m.ref, m.content) for m in service.playthroughs.messages(pid)]
    requests = len(model.requests)
    recorder.clear()
    steps = {"regenerate": lambda: service.steps.regenerate(pid),
             "continue_reply": lambda: service.steps.continue_reply(pid),
             "reply": lambda: service.steps.reply(pid),
             "replay": lambda: service.traces.replay("1:999")}[path]
    with pytest.raises(error, match=message):
        await drain(steps())
    assert _on_loop(recorder, loop_thread) == []
    assert [(m.ref, m.content) for m in service.playthroughs.messages(pid)] == shown  # nothing stored
    assert len(model.requests) == requests  # nothing sent
