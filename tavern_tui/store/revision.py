"""Provides `head_revision`, the newest schema revision shipped with this version, read without
importing SQLAlchemy or Alembic (opening a database at head checks it against one query; the
TUI's first screen checks it before reading the database with the standard library)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from tavern_tui.errors import StoreError

MIGRATIONS = Path(__file__).with_name("migrations")

_REVISION_LINE = re.compile(r"^(down_revision|revision)\s*(?::[^=]*)?=\s*(.+?)\s*$", re.MULTILINE)


@cache
def head_revision() -> str:
    """The newest migration revision shipped with this version: the one no other migration
    names as its `down_revision`. Read from the files' `revision = "..."` lines, as Alembic's
    `ScriptDirectory.get_current_head` would give (tests compare the two), without importing it.

    Raises:
        StoreError: the shipped migrations do not form one chain with one head.
    """
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        found = dict(_REVISION_LINE.findall(path.read_text(encoding="utf-8")))
        if "revision" not in found:
            continue
        revisions.add(found["revision"].strip("\"'"))
        parents.update(re.findall(r"[\"']([^\"']+)[\"']", found.get("down_revision", "")))
    heads = revisions - parents
    if len(heads) != 1:
        raise StoreError(f"the shipped migrations in {MIGRATIONS} have {len(heads)} heads: {sorted(heads)}")
    return heads.pop()
