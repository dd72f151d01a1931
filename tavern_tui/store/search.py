"""Provides `MessageSearch`: full-text search over every message and edit in the event log
(issue 20 item 4). The index is the database's own, kept in step with the log by it (migration
0011): SQLite's FTS5 table `message_search` filled by a trigger on `events`, or on PostgreSQL a
GIN index over `to_tsvector('simple', …)` of the same text.

Query rule: every word of the text must occur, the last one as a prefix (so a word being typed
matches): SQLite FTS5 quoted terms ANDed with `*` on the last; PostgreSQL `to_tsquery('simple',
…)` of the words ANDed with `:*` on the last. Case and
diacritics are ignored on SQLite (`unicode61 remove_diacritics 2`); PostgreSQL's 'simple'
configuration folds case.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from sqlalchemy import Engine, text

from tavern_tui.engine.events import Origin, parse_origin
from tavern_tui.store.list_reads import first_user_line


def is_search_index(name: str | None) -> bool:
    """`name` is part of the search index (the FTS5 table and its shadow tables, or the
    PostgreSQL index), which the migration makes and no model declares (autogenerate skips it)."""
    return bool(name) and (str(name).startswith("message_search") or name == "ix_events_search")


MAX_QUERY = 200
"""Characters of a search text looked at (a pasted page is cut, not sent whole to the index)."""

_WORD = re.compile(r"\w+", re.UNICODE)

_PG_VECTOR = ("to_tsvector('simple', coalesce((body::jsonb)->>'content', "
              "((body::jsonb)->'message')->>'content', ''))")
"""The indexed expression of migration 0011 (a query must name it as it is to use the index)."""
_KINDS = "('user/message', 'assistant/message', 'surface/replaced')"


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One event whose text matched: a message, or an edit (`targets` the messages it replaced)."""

    event_id: int
    session_id: int
    seq: int
    kind: str
    role: str | None
    origin: Origin | None
    text: str
    targets: tuple[tuple[int, int], ...]
    playthrough_id: int | None


def words(query: str) -> list[str]:
    """The words of a search text (letters, digits, underscores), at most `MAX_QUERY` characters read."""
    return _WORD.findall(query[:MAX_QUERY])


class MessageSearch:
    """Searches the index the database keeps (see the module text).

    Args:
        engine: the store's read engine.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def search(self, query: str, *, limit: int = 200) -> list[SearchHit]:
        """Events whose text holds every word of `query`, newest first, at most `limit`.
        [] for a text without words."""
        terms = words(query)
        if not terms:
            return []
        postgres = self._engine.dialect.name == "postgresql"
        if postgres:
            statement = text(
                f"SELECT e.id, e.session_id, e.seq, e.kind, e.role, e.origin, e.body, s.playthrough_id "
                f"FROM events e JOIN sessions s ON s.id = e.session_id "
                f"WHERE e.kind IN {_KINDS} AND {_PG_VECTOR.replace('(body', '(e.body')} "
                f"@@ to_tsquery('simple', :q) ORDER BY e.id DESC LIMIT :limit")
            # Words only (\w+, so no tsquery operator or quote gets through), ANDed; the last a prefix.
            params: dict[str, object] = {"q": " & ".join([*(f"'{t}'" for t in terms[:-1]), f"'{terms[-1]}':*"]),
                                         "limit": limit}
        else:
            # Each word quoted (no FTS5 operators get through); the last one as a prefix.
            match = " ".join(f'"{t}"' for t in terms[:-1]) + f' "{terms[-1]}"*'
            statement = text(
                "SELECT e.id, e.session_id, e.seq, e.kind, e.role, e.origin, e.body, s.playthrough_id "
                "FROM message_search m JOIN events e ON e.id = m.rowid JOIN sessions s ON s.id = e.session_id "
                "WHERE message_search MATCH :q ORDER BY e.id DESC LIMIT :limit")
            params = {"q": match.strip(), "limit": limit}
        with self._engine.connect() as conn:
            rows = conn.execute(statement, params).all()
        hits = []
        for row in rows:
            body = json.loads(row.body)
            message = body.get("message") if row.kind == "surface/replaced" else body
            content = str((message or {}).get("content") or "") if isinstance(message, dict) else ""
            targets = tuple((int(t[0]), int(t[1])) for t in body.get("targets") or [] if len(t) == 2)
            hits.append(SearchHit(int(row.id), int(row.session_id), int(row.seq), str(row.kind), row.role,
                                  parse_origin(row.origin) if row.origin else None, content, targets,
                                  int(row.playthrough_id) if row.playthrough_id is not None else None))
        return hits

    def first_line(self, chain: list[tuple[int, int | None]]) -> str | None:
        """The content of the first `user/message` on a surface given as its ancestry chain
        (`EventLog.ancestry`: [(session, upto)] root first), or None: a chat's default title."""
        with self._engine.connect() as conn:
            return first_user_line(chain, lambda sql, params: conn.execute(text(sql), params).first())
