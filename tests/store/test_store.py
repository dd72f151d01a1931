"""The store: migrate on open, SQLite settings, gapless append-only events, forks by pointer."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import text

from tavern_tui.engine.events import EventKind, NewEvent, Origin, body_hash
from tavern_tui.errors import NotFound, OriginError, StoreError
from tavern_tui.store.db import current_revision, head_revision, make_engine, upgrade
from tavern_tui.store.store import Store


def _msg(content: str, role: str = "user") -> NewEvent:
    kind = EventKind.USER_MESSAGE if role == "user" else EventKind.ASSISTANT_MESSAGE
    return NewEvent(kind, role, {"content": content})


def test_fresh_database_is_created_at_head_with_every_table(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'sub' / 'new.db'}")
    try:
        assert current_revision(store.engine) == head_revision() == "0022"
        tables = set(sa_inspect(store.engine).get_table_names())
        assert {"characters", "world_books", "presets", "personas", "sessions", "playthroughs", "events",
                "composer_drafts", "alembic_version", "step_leases", "groups"} <= tables
        assert "group_id" in {c["name"] for c in sa_inspect(store.engine).get_columns("playthroughs")}
        columns = {c["name"] for c in sa_inspect(store.engine).get_columns("events")}
        assert {"session_id", "seq", "kind", "role", "origin", "source", "body", "body_sha256", "created_at"} <= columns
        session_columns = {c["name"] for c in sa_inspect(store.engine).get_columns("sessions")}
        assert {"parent_id", "fork_seq"} <= session_columns
    finally:
        store.close()


def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'wal.db'}")
    try:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        store.close()


def test_reopening_keeps_data_and_upgrade_is_idempotent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'twice.db'}"
    first = Store(url)
    sid = first.events.create_session()
    first.events.append(sid, [_msg("kept")])
    first.close()
    second = Store(url)
    try:
        assert [e.content for e in second.events.surface_events(sid)] == ["kept"]
        upgrade(second.engine)  # already at head: no-op
        assert current_revision(second.engine) == head_revision()
    finally:
        second.close()


def test_an_older_empty_database_is_upgraded_on_open(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    with engine.begin() as conn:  # a database some other tool created: no alembic_version yet
        conn.exec_driver_sql("CREATE TABLE unrelated (x INTEGER)")
    engine.dispose()
    store = Store(url)
    try:
        assert current_revision(store.engine) == head_revision()
        assert "unrelated" in sa_inspect(store.engine).get_table_names()
    finally:
        store.close()


def test_a_database_at_revision_0001_is_upgraded_keeping_its_events(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v1.db'}"
    engine = make_engine(url)
    upgrade(engine, "0001")
    assert "world_book_bindings" not in sa_inspect(engine).get_table_names()
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO sessions (id, created_at) VALUES (1, '2026-11-01 10:00:00.000000')")
        conn.exec_driver_sql(
            "INSERT INTO events (session_id, seq, kind, role, body, body_sha256, created_at) VALUES "
            "(1, 1, 'user/message', 'user', '{\"content\":\"old\"}', 'x', '2026-11-01 10:00:01.000000')")
    engine.dispose()
    store = Store(url)
    try:
        assert current_revision(store.engine) == head_revision()
        assert "world_book_bindings" in sa_inspect(store.engine).get_table_names()
        assert [e.content for e in store.events.surface_events(1)] == ["old"]
        assert store.events.append(1, [_msg("new")])[0].seq == 2
    finally:
        store.close()


def test_a_database_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'future.db'}"
    Store(url).close()
    with sqlite3.connect(tmp_path / "future.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(StoreError, match="9999"):
        Store(url)


def test_bad_url_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match="not a database URL"):
        Store("definitely not a url")


def test_seq_is_gapless_from_one_and_hash_is_sha256_of_stored_body(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'seq.db'}")
    try:
        a = store.events.create_session()
        b = store.events.create_session()
        store.events.append(a, [_msg("1"), _msg("2", "assistant")])
        store.events.append(b, [_msg("x")])
        store.events.append(a, [_msg("3")])
        events = store.events.surface_events(a)
        assert [e.seq for e in events] == [1, 2, 3]
        assert [e.seq for e in store.events.surface_events(b)] == [1]
        with store.engine.connect() as conn:
            rows = conn.execute(text("SELECT seq, body, body_sha256 FROM events WHERE session_id = :s ORDER BY seq"),
                                {"s": a}).all()
        assert rows[0].body == '{"content":"1"}'
        import hashlib

        assert rows[0].body_sha256 == hashlib.sha256(b'{"content":"1"}').hexdigest() == body_hash(rows[0].body)
        assert store.events.head_seq(a) == 3
        appended = store.events.append(b, [_msg("timed")])[0]
        read_back = store.events.surface_events(b)[-1]
        assert read_back.created_at == appended.created_at and read_back.created_at.tzinfo is not None
        assert (read_back.body_text, read_back.body_sha256) == (appended.body_text, appended.body_sha256)
    finally:
        store.close()


@pytest.mark.parametrize("statement", ["UPDATE events SET body = '{}'", "DELETE FROM events"])
def test_sqlite_triggers_refuse_update_and_delete(tmp_path: Path, statement: str) -> None:
    path = tmp_path / "ao.db"
    store = Store(f"sqlite:///{path}")
    sid = store.events.create_session()
    store.events.append(sid, [_msg("original")])
    store.close()
    with sqlite3.connect(path) as conn, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute(statement)
    reopened = Store(f"sqlite:///{path}")
    try:
        assert [e.content for e in reopened.events.surface_events(sid)] == ["original"]
    finally:
        reopened.close()


def test_origin_outside_the_closed_set_is_refused_before_and_by_the_database(tmp_path: Path) -> None:
    with pytest.raises(OriginError, match="'robot'.*customer, agent, engine, operator"):
        NewEvent(EventKind.USER_MESSAGE, "user", {"content": "x"}, origin="robot")  # type: ignore[arg-type]
    path = tmp_path / "origin.db"
    store = Store(f"sqlite:///{path}")
    sid = store.events.create_session()
    store.close()
    with sqlite3.connect(path) as conn, pytest.raises(sqlite3.IntegrityError, match="origin"):
        conn.execute("INSERT INTO events (session_id, seq, kind, role, origin, body, body_sha256, created_at) "
                     "VALUES (?, 1, 'user/message', 'user', 'robot', '{}', '', '2026-01-01')", (sid,))


def test_append_to_a_missing_session_raises_not_found(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'nf.db'}")
    try:
        with pytest.raises(NotFound):
            store.events.append(42, [_msg("x")])
        with pytest.raises(NotFound):
            store.events.create_session(parent_id=42, fork_seq=1)
    finally:
        store.close()


def test_fork_surface_is_parent_through_fork_seq_then_own_events_without_copying(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'fork.db'}")
    try:
        log = store.events
        root = log.create_session()
        log.append(root, [_msg("u1"), _msg("a1", "assistant"), _msg("u2"), _msg("a2", "assistant")])
        child = log.create_session(parent_id=root, fork_seq=2)
        log.append(child, [_msg("u2-alt")])
        grandchild = log.create_session(parent_id=child, fork_seq=1)
        log.append(grandchild, [_msg("a2-alt", "assistant")])
        assert [e.content for e in log.surface_events(child)] == ["u1", "a1", "u2-alt"]
        assert [e.content for e in log.surface_events(grandchild)] == ["u1", "a1", "u2-alt", "a2-alt"]
        assert [(e.session_id, e.seq) for e in log.surface_events(grandchild)] == [(root, 1), (root, 2), (child, 1),
                                                                                   (grandchild, 1)]
        # The fork's own seq starts at 1; the parent's rows were not copied.
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM events")).scalar() == 6
        # The parent's later events stay out of the fork.
        log.append(root, [_msg("u3")])
        assert "u3" not in [e.content for e in log.surface_events(child)]
    finally:
        store.close()


def test_a_surface_read_again_after_appends_adds_only_the_new_events_and_keeps_the_rest(tmp_path: Path) -> None:
    # Append-only log: once read, a surface is extended by the session's own later events; the
    # ancestors' events past the fork never join it, another process's appends do.
    store = Store(f"sqlite:///{tmp_path / 'grow.db'}")
    other = Store(f"sqlite:///{tmp_path / 'grow.db'}")
    try:
        log = store.events
        root = log.create_session()
        log.append(root, [_msg("u1"), _msg("a1", "assistant"), _msg("u2")])
        child = log.create_session(parent_id=root, fork_seq=2)
        log.append(child, [_msg("u2-alt")])
        first = log.surface_snapshot(child)
        assert [e.content for e in first] == ["u1", "a1", "u2-alt"]
        log.append(root, [_msg("a2", "assistant")])  # the parent goes on past the fork
        log.append(child, [_msg("a2-alt", "assistant")])
        other.events.append(child, [_msg("u3-alt")])  # another process writes to the chat
        second = log.surface_snapshot(child)
        assert [(e.session_id, e.seq, e.content) for e in second] == [
            (root, 1, "u1"), (root, 2, "a1"), (child, 1, "u2-alt"), (child, 2, "a2-alt"), (child, 3, "u3-alt")]
        assert all(a is b for a, b in zip(first, second, strict=False))  # the events read before, not decoded again
        fresh = Store(f"sqlite:///{tmp_path / 'grow.db'}")
        try:
            assert [(e.ref, e.body_sha256) for e in fresh.events.surface_events(child)] == [
                (e.ref, e.body_sha256) for e in second]
        finally:
            fresh.close()
    finally:
        other.close()
        store.close()


def test_origin_is_stored_only_when_declared(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'o.db'}")
    try:
        sid = store.events.create_session()
        store.events.append(sid, [NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant", {"content": "hi"}, Origin.ENGINE,
                                           "opening"),
                                  _msg("me")])
        with store.engine.connect() as conn:
            origins = conn.execute(text("SELECT origin FROM events ORDER BY seq")).scalars().all()
        assert origins == ["engine", None]
    finally:
        store.close()


def test_the_migration_creates_exactly_what_the_models_declare(tmp_path: Path) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from tavern_tui.store.models import Base
    from tavern_tui.store.search import is_search_index

    def declared(obj: object, name: str | None, type_: str, reflected: bool, compare_to: object) -> bool:
        return not is_search_index(name)  # the FTS5 search table is the migration's own (no model)

    store = Store(f"sqlite:///{tmp_path / 'diff.db'}")
    try:
        with store.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"include_object": declared}),
                                    Base.metadata)
    finally:
        store.close()
    assert diff == []


def test_the_portable_append_path_gives_the_same_events_as_the_sqlite_fast_path(tmp_path: Path) -> None:
    # Other databases (PostgreSQL by URL) take the SQLAlchemy Core path; run it here on SQLite.
    fast = Store(f"sqlite:///{tmp_path / 'fast.db'}")
    portable = Store(f"sqlite:///{tmp_path / 'portable.db'}")
    portable.events._sqlite = False  # noqa: SLF001 - choose the Core path on purpose
    try:
        results = []
        for store in (fast, portable):
            sid = store.events.create_session()
            store.events.append(sid, [_msg("a"), _msg("b", "assistant")])
            store.events.append(sid, [NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant", {"content": "c"},
                                               Origin.ENGINE, "opening")])
            with pytest.raises(NotFound):
                store.events.append(sid + 100, [_msg("x")])
            results.append([(e.seq, e.kind, e.role, e.origin, e.source, e.body_text, e.body_sha256,
                             e.created_at.tzinfo is not None)
                            for e in store.events.surface_events(sid)])
        assert results[0] == results[1]
        assert [r[0] for r in results[1]] == [1, 2, 3]
    finally:
        fast.close()
        portable.close()


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file:scratch?mode=memory&uri=true"])
def test_an_in_memory_url_is_one_database_for_every_thread_and_leaves_nothing_behind(url: str) -> None:
    import gc
    import threading

    store = Store(url)
    folder = Path(store.engine.url.database or "").parent
    assert folder.name.startswith("tavern-memory-") and folder.is_dir()
    sid = store.events.create_session()
    store.events.append(sid, [_msg("from the main thread")])
    seen: list[object] = []

    def worker(shared: Store) -> None:  # the step's log calls and the TUI's workers run in threads
        shared.events.append(sid, [_msg("from a worker")])
        seen.append([e.content for e in shared.events.surface_events(sid)])

    # Passed as an argument, not closed over: the thread drops its args when it ends, so `del store`
    # below leaves no reference behind.
    thread = threading.Thread(target=worker, args=(store,))
    thread.start()
    thread.join()
    assert seen == [["from the main thread", "from a worker"]]
    assert [e.seq for e in store.events.surface_events(sid)] == [1, 2]
    store.close()
    del store
    gc.collect()
    assert not folder.exists()
