"""Migration 0017 (groups) on whichever database `blank_db_url` gives: a database at 0016 with a
playthrough upgrades with the playthrough kept and playing no group; a group stored after it is
read back by the repository; going back down drops the table and the column and keeps the
playthrough."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import inspect as sa_inspect
from sqlalchemy import text
from sqlalchemy.engine import Engine

from tavern_tui.store.db import current_revision, head_revision, make_engine, upgrade
from tavern_tui.store.groups import GroupMemberRecord, GroupRecord
from tavern_tui.store.store import Store
from tests.store.test_preset_binding_migration import _downgrade


def _playthrough(engine: Engine) -> tuple[int, int]:
    """A character and a playthrough of it, written as raw rows (the models are at head)."""
    now = datetime.now(UTC)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO characters (name, spec, spec_version, source_name, original, "
                          "original_sha256, data, created_at) VALUES ('Seraphina', 'chara_card_v2', '2.0', "
                          "'s.png', :raw, :sha, '{}', :at)"), {"raw": b"x", "sha": "0" * 64, "at": now})
        character = int(conn.execute(text("SELECT max(id) FROM characters")).scalar_one())
        conn.execute(text("INSERT INTO sessions (created_at) VALUES (:at)"), {"at": now})
        session = int(conn.execute(text("SELECT max(id) FROM sessions")).scalar_one())
        conn.execute(text("INSERT INTO playthroughs (character_id, title, user_name, root_session_id, "
                          "head_session_id, meta, created_at, updated_at) "
                          "VALUES (:c, '', 'Ann', :s, :s, '{}', :at, :at)"),
                     {"c": character, "s": session, "at": now})
        return character, int(conn.execute(text("SELECT max(id) FROM playthroughs")).scalar_one())


def test_groups_upgrade_from_0016_and_back(blank_db_url: str) -> None:
    engine = make_engine(blank_db_url)
    try:
        upgrade(engine, "0016")
        character, playthrough = _playthrough(engine)
        upgrade(engine)
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()

    store = Store(blank_db_url)
    try:
        with store.unit_of_work() as uow:
            assert uow.groups.group_of(playthrough) is None
            group = uow.groups.add(GroupRecord(0, "Glade", (GroupMemberRecord(character, muted=True),), strategy=3))
            uow.groups.attach(playthrough, group.id)
        with store.unit_of_work(write=False) as uow:
            assert uow.groups.group_of(playthrough) == group.id and uow.groups.playthroughs(group.id) == [playthrough]
            assert uow.groups.get(group.id).members == (GroupMemberRecord(character, True),)
            assert uow.groups.get(group.id).strategy == 3
    finally:
        store.close()

    engine = make_engine(blank_db_url)
    try:
        _downgrade(engine, "0016")
        inspector = sa_inspect(engine)
        assert "groups" not in inspector.get_table_names()
        assert "group_id" not in {c["name"] for c in inspector.get_columns("playthroughs")}
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM playthroughs")).scalar_one() == 1
    finally:
        engine.dispose()
