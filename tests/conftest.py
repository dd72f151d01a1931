"""Fixtures for every test: an isolated profile, the shared corpus, and a service on a temp DB."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.providers.demo import DemoProvider
from tavern_tui.service import Tavern
from tests.support.loopback import LoopbackServer

# The corpus sits beside the repository: <parent>/shared/corpus (SOURCES.md lists the files);
# TAVERN_TEST_CORPUS points elsewhere (a clone in another folder).
# A CI environment that sets PYTHONDONTWRITEBYTECODE makes every `python -m tavern_tui` the tests
# start (the kill, lock, signal and CLI process tests) compile the package from source again, about
# 0.4 s of CPU each: the suite's processes keep bytecode caches (the git-ignored __pycache__).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

CORPUS_DIR = Path(os.environ.get("TAVERN_TEST_CORPUS")
                  or Path(__file__).resolve().parents[1].parent / "shared" / "corpus")

ENV_PREFIX = "TAVERN_"
"""Every variable the package reads starts with it (settings, paths, the persona API)."""

HARNESS_ENV = frozenset({"TAVERN_TEST_CORPUS", "TAVERN_TEST_PG_URL"})
"""`TAVERN_*` variables the test harness itself reads (the corpus folder, the PostgreSQL
server for `db_url`); the package never does, so they survive the clearing."""


@pytest.fixture(autouse=True)
def isolated_profile(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Clear every `TAVERN_*` variable but the harness's own (`HARNESS_ENV`), then point
    TAVERN_HOME at a fresh folder: no test touches a real profile, reaches a real endpoint, or
    changes with the developer's environment."""
    for name in [n for n in os.environ if n.startswith(ENV_PREFIX) and n not in HARNESS_ENV]:
        monkeypatch.delenv(name)
    home = tmp_path_factory.mktemp("tavern-home")
    monkeypatch.setenv("TAVERN_HOME", str(home))
    import keyring
    from keyring.backends import fail

    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())  # never the developer's OS keyring (tests/support/file_keyring.py)
    yield home
    keyring.set_keyring(previous)


def pytest_configure(config: pytest.Config) -> None:
    """Stop at once, in one line, when the corpus is missing (every importer test needs it)."""
    if not (CORPUS_DIR / "cards").is_dir():
        raise pytest.UsageError(f"the test corpus is not at {CORPUS_DIR} (no cards/ folder there): set "
                                "TAVERN_TEST_CORPUS to the shared/corpus folder")


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    """The loopback OpenAI-compatible SSE server (`tests/support/loopback.py`) for one test: scripted
    replies, tool-call deltas, pacing, status codes and a request log, on a port the OS chose."""
    with LoopbackServer() as loopback:
        yield loopback


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """Path of the shared corpus (cards/, worldbooks/, presets/, FACTS.md).

    Fails (never skips) when it is missing: the importer tests are meaningless without it.
    """
    if not (CORPUS_DIR / "cards").is_dir():
        pytest.fail(f"test corpus not found at {CORPUS_DIR} (expected cards/ there; set TAVERN_TEST_CORPUS to "
                    "the shared/corpus folder); see shared/corpus/SOURCES.md", pytrace=False)
    return CORPUS_DIR


PG_URL_ENV = "TAVERN_TEST_PG_URL"
"""Set to a PostgreSQL URL (e.g. `postgresql+psycopg:///postgres`) to run `db_url` tests on PostgreSQL."""


@contextmanager
def fresh_postgres_database(admin_url: str) -> Iterator[str]:
    """Create a uniquely named, empty database on the server `admin_url` reaches, yield its URL
    (the admin URL with only the database name changed), and drop it afterwards (WITH (FORCE):
    a connection the test left open does not keep it alive)."""
    import sqlalchemy as sa

    admin = sa.make_url(admin_url)
    name = f"tavern_test_{uuid.uuid4().hex[:16]}"
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        try:
            yield admin.set(database=name).render_as_string(hide_password=False)
        finally:
            with engine.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        engine.dispose()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one and a half workers per core (3 on 2 cores). A test spends about a third of its
    time waiting (subprocesses, loopback streams, Pilot pauses), so a third worker fills the cores:
    the suite took 525 s with 2 workers and 371 s with 3 on the 2-core machine CI runs on."""
    return max(2, (os.cpu_count() or 2) * 3 // 2)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that takes `db_url` (directly or through `tavern`) `any_database`, so the
    PostgreSQL run selects exactly them: `TAVERN_TEST_PG_URL=… pytest -m any_database`
    (`-k db_url` matches test names, not fixtures, and selects nothing); put the `slow` ones first."""
    for item in items:
        if {"db_url", "blank_db_url"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.any_database)
    # Tests marked `slow` (real processes, seconds of streaming) go first: started last, one of them
    # kept a worker busy long after the others had run out of tests.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def database_templates(tmp_path_factory: pytest.TempPathFactory, corpus_dir: Path) -> dict[str, Path]:
    """SQLite files made once per test process and copied into each test's folder: "empty" (every
    migration applied) and "corpus" (the corpus cards imported into it). Migrating a new file
    takes longer than most tests; a copy of one migrated here is the same database."""
    folder = tmp_path_factory.mktemp("database-templates")
    made: dict[str, Path] = {}
    for name, cards in (("empty", False), ("corpus", True)):
        path = folder / f"{name}.sqlite3"
        service = Tavern(Settings(db_url=f"sqlite:///{path}"))
        try:
            if cards:
                assert all(r.ok for r in service.imports.import_paths([corpus_dir / "cards"]))
        finally:
            service.close()
        with sqlite3.connect(path) as conn:  # everything in the main file, none in a WAL beside it
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        made[name] = path
    return made


def seed_database(template: Path, url: str) -> None:
    """Put a copy of `template` (`database_templates`) at the SQLite file `url` names, private as
    the store makes its files."""
    path = Path(url.removeprefix("sqlite:///"))
    for stale in path.parent.glob(path.name + "*"):
        stale.unlink()
    shutil.copyfile(template, path)
    path.chmod(0o600)


@pytest.fixture
def blank_db_url(tmp_path: Path) -> Iterator[str]:
    """As `db_url`, but no file yet on SQLite: for tests of migrating or creating a database."""
    admin_url = os.environ.get(PG_URL_ENV)
    if not admin_url:
        yield f"sqlite:///{tmp_path / 'blank.sqlite3'}"
        return
    with fresh_postgres_database(admin_url) as url:
        yield url


@pytest.fixture
def db_url(tmp_path: Path, database_templates: dict[str, Path]) -> Iterator[str]:
    """A SQLite URL in the test's temp folder (a copy of the migrated empty database); with
    TAVERN_TEST_PG_URL set, the URL of a fresh PostgreSQL database created for this test and
    dropped after it."""
    admin_url = os.environ.get(PG_URL_ENV)
    if not admin_url:
        url = f"sqlite:///{tmp_path / 'tavern.sqlite3'}"
        seed_database(database_templates["empty"], url)
        yield url
        return
    with fresh_postgres_database(admin_url) as url:
        yield url


class ScriptedModel(DemoProvider):
    """Stands in for a real model: the demo's streaming and `enqueue`, but its replies count as
    a model's (not a placeholder), so they are stored as agent messages and sent back."""

    name = "scripted"
    model = "scripted-1"
    placeholder = False


@pytest.fixture
def model() -> ScriptedModel:
    """An instant scripted model; `model.enqueue("reply")` scripts exact replies."""
    return ScriptedModel(delay=0)


@pytest.fixture
def tavern(db_url: str, model: ScriptedModel) -> Iterator[Tavern]:
    """The service on a temp database with the instant scripted model."""
    service = Tavern(Settings(db_url=db_url), provider=model)
    yield service
    service.close()


@pytest.fixture
def file_keyring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """A file-backed keyring (`tests/support/file_keyring.py`) as the keyring package's backend for one test."""
    import keyring

    from tests.support.file_keyring import FileKeyring

    previous = keyring.get_keyring()
    backend = FileKeyring(tmp_path / "keyring.json")
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)
