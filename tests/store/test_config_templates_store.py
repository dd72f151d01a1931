"""Configuration templates in the store (migration 0016, `store.templates.TemplateRepository`) on
whichever database `blank_db_url` gives (SQLite, or PostgreSQL with TAVERN_TEST_PG_URL): a database
at 0015 upgrades and holds templates; names are unique; save refuses a taken name unless replacing;
delete removes one; going back down to 0015 drops the table."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect
from sqlalchemy.engine import Engine

from tavern_tui.errors import NotFound, TavernError
from tavern_tui.store.db import current_revision, head_revision, make_engine, upgrade
from tavern_tui.store.store import Store


def _downgrade(engine: Engine, revision: str) -> None:
    from alembic import command

    from tavern_tui.store.db import _alembic_config

    config = _alembic_config()  # the one upgrade() uses
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, revision)


def test_a_database_at_0015_upgrades_and_keeps_templates(blank_db_url: str) -> None:
    engine = make_engine(blank_db_url)
    try:
        upgrade(engine, "0015")
        assert "config_templates" not in inspect(engine).get_table_names()
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        assert "config_templates" in inspect(engine).get_table_names()
    finally:
        engine.dispose()

    store = Store(blank_db_url)
    try:
        data = {"strategy": {"name": "preset-roles-first", "version": 1}, "preset_id": 3, "lore": [2, 5],
                "persona_id": 1}
        with store.unit_of_work() as uow:
            saved = uow.templates.save("cozy", data)
            uow.templates.save("warm", {"strategy": {"name": "compat"}})
        assert (saved.name, saved.data) == ("cozy", data)
        with store.unit_of_work() as uow, pytest.raises(TavernError, match="a template named 'cozy' exists"):
            uow.templates.save("cozy", {})
        with store.unit_of_work() as uow:
            replaced = uow.templates.save("cozy", {**data, "lore": []}, replace=True)
        assert replaced.id == saved.id and replaced.data["lore"] == [] and replaced.updated_at >= saved.updated_at
        with store.unit_of_work() as uow:
            uow.templates.delete("warm")
        with store.unit_of_work(write=False) as uow:
            assert [t.name for t in uow.templates.list()] == ["cozy"]
            with pytest.raises(NotFound, match="no configuration template named 'warm'"):
                uow.templates.get("warm")
        with store.unit_of_work() as uow, pytest.raises(NotFound, match="'warm'"):
            uow.templates.delete("warm")
    finally:
        store.close()

    engine = make_engine(blank_db_url)
    try:
        _downgrade(engine, "0015")
        assert "config_templates" not in inspect(engine).get_table_names()
        upgrade(engine)
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()
