"""A database that cannot be used says why when it is opened, naming it, and changes nothing:
a file that is not a SQLite database, a read-only file, a PostgreSQL URL without its driver."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tavern_tui.errors import StoreError
from tavern_tui.store import db
from tavern_tui.store.store import Store


def test_a_file_that_is_not_a_database_is_named_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "tavern.sqlite3"
    junk = bytes(range(256)) * 32  # 8 KB that is no SQLite header
    path.write_bytes(junk)
    with pytest.raises(StoreError, match=r"cannot open the database sqlite:///.*: file is not a database"):
        Store(f"sqlite:///{path}")
    assert path.read_bytes() == junk


def test_a_read_only_file_is_refused_at_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tavern.sqlite3"
    Store(f"sqlite:///{path}").close()
    before = path.read_bytes()
    path.chmod(0o444)
    real_access = os.access
    # As an ordinary user sees it (root may write any file, so the check is asked as the user is).
    monkeypatch.setattr(db.os, "access", lambda p, mode: False if Path(p) == path else real_access(p, mode))
    with pytest.raises(StoreError, match=rf"cannot use the database file {path}: it is read-only"):
        Store(f"sqlite:///{path}")
    assert path.read_bytes() == before


def test_a_postgresql_url_without_its_driver_says_how_to_install_it() -> None:
    with pytest.raises(StoreError, match=r"its database driver is not installed .*pip install -e '\.\[postgres\]'"):
        db.make_engine("postgresql+nosuchdriver://u@localhost/tavern")
