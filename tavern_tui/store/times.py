"""Provides `as_utc`: a stored time read back as UTC, for the store's repositories and for
`first_screen`'s sqlite3 read (a module without SQLAlchemy, so the latter loads none)."""

from __future__ import annotations

from datetime import UTC, datetime


def as_utc(value: datetime) -> datetime:
    """A stored time read back, UTC-aware: every time is stored in UTC, but SQLite hands it back
    naive and PostgreSQL (timestamptz) in the session's TimeZone, which need not be UTC."""
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
