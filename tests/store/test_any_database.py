"""The store on whichever database the `db_url` fixture gives: SQLite by default, PostgreSQL
when TAVERN_TEST_PG_URL is set (e.g. `postgresql+psycopg:///postgres`).

Everything here is portable SQL on purpose; the SQLite-only settings are tested in test_store.py.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from tavern_tui.engine.events import EventKind, NewEvent, Origin
from tavern_tui.errors import Conflict, NotFound
from tavern_tui.persona.model import PersonaDocument
from tavern_tui.store.db import current_revision, head_revision, make_engine, upgrade
from tavern_tui.store.store import PlannedSession, Store


def _msg(content: str, role: str = "user") -> NewEvent:
    kind = EventKind.USER_MESSAGE if role == "user" else EventKind.ASSISTANT_MESSAGE
    return NewEvent(kind, role, {"content": content})


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = Store(db_url)
    yield opened
    opened.close()


def test_a_fresh_database_is_migrated_to_head_exactly_as_the_models_declare(store: Store) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from tavern_tui.store.models import Base

    assert current_revision(store.engine) == head_revision()
    tables = set(sa_inspect(store.engine).get_table_names())
    assert {"characters", "world_books", "presets", "personas", "sessions", "playthroughs", "events",
            "world_book_bindings", "persona_revisions", "beliefs", "strategies", "alembic_version"} <= tables
    from tavern_tui.store.search import is_search_index

    def declared(obj: object, name: str | None, type_: str, reflected: bool, compare_to: object) -> bool:
        return not is_search_index(name)  # the search index is the migration's own (no model)

    with store.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_object": declared})
        assert compare_metadata(context, Base.metadata) == []
    with store.engine.connect() as conn:  # and the search index is there
        names = set(sa_inspect(conn).get_table_names()) | {i["name"] for i in sa_inspect(conn).get_indexes("events")}
        assert ("message_search" in names) if store.engine.dialect.name == "sqlite" else ("ix_events_search" in names)


@pytest.mark.parametrize("statement", ["UPDATE events SET body = '{}'", "DELETE FROM events"])
def test_the_database_refuses_updates_and_deletes_of_events(store: Store, statement: str) -> None:
    sid = store.events.create_session()
    store.events.append(sid, [_msg("original"), _msg("kept", "assistant")])
    with pytest.raises(DBAPIError, match="append-only"), store.engine.begin() as conn:
        conn.execute(text(statement + " WHERE session_id = :sid"), {"sid": sid})
    # A second engine (no state shared with the store's) sees the events untouched.
    engine = make_engine(store.url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT seq, body FROM events WHERE session_id = :sid ORDER BY seq"),
                                {"sid": sid}).all()
    finally:
        engine.dispose()
    assert [tuple(r) for r in rows] == [(1, '{"content":"original"}'), (2, '{"content":"kept"}')]


def test_an_origin_outside_the_closed_set_is_refused_by_the_database(store: Store) -> None:
    sid = store.events.create_session()
    with pytest.raises(DBAPIError, match="origin"), store.engine.begin() as conn:
        conn.execute(text("INSERT INTO events (session_id, seq, kind, role, origin, body, body_sha256, created_at) "
                          "VALUES (:sid, 1, 'user/message', 'user', 'robot', '{}', '', :at)"),
                     {"sid": sid, "at": datetime.now(UTC)})


def test_seqs_are_gapless_per_session_and_times_come_back_as_stored_in_utc(store: Store) -> None:
    a = store.events.create_session()
    b = store.events.create_session()
    store.events.append(a, [_msg("1"), _msg("2", "assistant")])
    store.events.append(b, [_msg("x")])
    appended = store.events.append(a, [NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant", {"content": "3"},
                                                Origin.ENGINE, "opening")])[0]
    events = store.events.surface_events(a)
    assert [e.seq for e in events] == [1, 2, 3]
    assert [e.seq for e in store.events.surface_events(b)] == [1]
    assert store.events.head_seq(a) == 3 and store.events.head_seq(b) == 1
    read = events[-1]
    assert (read.origin, read.source, read.body_text, read.body_sha256) == (Origin.ENGINE, "opening",
                                                                            appended.body_text, appended.body_sha256)
    assert read.created_at == appended.created_at
    assert read.created_at.utcoffset() == timedelta(0)


def test_missing_sessions_are_not_found_and_forks_share_their_parent_without_copies(store: Store) -> None:
    log = store.events
    with pytest.raises(NotFound):
        log.append(4242, [_msg("x")])
    with pytest.raises(NotFound):
        log.create_session(parent_id=4242, fork_seq=1)
    with pytest.raises(NotFound):
        log.head_seq(4242)
    root = log.create_session()
    log.append(root, [_msg("u1"), _msg("a1", "assistant"), _msg("u2"), _msg("a2", "assistant")])
    child = log.create_session(parent_id=root, fork_seq=2)
    log.append(child, [_msg("u2-alt")])
    grandchild = log.create_session(parent_id=child, fork_seq=1)
    log.append(grandchild, [_msg("a2-alt", "assistant")])
    assert [e.content for e in log.surface_events(grandchild)] == ["u1", "a1", "u2-alt", "a2-alt"]
    tail, complete = log.tail_events(grandchild, 2)
    assert ([e.content for e in tail], complete) == (["u2-alt", "a2-alt"], False)
    tail, complete = log.tail_events(grandchild, 10)
    assert ([e.content for e in tail], complete) == (["u1", "a1", "u2-alt", "a2-alt"], True)
    assert log.count_messages(grandchild) == 4
    assert [r.seq for r in log.variant_rows({root: None, child: 1})] and log.version()[0] == 6
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM events")).scalar() == 6


def test_concurrent_appends_to_one_session_stay_gapless(store: Store) -> None:
    sid = store.events.create_session()
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            for i in range(15):
                store.events.append(sid, [_msg(f"{name}{i}"), _msg(f"{name}{i}'", "assistant")])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in "abcd"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    events = store.events.surface_events(sid)
    assert [e.seq for e in events] == list(range(1, 121))
    for name in "abcd":  # each append's two events are adjacent
        own = [e.seq for e in events if e.content.startswith(name)]
        assert all(own[k + 1] == own[k] + 1 for k in range(0, len(own), 2))


def test_an_imported_playthrough_is_stored_whole_or_not_at_all(store: Store) -> None:
    with store.unit_of_work() as uow:
        character = uow.characters.add(name="Seraphina", spec="chara_card_v2", spec_version="2.0", source_name="s.png",
                                       original=b"\x89PNG\x00\xff", original_sha256="ab" * 32, data="{}")
    record = store.import_playthrough(
        character_id=character.id, user_name="Me", title="t", meta='{"sha256": "beef"}',
        sessions=[PlannedSession("root"), PlannedSession("alt", "root", 1)],
        events=[("root", _msg("hi")), ("root", _msg("hello", "assistant")), ("alt", _msg("other", "assistant"))],
        head="alt")
    assert [e.content for e in store.events.surface_events(record.head_session_id)] == ["hi", "other"]
    with pytest.raises(KeyError):
        store.import_playthrough(character_id=character.id, user_name="Me", title="broken", meta="{}",
                                 sessions=[PlannedSession("root")], events=[("nowhere", _msg("x"))], head="root")
    with store.unit_of_work() as uow:
        assert [p.title for p in uow.playthroughs.list()] == ["t"]
        assert uow.playthroughs.by_source_digest("beef").id == record.id
        assert uow.characters.original(character.id) == b"\x89PNG\x00\xff"
        assert [c.id for c in uow.characters.by_name("SERAPHINA")] == [character.id]
        assert uow.characters.get(character.id).created_at.utcoffset() == timedelta(0)


def test_booleans_and_optimistic_versions_behave_alike(store: Store) -> None:
    with store.unit_of_work() as uow:
        bid = uow.beliefs.add("me", statement="I sail.", key="sail", slot="hobby", kind="direct", category="hobby",
                              confidence=0.5, sensitivity="normal", durable=True)
        uow.beliefs.set(bid, nominated=True)
    with store.unit_of_work() as uow:
        nominated = uow.beliefs.nominated("me")
        assert [(b.id, b.durable, b.nominated, b.promoted) for b in nominated] == [(bid, True, True, False)]
        uow.personas.write(PersonaDocument("me", 1, "Me"), expected_version=0)
    with pytest.raises(Conflict), store.unit_of_work() as uow:
        uow.personas.write(PersonaDocument("me", 1, "Again"), expected_version=0)
    with store.unit_of_work() as uow:
        assert uow.personas.current("me").name == "Me"


def test_migrations_run_up_down_and_up_again_and_upgrade_keeps_old_events(blank_db_url: str) -> None:
    from alembic import command

    from tavern_tui.store.db import _alembic_config

    engine = make_engine(blank_db_url)
    try:
        upgrade(engine)
        config = _alembic_config()  # the one upgrade() uses
        with engine.begin() as conn:  # every downgrade runs, the append-only guard included
            config.attributes["connection"] = conn
            command.downgrade(config, "base")
        assert set(sa_inspect(engine).get_table_names()) <= {"alembic_version"}
        upgrade(engine, "0001")  # the guard can be created again: the downgrade removed all of it
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO sessions (created_at) VALUES (:at)"), {"at": datetime.now(UTC)})
            sid = conn.execute(text("SELECT max(id) FROM sessions")).scalar_one()
            conn.execute(text("INSERT INTO events (session_id, seq, kind, role, body, body_sha256, created_at) "
                              "VALUES (:sid, 1, 'user/message', 'user', '{\"content\":\"old\"}', 'x', :at)"),
                         {"sid": sid, "at": datetime.now(UTC)})
        with pytest.raises(DBAPIError, match="append-only"), engine.begin() as conn:
            conn.execute(text("DELETE FROM events"))
        upgrade(engine)
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()
    store = Store(blank_db_url)
    try:
        assert [e.content for e in store.events.surface_events(sid)] == ["old"]
        assert store.events.append(sid, [_msg("new")])[0].seq == 2
        assert store.events.playthrough_of(sid) is None
    finally:
        store.close()


def test_processes_opening_a_new_database_at_once_migrate_it_once(blank_db_url: str) -> None:
    code = "import sys\nfrom tavern_tui.store.store import Store\nStore(sys.argv[1]).close()\n"
    processes = [subprocess.Popen([sys.executable, "-c", code, blank_db_url], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = []
    for process in processes:
        try:
            _, err = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
        results.append((process.returncode, err.strip().splitlines()[-1:]))
    assert results == [(0, [])] * 4
    engine = make_engine(blank_db_url)
    try:
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()


def test_a_save_racing_an_uncommitted_save_of_the_same_version_is_a_conflict(store: Store) -> None:
    from tavern_tui.assembly.strategies import SLOTS_FIRST, StrategySpec, check_options

    spec = StrategySpec("mine", 1, SLOTS_FIRST, check_options(SLOTS_FIRST, {}))
    outcome: list[object] = []

    def rival() -> None:
        try:
            with store.unit_of_work() as uow:
                uow.strategies.add(spec, 0)
            outcome.append("saved")
        except BaseException as exc:  # noqa: BLE001 - checked below
            outcome.append(exc)

    with store.unit_of_work() as uow:
        uow.strategies.add(spec, 0)  # inserted, not committed yet
        thread = threading.Thread(target=rival)
        thread.start()
        # SQLite: the rival waits at BEGIN IMMEDIATE. PostgreSQL: it reads version 0 too, then
        # waits on the unique index, and fails once this commits.
        thread.join(timeout=0.5)
    thread.join()
    assert len(outcome) == 1 and isinstance(outcome[0], Conflict), outcome
    with store.unit_of_work() as uow:
        assert [(s.name, s.version) for s in uow.strategies.latest()] == [("mine", 1)]


@pytest.mark.parametrize("table", ["persona_revisions", "strategies"])
@pytest.mark.parametrize("verb", ["UPDATE", "DELETE"])
def test_persona_revisions_and_strategy_versions_are_append_only_too(store: Store, table: str, verb: str) -> None:
    # Migration 0007: the persona's history (ADR-0079) and the strategy versions a trace names.
    from tavern_tui.assembly.strategies import SLOTS_FIRST, StrategySpec

    with store.unit_of_work() as uow:
        uow.personas.write(PersonaDocument("me", 1, "Me"), expected_version=0)
        uow.strategies.add(StrategySpec("lean", 1, SLOTS_FIRST, {"examples": "omit"}), expected_version=0)
    statement = {"UPDATE": {"persona_revisions": "UPDATE persona_revisions SET version = 9",
                            "strategies": "UPDATE strategies SET version = 9"},
                 "DELETE": {"persona_revisions": "DELETE FROM persona_revisions",
                            "strategies": "DELETE FROM strategies"}}[verb][table]
    with pytest.raises(DBAPIError, match=f"{table} is append-only: {verb} refused"), store.engine.begin() as conn:
        conn.execute(text(statement))
    with store.engine.connect() as conn:
        assert conn.execute(text(f"SELECT version FROM {table}")).scalars().all() == [1]


@pytest.mark.parametrize("table", ["events", "persona_revisions", "strategies"])
def test_postgresql_refuses_a_truncate_of_an_append_only_table(store: Store, table: str) -> None:
    if store.engine.dialect.name != "postgresql":
        # SQLite has no TRUNCATE (its "DELETE FROM t" is the row-by-row delete the triggers refuse).
        with pytest.raises(DBAPIError), store.engine.begin() as conn:
            conn.execute(text(f"TRUNCATE {table}"))
        return
    sid = store.events.create_session()
    store.events.append(sid, [_msg("kept")])
    with pytest.raises(DBAPIError, match=f"{table} is append-only: TRUNCATE refused"), store.engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {table} CASCADE"))
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM events WHERE session_id = :sid"), {"sid": sid}).scalar() == 1
