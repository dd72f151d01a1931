"""Provides engine creation (SQLite PRAGMAs on connect) and migrate-on-open with Alembic.

Alembic is imported only when the schema is behind: opening a database at head costs one
`SELECT version_num FROM alembic_version` and a scan of the shipped migration files' headers
(issue 22: Alembic was ~0.1 s of every start).
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DatabaseError, NoSuchModuleError

from tavern_tui.errors import StoreBusy, StoreError
from tavern_tui.store.revision import MIGRATIONS, head_revision

if TYPE_CHECKING:
    from alembic.config import Config

logger = logging.getLogger(__name__)

_MIGRATION_LOCK = 0x7461_7665_726E  # "tavern": the PostgreSQL advisory lock key migrations take


def _sqlite_on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    # Autocommit at the driver level so our "begin" hook controls transactions (BEGIN IMMEDIATE).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    mode = cursor.execute("PRAGMA journal_mode=WAL").fetchone()
    if mode and str(mode[0]).lower() == "wal":
        cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_on_begin(conn) -> None:  # type: ignore[no-untyped-def]
    # A write transaction takes the write lock at BEGIN (IMMEDIATE), so a read-then-write inside
    # it cannot fail on a snapshot another writer made stale; a read is deferred, so it takes no
    # lock at all and WAL gives it a snapshot while a writer works (issue 23 item 2).
    # Straight to the driver: SQLAlchemy's execute path costs more than the BEGIN.
    immediate = conn.get_execution_options().get(WRITE_OPTION, False)
    try:
        conn.connection.driver_connection.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            raise busy_error(exc) from exc
        raise


BUSY_TIMEOUT_MS = 5000
"""How long a SQLite write waits for another process's write lock before it fails
(`PRAGMA busy_timeout`); `busy_error` turns the failure into a clear message."""

WRITE_OPTION = "tavern_write"
"""Execution option that makes a SQLite transaction `BEGIN IMMEDIATE` (`write_engine`)."""


def write_engine(engine: Engine) -> Engine:
    """The same engine (same pool) whose transactions are writes: `BEGIN IMMEDIATE` on SQLite.
    Reads go through `engine` itself (deferred: no lock, a WAL snapshot)."""
    return engine.execution_options(**{WRITE_OPTION: True})


def is_busy(exc: BaseException) -> bool:
    """Whether a database error is SQLite's "database is locked"/"busy" (the busy timeout ran out)."""
    text = str(getattr(exc, "orig", None) or exc).lower()
    return "database is locked" in text or "database is busy" in text or "database table is locked" in text


def busy_error(exc: BaseException) -> StoreBusy:
    """The clear error for a write that waited out the busy timeout."""
    return StoreBusy(f"the database is busy: another tavern window or command has held its write lock for more "
                      f"than {BUSY_TIMEOUT_MS // 1000} s; nothing was changed, try again when it is done")


def _private_file(path: Path) -> None:
    """Create the database's folder (0700) and file (0600) when missing, so chats are private
    from the start (issue 23 item 3); SQLite gives its -wal and -shm files the file's mode.
    Existing folders and files keep their modes (the owner may have chosen them)."""
    folder = path.parent
    if not folder.exists():
        folder.mkdir(parents=True, mode=0o700, exist_ok=True)
        folder.chmod(0o700)  # mkdir's mode is masked by the umask
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        path.chmod(0o600)


def _private_memory(parsed: URL) -> bool:
    """A SQLite URL naming an in-memory database private to one connection (`sqlite://`,
    `:memory:`, or `mode=memory` without a shared cache)."""
    query = parsed.query
    return ((parsed.database or "") in ("", ":memory:")
            or (query.get("mode") == "memory" and query.get("cache") != "shared"))


def make_engine(url: str) -> Engine:
    """Create an engine for `url`; for SQLite, create the folder and turn on WAL and foreign keys.

    Every engine may be used from any thread, each call seeing the one database (the step's
    log calls and the TUI's workers run in threads). A private in-memory SQLite database
    cannot be: SQLAlchemy gives it one connection per thread, so each thread would see its own
    empty database. Such a URL gets a temporary file instead, as short-lived (removed when the
    engine is collected, or at exit), with the same locking as any SQLite file.

    Raises:
        StoreError: the URL cannot be parsed, its driver is not installed, or the SQLite
            folder cannot be created (the message never shows the password).
    """
    try:
        parsed = make_url(url)
    except Exception as exc:  # sqlalchemy raises ArgumentError
        raise StoreError(f"not a database URL: {url!r} ({exc})") from exc
    shown = parsed.render_as_string(hide_password=True)
    try:
        if parsed.get_backend_name() == "sqlite":
            scratch = None
            if _private_memory(parsed):
                scratch = tempfile.mkdtemp(prefix="tavern-memory-")
                query = {k: v for k, v in parsed.query.items() if k not in ("mode", "uri")}
                parsed = parsed.set(database=str(Path(scratch) / "tavern.sqlite3"), query=query)
            database = parsed.database or ""
            if database and database != ":memory:" and not database.startswith("file:"):
                folder = Path(database).expanduser().parent
                try:
                    _private_file(Path(database).expanduser())
                except OSError as exc:
                    raise StoreError(f"cannot create the database folder {folder}: {exc.strerror}") from exc
                if not os.access(Path(database).expanduser(), os.W_OK):
                    # Every open writes (a recovered step, the pinned persona): say so now, not
                    # as an SQL error at the first send.
                    raise StoreError(f"cannot use the database file {Path(database).expanduser()}: it is read-only "
                                     "(check its permissions)")
            engine = create_engine(parsed)
            event.listen(engine, "connect", _sqlite_on_connect)
            event.listen(engine, "begin", _sqlite_on_begin)
            if scratch is not None:
                weakref.finalize(engine, shutil.rmtree, scratch, ignore_errors=True)
            return engine
        return create_engine(parsed, pool_pre_ping=True)
    except (ImportError, NoSuchModuleError) as exc:
        hint = " (install it with `pip install -e '.[postgres]'`)" if parsed.get_backend_name() == "postgresql" else ""
        raise StoreError(f"cannot use {shown}: its database driver is not installed ({exc}){hint}") from exc


def _alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, None for an empty database (no `alembic_version`
    table, or an empty one): one short query.

    Raises:
        OperationalError: the database cannot be opened.
    """
    with engine.connect() as conn:
        exists = conn.dialect.has_table(conn, "alembic_version")
        if not exists:
            return None
        rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return str(rows[0]) if len(rows) == 1 else None


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to `revision` (default the newest); a no-op when already there.

    A fresh database and an old one take the same path (Alembic `upgrade`).

    Raises:
        StoreError: the database cannot be opened, or is newer than this version knows.
    """
    target = head_revision() if revision == "head" else revision
    try:
        current = current_revision(engine)
    except DatabaseError as exc:  # (OperationalError among them; "file is not a database" is not one)
        shown = engine.url.render_as_string(hide_password=True)
        raise StoreError(f"cannot open the database {shown}: {exc.orig}") from exc
    if current == target:
        return
    from alembic import command
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(_alembic_config())
    if current is not None and current not in {rev.revision for rev in script.walk_revisions()}:
        raise StoreError(f"database is at schema revision {current}, "
                         "which this tavern-tui does not know (newer version?)")
    logger.info("migrating database from %s to %s", current, target)
    config = _alembic_config()
    with write_engine(engine).begin() as conn:  # SQLite: the write lock first, so openers queue
        if conn.dialect.name == "postgresql":
            # SQLite's BEGIN IMMEDIATE makes a second process wait, then find the schema at head;
            # on PostgreSQL two first opens would both create the tables. Queue them the same way
            # (Alembic reads the revision again after the lock, so the second migrates nothing).
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
