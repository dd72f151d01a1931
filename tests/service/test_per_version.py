"""What builds read from the database (a playthrough's view, its books, its personas) is read once
between two commits and shared by every build in between (`ServiceContext.per_version`): the
gauge, a request built ahead and the step itself. A commit by anyone, this process or another
connection, and new settings make the next build read again, so no build sees a stale value."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import sqlalchemy

from tavern_tui.service import Tavern
from tavern_tui.service.playthroughs import PlaythroughService
from tests.service.test_compaction_stages import make_service


@pytest.fixture
def live(db_url: str, corpus_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    service, pid, _session = make_service("http://127.0.0.1:9/v1", db_url, corpus_dir, tmp_path, history=2)
    yield service, pid, db_url
    service.close()


def _kept_across_builds(service: Tavern) -> bool:
    """Whether the database can say it changed (SQLite's `data_version`): on PostgreSQL each build
    reads for itself (`per_build`), and these tests check that instead."""
    return service.store.data_version() is not None


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each playthrough id `PlaythroughService` reads from the database from now on."""
    reads: list[int] = []
    original = PlaythroughService._read_playthrough

    def counted(self: PlaythroughService, playthrough_id: int):  # type: ignore[no-untyped-def]
        reads.append(playthrough_id)
        return original(self, playthrough_id)

    monkeypatch.setattr(PlaythroughService, "_read_playthrough", counted)
    return reads


def _build_view(service: Tavern, pid: int):  # type: ignore[no-untyped-def]
    """The playthrough's view as one build reads it (a pinned build, as a step's preparation)."""
    with service.ctx.one_version():
        return service.playthroughs.playthrough(pid)


def test_builds_between_two_commits_read_once(live, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    service, pid, _url = live
    reads = _reads(monkeypatch)
    first = _build_view(service, pid)
    again = [_build_view(service, pid), _build_view(service, pid)]
    if _kept_across_builds(service):
        assert again == [first, first] and all(view is first for view in again) and reads == [pid]
    else:
        assert again == [first, first] and reads == [pid, pid, pid]


def test_a_commit_by_another_connection_is_read_by_the_next_build(live, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    service, pid, db_url = live
    reads = _reads(monkeypatch)
    view = _build_view(service, pid)
    assert view.character_name == "Seraphina"
    other = sqlalchemy.create_engine(db_url)  # another process renames the character
    with other.begin() as connection:
        connection.execute(sqlalchemy.text("UPDATE characters SET name = 'Sera' WHERE id = :id"),
                           {"id": view.character_id})
    other.dispose()
    assert _build_view(service, pid).character_name == "Sera"
    assert reads == [pid, pid]


def test_a_commit_by_this_process_is_read_by_the_next_build(live, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    service, pid, _url = live
    reads = _reads(monkeypatch)
    before = _build_view(service, pid)
    with service.store.unit_of_work() as uow:  # the playthrough marked played, as a step does
        uow.playthroughs.touch(pid)
    assert _build_view(service, pid).updated_at > before.updated_at
    assert reads == [pid, pid]


def test_new_settings_are_read_by_the_next_build(live, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    service, pid, _url = live
    reads = _reads(monkeypatch)
    _build_view(service, pid)
    service.ctx.settings = replace(service.ctx.settings, user_name="Someone")
    _build_view(service, pid)
    assert reads == [pid, pid]


def test_outside_a_build_every_call_reads(live, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    service, pid, _url = live
    reads = _reads(monkeypatch)
    service.playthroughs.playthrough(pid)
    _build_view(service, pid)
    service.playthroughs.playthrough(pid)  # not a build: what it reads is not known to be current
    assert reads == [pid, pid, pid]
