"""Provides `read_lists` and `ListReader`: what `tavern sessions`, `presets` and `trace list` read,
with the standard library's `sqlite3` before SQLAlchemy and the store are imported (as
`first_screen` reads the home screen's list), and the pure parts of the event log's reads that
`EventLog` (`store.event_reads`) shares with it: `make_event`, `walk_chain`, `surface_adjustment`.

It reads only an embedded SQLite file already at the newest schema (`revision.head_revision`),
read-only, in one transaction. It answers None for anything else (another database, a file not
created yet, a schema to migrate, any SQLite error, a row the service would refuse): the caller
then opens the service, as every command does (it creates or migrates the database). The reader's methods
answer what `EventLog`'s methods of the same names answer; only the SQL is written out here.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from tavern_tui.engine.events import Event, EventKind, parse_origin
from tavern_tui.engine.log import COMPOSER_SOURCE, SUMMARY_SOURCE
from tavern_tui.errors import NotFound, TavernError
from tavern_tui.store.first_screen import sqlite_file
from tavern_tui.store.records import PlaythroughRecord
from tavern_tui.store.revision import head_revision
from tavern_tui.store.times import as_utc

T = TypeVar("T")

COUNTED_KINDS = (str(EventKind.USER_MESSAGE), str(EventKind.ASSISTANT_MESSAGE), str(EventKind.ASSISTANT_ATTEMPT))
"""The kinds a message count takes on the index alone (`count_messages`); the system lines shown
in the chat (`system/message` not from `SYSTEM_PROMPT_SOURCE`) are counted beside them."""

SYSTEM_PROMPT_SOURCE = "system-prompt"
"""`source` of the per-step system section: a `system/message` never shown in the chat."""

_EVENT_COLUMNS = "session_id, seq, kind, role, origin, source, body, body_sha256, created_at"
_REFS_PER_STATEMENT = 400  # as `EventLog.events_at`: bounded statements for long traces


def make_event(session_id: int, seq: int, kind: str, role: str | None, origin: str | None, source: str | None,
               body: str, body_sha256: str, created_at: datetime) -> Event:
    """An `events` row as an `Event`: the origin checked, the time in UTC, the body parsed from
    the stored text. Raises OriginError for an origin outside the closed set."""
    return Event(session_id=session_id, seq=seq, kind=kind, role=role, origin=parse_origin(origin), source=source,
                 body_text=body, body_sha256=body_sha256, created_at=as_utc(created_at), body=json.loads(body))


def walk_chain(session_id: int, through_seq: int | None,
               parent_of: Callable[[int], tuple[int | None, int | None]]) -> list[tuple[int, int | None]]:
    """[(session, upto)] from the root down to `session_id` (upto None: all its events), each
    session's (parent, fork seq) from `parent_of`, which raises NotFound for a missing session
    (seed 000 §1.1: a fork is a session pointing at its parent's seq)."""
    chain: list[tuple[int, int | None]] = []
    current: int | None = session_id
    upto = through_seq
    while current is not None:
        parent, fork_seq = parent_of(current)
        chain.append((current, upto))
        current, upto = parent, fork_seq
    chain.reverse()
    return chain


def first_user_line(chain: Sequence[tuple[int, int | None]],
                    fetch: Callable[[str, dict[str, object]], Sequence[object] | None]) -> str | None:
    """The content of the first `user/message` on a surface given as its ancestry chain ([(session,
    upto)] root first), or None: a chat's default title. `fetch(sql, params)` runs one statement
    with named parameters and gives its first row or None (sqlite3's, or SQLAlchemy's `text`)."""
    for session_id, upto in chain:
        bound = "" if upto is None else " AND seq <= :upto"
        row = fetch(f"SELECT body FROM events WHERE session_id = :s AND kind = 'user/message'{bound} "
                    "ORDER BY seq LIMIT 1", {"s": session_id, "upto": upto})
        if row is not None:
            content = json.loads(str(row[0])).get("content")
            return content if isinstance(content, str) else None
    return None


def surface_adjustment(replaced: Iterable[Event]) -> int:
    """What a surface's `surface/replaced` events change in the count of its stored messages: a
    summary shows as one message in place of its targets, an impersonated line that went into
    the composer was never shown, a delete (no replacement) takes its targets off the surface."""
    change = 0
    for event in replaced:
        targets = event.body.get("targets") or []
        if event.source == SUMMARY_SOURCE:
            change += 1 - len(targets)
        elif event.source == COMPOSER_SOURCE:
            change -= 1
        elif event.body.get("message") is None:
            change -= len(targets)
    return change


def _stored_time(text: str) -> datetime:
    return as_utc(datetime.fromisoformat(text))


@dataclass(frozen=True, slots=True)
class PresetRow:
    """An imported preset as `PresetRepository.all` gives it: its normalised data is JSON text."""

    id: int
    name: str
    source_name: str
    data: str
    created_at: datetime


# `PlaythroughRepository.list`: listed once its opening send is admitted, most recently played
# first, then the newest id.
_PLAYTHROUGHS = """
SELECT id, character_id, title, user_name, root_session_id, head_session_id, created_at, updated_at,
       m, preset_id, strategy, archived_at, opening_draft
FROM (SELECT *, coalesce(nullif(meta, ''), '{}') AS m FROM playthroughs)
WHERE opening_draft IS NULL {filters}
ORDER BY updated_at DESC, id DESC
"""

# `PersonaRepository.personas` and `current(principal).name`: "" before a first revision.
_PERSONAS = """
SELECT p.id, p.is_default,
       coalesce((SELECT r.name FROM persona_revisions r WHERE r.principal = p.principal
                 ORDER BY r.version DESC LIMIT 1), '')
FROM personas p WHERE p.principal IS NOT NULL ORDER BY p.id
"""


class ListReader:
    """Reads of one read-only SQLite connection (`read_lists` opens it): the event log's reads
    the lists need, answered as `EventLog` answers them, and the rows of the listed tables."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._lineage: dict[int, tuple[int | None, int | None]] = {}

    def _parent_of(self, session_id: int) -> tuple[int | None, int | None]:
        if session_id not in self._lineage:
            row = self._conn.execute("SELECT parent_id, fork_seq FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise NotFound(f"session {session_id} does not exist")
            self._lineage[session_id] = (row[0], row[1])
        return self._lineage[session_id]

    def chain(self, session_id: int, through_seq: int | None = None) -> list[tuple[int, int | None]]:
        """`EventLog.ancestry` (through `through_seq` when given). Raises NotFound."""
        return walk_chain(session_id, through_seq, self._parent_of)

    @staticmethod
    def _on_surface(chain: Sequence[tuple[int, int | None]]) -> tuple[str, list[object]]:
        parts: list[str] = []
        params: list[object] = []
        for sid, upto in chain:
            parts.append("session_id = ?" if upto is None else "(session_id = ? AND seq <= ?)")
            params += [sid] if upto is None else [sid, upto]
        return "(" + " OR ".join(parts) + ")", params

    def _events(self, where: str, params: Sequence[object], order: str = "") -> list[Event]:
        rows = self._conn.execute(f"SELECT {_EVENT_COLUMNS} FROM events WHERE {where}{order}", params).fetchall()
        return [make_event(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], datetime.fromisoformat(r[8]))
                for r in rows]  # `make_event` gives the time in UTC

    def surface_events_of(self, session_id: int, kinds: Sequence[str]) -> list[Event]:
        """`EventLog.surface_events_of`: the surface's events of these kinds, in surface order."""
        chain = self.chain(session_id)
        order = {sid: index for index, (sid, _) in enumerate(chain)}
        where, params = self._on_surface(chain)
        marks = ", ".join("?" * len(kinds))
        events = self._events(f"{where} AND kind IN ({marks})", [*params, *(str(k) for k in kinds)])
        events.sort(key=lambda e: (order[e.session_id], e.seq))
        return events

    def count_messages(self, session_id: int, replaced: Sequence[Event] | None = None) -> int:
        """`EventLog.count_messages`: the chat messages a session's surface shows."""
        where, params = self._on_surface(self.chain(session_id))
        marks = ", ".join("?" * len(COUNTED_KINDS))
        count = int(self._conn.execute(f"SELECT count(*) FROM events WHERE {where} AND kind IN ({marks})",
                                       [*params, *COUNTED_KINDS]).fetchone()[0])
        count += int(self._conn.execute(f"SELECT count(*) FROM events WHERE {where} AND kind = ? AND source != ?",
                                        [*params, str(EventKind.SYSTEM_MESSAGE), SYSTEM_PROMPT_SOURCE]).fetchone()[0])
        if replaced is None:
            replaced = self.surface_events_of(session_id, [EventKind.SURFACE_REPLACED])
        return count + surface_adjustment(replaced)

    def first_line(self, chain: Sequence[tuple[int, int | None]]) -> str | None:
        """`MessageSearch.first_line`: the content of the first `user/message` on the surface."""
        return first_user_line(chain, lambda sql, params: self._conn.execute(sql, params).fetchone())

    def events_of_kind(self, kinds: Sequence[str], session_ids: Sequence[int] | None = None) -> list[Event]:
        """`EventLog.events_of_kind`: events of some kinds (in some sessions), by session then seq."""
        where = f"kind IN ({', '.join('?' * len(kinds))})"
        params: list[object] = [str(k) for k in kinds]
        if session_ids is not None:
            if not session_ids:
                return []
            where += f" AND session_id IN ({', '.join('?' * len(session_ids))})"
            params += list(session_ids)
        return self._events(where, params, " ORDER BY session_id, seq")

    def events_at(self, refs: Sequence[tuple[int, int]]) -> dict[tuple[int, int], Event]:
        """`EventLog.events_at`: the stored events at these refs (missing ones left out)."""
        found: dict[tuple[int, int], Event] = {}
        for start in range(0, len(refs), _REFS_PER_STATEMENT):
            chunk = refs[start:start + _REFS_PER_STATEMENT]
            where = " OR ".join(["(session_id = ? AND seq = ?)"] * len(chunk))
            for event in self._events(where, [v for ref in chunk for v in ref]):
                found[event.ref] = event
        return found

    def playthroughs(self, *, include_archived: bool, character_id: int | None = None) -> list[PlaythroughRecord]:
        """`PlaythroughRepository.list(character_id, include_archived=...)`: a character's are its
        one-character chats (a group chat is listed under its group)."""
        where = "" if include_archived else "AND archived_at IS NULL"
        params: list[object] = []
        if character_id is not None:
            where += " AND character_id = ? AND group_id IS NULL"
            params.append(character_id)
        return [PlaythroughRecord(r[0], r[1], r[2], r[3], r[4], r[5], _stored_time(r[6]), _stored_time(r[7]), r[8],
                                  r[9], r[10], _stored_time(r[11]) if r[11] is not None else None, r[12])
                for r in self._conn.execute(_PLAYTHROUGHS.replace("{filters}", where), params)]

    def character_named(self, query: str) -> int:
        """`LibraryService.find(query, "characters")`'s id: the character with id `query`, else
        the one with that name, case-insensitively as the repository compares (SQLite's `lower`
        of the name against Python's of the query).

        Raises:
            NotFound: none, or several (the service then says which, as it always does).
        """
        wanted = query.strip()
        if wanted.isdigit() and len(wanted) <= 18:  # a longer "id" is a name (as `find`)
            row = self._conn.execute("SELECT id FROM characters WHERE id = ?", (int(wanted),)).fetchone()
            if row is not None:
                return int(row[0])
        rows = self._conn.execute("SELECT id FROM characters WHERE lower(name) = ?", (wanted.lower(),)).fetchall()
        if len(rows) != 1:
            raise NotFound(f"not one character named {wanted!r}")
        return int(rows[0][0])

    def character_names(self) -> dict[int, str]:
        """{character id: name} of every character, archived ones too."""
        return {int(i): str(n) for i, n in self._conn.execute("SELECT id, name FROM characters")}

    def personas(self) -> list[tuple[int, bool, str]]:
        """(id, is default, the newest revision's name or "") of every persona, oldest first."""
        return [(int(i), bool(d), str(n)) for i, d, n in self._conn.execute(_PERSONAS)]

    def group_names(self) -> dict[int, str]:
        """{playthrough id: its group's name} of the group chats."""
        query = "SELECT p.id, g.name FROM playthroughs p JOIN groups g ON g.id = p.group_id"
        return {int(p): str(n) for p, n in self._conn.execute(query)}

    def presets(self) -> list[PresetRow]:
        """`PresetRepository.all`: every imported preset, by name then id."""
        query = "SELECT id, name, source_name, data, created_at FROM presets ORDER BY name, id"
        return [PresetRow(r[0], r[1], r[2], r[3], _stored_time(r[4])) for r in self._conn.execute(query)]

    def playthrough_sessions(self, playthrough_id: int) -> list[int]:
        """The ids of a playthrough's own sessions, ascending (`EventLog.playthrough_sessions`
        less the ancestors of its root another playthrough owns). Raises NotFound."""
        row = self._conn.execute("SELECT root_session_id FROM playthroughs WHERE id = ?", (playthrough_id,)).fetchone()
        if row is None:
            raise NotFound(f"no playthrough with id {playthrough_id}")
        self.chain(int(row[0]))
        query = "SELECT id FROM sessions WHERE playthrough_id = ? ORDER BY id"
        return [int(i) for (i,) in self._conn.execute(query, (playthrough_id,))]


def read_lists(url: str, read: Callable[[ListReader], T]) -> T | None:
    """`read(reader)` on the database at `url` in one read-only transaction, or None when it
    cannot be read this way (see the module text), including when `read` raises a TavernError
    (the service then raises it, or reads what this path does not). Never writes."""
    path = sqlite_file(url)
    if path is None or not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        conn.execute("BEGIN")  # one snapshot for all of a list's reads
        versions = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        if [v for (v,) in versions] != [head_revision()]:
            return None
        return read(ListReader(conn))
    except (sqlite3.Error, TavernError, ValueError, LookupError, TypeError):
        return None  # the service reads it, or says what is wrong as it always does
    finally:
        conn.close()
