"""Provides `StepLeases`: the store's `engine.step.StepClaims` (issue 23 item 4).

Taking a step is one atomic claim: an INSERT into `step_leases`, whose primary key is the
playthrough, inside a write transaction (BEGIN IMMEDIATE on SQLite; on PostgreSQL the
primary key's unique index makes the second of two concurrent inserts wait for the first and
then fail). The row names its owner: pid, host, the process's start time and a heartbeat. A
claimer that finds a row takes it over at once when its owner is provably gone (same host,
pid not running, or running but started at another time, i.e. a reused pid, or a zombie), or
when an owner on another host has not beaten for `stale_after` seconds; otherwise the step is
busy (`StepBusy`). So after a kill the next command recovers the reply at once, not after a
timeout.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from tavern_tui.engine.step import Claim, StepBusy
from tavern_tui.store.models import SessionRow, StepLeaseRow

LEASES = StepLeaseRow.__table__
SESSIONS = SessionRow.__table__

_HOST = socket.gethostname()[:255]
_LIVE: set[str] = set()
"""Tokens this process holds right now: a row naming this pid with a token not here was left
by a step of this process that ended without releasing it (it cannot be streaming)."""
_LIVE_LOCK = threading.Lock()


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state letter, start time in clock ticks) from /proc/<pid>/stat; None when unreadable
    (no such process, or no /proc on this system)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = raw[raw.rfind(")") + 2:].split()
    return (fields[0], fields[19]) if len(fields) > 19 else None


def process_started(pid: int) -> str:
    """The start time of process `pid` as /proc gives it ("" when unknown)."""
    stat = _proc_stat(pid)
    return stat[1] if stat else ""


_OWN_START = process_started(os.getpid())


def owner_gone(pid: int, host: str, started: str) -> str | None:
    """Why a lease owner on this host is certainly gone, or None when it may still run (or
    runs on another host, which only its heartbeat can tell).

    Returns:
        A short reason: "its process ended", "its process id was reused", "…".
    """
    if host != _HOST:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "its process ended"
    except PermissionError:
        pass  # another user's live process
    stat = _proc_stat(pid)
    if stat is not None:
        state, start = stat
        if state in ("Z", "X"):
            return "its process ended"
        if started and start != started:
            return "its process id was reused by another program"
    return None


def _busy(row: Any) -> StepBusy:
    """The refusal of a step whose lease `row` a live owner holds, naming the owner."""
    where = "this window" if row.pid == os.getpid() and row.host == _HOST else f"process {row.pid} on {row.host}"
    return StepBusy(f"a reply is being written in this playthrough ({where}); wait for it or stop it there")


class StepLeases:
    """Step ownership in the database (`engine.step.StepClaims`).

    Args:
        engine: reads (deferred transactions).
        write_engine: writes (`BEGIN IMMEDIATE` on SQLite).
    """

    def __init__(self, engine: Engine, write_engine: Engine) -> None:
        self._engine = engine
        self._write = write_engine

    def scope(self, session_id: int) -> str:
        """The lease key of a session: its playthrough ("p<id>"), else the session ("s<id>")."""
        with self._engine.connect() as conn:
            playthrough = conn.execute(select(SESSIONS.c.playthrough_id).where(SESSIONS.c.id == session_id)).scalar()
        return f"p{playthrough}" if playthrough is not None else f"s{session_id}"

    def _why_stale(self, row, stale_after: float, now: datetime) -> str | None:  # type: ignore[no-untyped-def]
        if row.pid == os.getpid() and row.host == _HOST:
            with _LIVE_LOCK:
                live = row.token in _LIVE
            return None if live else "the step ended without settling"
        gone = owner_gone(row.pid, row.host, row.started)
        if gone is not None:
            return gone
        beat = row.heartbeat_at if row.heartbeat_at.tzinfo else row.heartbeat_at.replace(tzinfo=UTC)
        if row.host != _HOST and (now - beat).total_seconds() >= stale_after:
            return f"its owner on {row.host} stopped answering"
        return None

    def claim(self, session_id: int, stale_after: float) -> Claim:
        """Take the step of `session_id`'s playthrough for this process.

        Returns:
            The claim; `displaced` says why a previous owner lost it (None: there was none).

        Raises:
            StepBusy: a live owner holds it (nothing is written).
        """
        scope = self.scope(session_id)
        token = uuid.uuid4().hex
        now = datetime.now(UTC)
        values = {"scope": scope, "session_id": session_id, "token": token, "pid": os.getpid(), "host": _HOST,
                  "started": _OWN_START, "claimed_at": now, "heartbeat_at": now}
        displaced: str | None = None
        for _ in range(3):
            try:
                with self._write.begin() as conn:
                    row = conn.execute(select(LEASES).where(LEASES.c.scope == scope)).first()
                    if row is not None:
                        displaced = self._why_stale(row, stale_after, now)
                        if displaced is None:
                            raise _busy(row)
                        # Conditional on the old token: two claimers displacing one dead owner
                        # cannot both win (the second deletes nothing and its insert collides).
                        conn.execute(delete(LEASES).where(LEASES.c.scope == scope, LEASES.c.token == row.token))
                    conn.execute(insert(LEASES).values(**values))
            except IntegrityError:
                continue  # another claimer inserted first (PostgreSQL): look at its row again
            with _LIVE_LOCK:
                _LIVE.add(token)
            return Claim(token, displaced)
        raise StepBusy("a reply is being started in this playthrough by another tavern window or command; "
                       "wait for it or stop it there")

    def held(self, session_id: int, stale_after: float) -> bool:
        """Does a live owner hold the step of `session_id`'s playthrough now? (A row whose owner
        is not provably gone nor, on another host, silent for `stale_after` s: what `claim` would
        refuse as busy.) A read; nothing is written."""
        return self._live_row(session_id, stale_after) is not None

    def refuse_if_held(self, session_id: int, stale_after: float) -> None:
        """Refuse as `claim` would when a live owner holds the step (`held`): a step about to be
        prepared learns it before building anything. A read; nothing is written.

        Raises:
            StepBusy: a live owner holds it, named as `claim` names it.
        """
        row = self._live_row(session_id, stale_after)
        if row is not None:
            raise _busy(row)

    def _live_row(self, session_id: int, stale_after: float) -> Any:
        scope = self.scope(session_id)
        with self._engine.connect() as conn:
            row = conn.execute(select(LEASES).where(LEASES.c.scope == scope)).first()
        return row if row is not None and self._why_stale(row, stale_after, datetime.now(UTC)) is None else None

    def heartbeat(self, token: str) -> None:
        """Mark the claim alive now (for claimers on other hosts)."""
        with self._write.begin() as conn:
            conn.execute(update(LEASES).where(LEASES.c.token == token).values(heartbeat_at=datetime.now(UTC)))

    def release(self, token: str) -> None:
        """Give the claim back (a no-op when it was already taken over)."""
        try:
            with self._write.begin() as conn:
                conn.execute(delete(LEASES).where(LEASES.c.token == token))
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(token)
