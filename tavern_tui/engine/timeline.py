"""Provides the playthrough timeline: a tree of message variants composed from forked sessions.

Rules: seed 000 §1.1 and DESIGN.md "The session log". A playthrough's sessions form a tree
(each fork points at its parent through an inclusive `fork_seq`); every message event is a
*variant*. A variant's parent is the message before it on its session's surface, so swipes
(forks before a reply) become siblings, and a rollback (a fork at an earlier message) makes
the later messages a sibling branch. The timeline is computed from pointers only, (session,
seq) pairs and the session tree; bodies stay in the events. The active head is a session:
the path from the root to that session's last message.

Surface replacements (edits, deletes) never add or remove variants: the originals stay in the
tree, and the replacements visible from the head are reported as an overlay. One exception is a
deleted swipe (SillyTavern's "delete swipe"): a replacement whose body has `swipe_deleted` set
removes its target from the siblings that swipes, counters and exports see, from every head;
the variant itself stays in the tree and the log.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tavern_tui.engine.events import EventKind, Origin

Ref = tuple[int, int]
"""(session_id, seq) of an event."""

SWIPE_DELETED = "swipe_deleted"
"""Body key of a `surface/replaced` that deletes one swipe (its targets leave their siblings)."""

VARIANT_KINDS = frozenset({EventKind.USER_MESSAGE, EventKind.ASSISTANT_MESSAGE, EventKind.ASSISTANT_ATTEMPT,
                           EventKind.SYSTEM_MESSAGE, EventKind.TOOL_RESULT})
"""Kinds that make a message variant (a `system/message` only when it is not the step's system
section)."""


@dataclass(frozen=True, slots=True)
class SessionLink:
    """One session of the tree: its parent and inclusive fork point (both None for a root)."""

    id: int
    parent_id: int | None
    fork_seq: int | None
    playthrough_id: int | None = None


@dataclass(frozen=True, slots=True)
class VariantRow:
    """What the timeline reads of a message event: pointers and labels, the body only on request.

    Attributes:
        order: creation order across sessions (the event's row id); siblings sort by it.
        body: the parsed body, or None when only the shape of the tree was asked for.
    """

    order: int
    session_id: int
    seq: int
    kind: str
    role: str | None
    origin: Origin | None
    source: str | None
    body: dict[str, Any] | None = None

    @property
    def ref(self) -> Ref:
        """(session_id, seq)."""
        return (self.session_id, self.seq)


@dataclass(slots=True)
class Variant:
    """One message variant: where it is, its parent variant, its children (oldest first)."""

    row: VariantRow
    parent: Ref | None
    children: list[Ref] = field(default_factory=list)

    @property
    def ref(self) -> Ref:
        """(session_id, seq) of the event holding it."""
        return self.row.ref


@dataclass(frozen=True, slots=True)
class Replacement:
    """A `surface/replaced` event visible from the head: it obscures `targets`; `message` is the
    replacement body (`{"role", "content", …}`), None for a delete."""

    ref: Ref
    targets: tuple[Ref, ...]
    message: dict[str, Any] | None


class Timeline:
    """The variant tree of one playthrough, with its active head.

    Args:
        sessions: every session of the playthrough, plus the ancestors of its root (a branched
            playthrough starts inside another one's tree).
        rows: message events of those sessions (ancestors' only through their fork bound) and
            `surface/replaced` events; any order.
        head_session: the active session.
        system_source: `source` of the per-step system section, which is not a chat message.

    Raises:
        KeyError: the head or a row's session is not among `sessions`.
    """

    def __init__(self, sessions: Iterable[SessionLink], rows: Iterable[VariantRow], head_session: int,
                 system_source: str = "system-prompt") -> None:
        self.sessions: dict[int, SessionLink] = {s.id: s for s in sessions}
        self.head_session = head_session
        own: dict[int, list[VariantRow]] = {sid: [] for sid in self.sessions}
        replacement_rows: list[VariantRow] = []
        surface_replaced, system_message = str(EventKind.SURFACE_REPLACED), str(EventKind.SYSTEM_MESSAGE)
        for row in rows:
            kind = row.kind
            if kind == surface_replaced:
                replacement_rows.append(row)
            elif kind in VARIANT_KINDS and not (kind == system_message and row.source == system_source):
                own[row.session_id].append(row)
        for listed in own.values():
            listed.sort(key=lambda r: r.seq)
        self._own = own
        self._own_seqs = {sid: [r.seq for r in listed] for sid, listed in own.items()}
        self._end_cache: dict[tuple[int, int | None], Ref | None] = {}
        self.variants: dict[Ref, Variant] = {}
        self.roots: list[Ref] = []
        variants = self.variants
        for sid, listed in own.items():
            link = self.sessions[sid]
            parent = self.end_of(link.parent_id, link.fork_seq) if link.parent_id is not None else None
            for row in listed:
                ref = (sid, row.seq)
                variants[ref] = Variant(row, parent)
                parent = ref
        for variant in sorted(variants.values(), key=lambda v: v.row.order):
            if variant.parent is None:
                self.roots.append((variant.row.session_id, variant.row.seq))
            else:
                variants[variant.parent].children.append((variant.row.session_id, variant.row.seq))
        self._replacement_rows = replacement_rows
        self.deleted: frozenset[Ref] = frozenset(
            (int(t[0]), int(t[1])) for row in replacement_rows if (row.body or {}).get(SWIPE_DELETED)
            for t in (row.body or {}).get("targets", ()))
        self.move_head(head_session)

    def move_head(self, head_session: int) -> None:
        """Make another session the head (after a swipe or jump): recomputes the active path
        and the replacements it shows, not the tree."""
        self.head_session = head_session
        self.path: list[Ref] = self._path_to(self.end_of(head_session, None))
        self.active: frozenset[Ref] = frozenset(self.path)
        self.replacements = self._visible_replacements(self._replacement_rows)

    # -- structure ------------------------------------------------------------------------

    def end_of(self, session_id: int | None, through_seq: int | None) -> Ref | None:
        """The last message variant on a session's surface through `through_seq` (None = all),
        looking into its ancestors when the session holds none; None for an empty surface."""
        if session_id is None:
            return None
        key = (session_id, through_seq)
        if key in self._end_cache:
            return self._end_cache[key]
        seqs = self._own_seqs[session_id]
        index = len(seqs) if through_seq is None else bisect.bisect_right(seqs, through_seq)
        if index:
            found: Ref | None = (session_id, seqs[index - 1])
        else:
            link = self.sessions[session_id]
            found = self.end_of(link.parent_id, link.fork_seq) if link.parent_id is not None else None
        self._end_cache[key] = found
        return found

    def _path_to(self, ref: Ref | None) -> list[Ref]:
        path: list[Ref] = []
        while ref is not None:
            path.append(ref)
            ref = self.variants[ref].parent
        path.reverse()
        return path

    def path_to(self, ref: Ref) -> list[Ref]:
        """Variants from a root down to `ref` (inclusive). Raises KeyError for an unknown ref."""
        if ref not in self.variants:
            raise KeyError(ref)
        return self._path_to(ref)

    def siblings(self, ref: Ref) -> list[Ref]:
        """`ref` and its siblings (the variants with the same parent), oldest first; deleted
        swipes left out (but `ref` itself is always listed)."""
        parent = self.variants[ref].parent
        listed = self.roots if parent is None else self.variants[parent].children
        return [r for r in listed if r == ref or r not in self.deleted]

    def position(self, ref: Ref) -> tuple[int, int]:
        """(n, m): `ref` is the n-th (1-based) of m siblings: the swipe counter."""
        siblings = self.siblings(ref)
        return siblings.index(ref) + 1, len(siblings)

    @property
    def last(self) -> Ref | None:
        """The last variant of the active path (the message swipes act on)."""
        return self.path[-1] if self.path else None

    def latest_leaf(self, ref: Ref) -> Ref:
        """Follow the newest child down from `ref` to a variant with no children."""
        while self.variants[ref].children:
            ref = self.variants[ref].children[-1]
        return ref

    def session_for(self, ref: Ref, members: Sequence[int] | None = None) -> int:
        """The session to make the head so that the chat shows `ref`: the current head when
        `ref` is on the active path, else a session ending at `ref`'s newest continuation.

        Args:
            members: sessions that may become the head (the playthrough's own); default all.
        """
        if ref in self.active:
            return self.head_session
        leaf = self.latest_leaf(ref)
        allowed = set(self.sessions if members is None else members)
        if leaf[0] in allowed:
            return leaf[0]
        ending = [sid for sid in allowed if self.end_of(sid, None) == leaf]
        if not ending:
            raise KeyError(f"no session of this playthrough shows {leaf}")
        return max(ending)

    def newest_replacement(self, ref: Ref) -> Replacement | None:
        """The replacement the head shows for `ref`, following edits of edits; None when the
        head shows it unreplaced (a delete is returned as is: it has no later edit)."""
        found = self.replacements.get(ref)
        hops = 0
        while found is not None and found.message is not None and found.ref in self.replacements and hops < 10_000:
            found, hops = self.replacements[found.ref], hops + 1
        return found

    def _visible_replacements(self, rows: list[VariantRow]) -> dict[Ref, Replacement]:
        """target ref → the newest replacement of it on the head's surface."""
        bounds: dict[int, int | None] = {}
        current: int | None = self.head_session
        upto: int | None = None
        while current is not None:
            bounds[current] = upto
            link = self.sessions[current]
            current, upto = link.parent_id, link.fork_seq
        visible = sorted((r for r in rows if r.session_id in bounds
                          and (bounds[r.session_id] is None or r.seq <= bounds[r.session_id])),  # type: ignore[operator]
                         key=lambda r: r.order)
        result: dict[Ref, Replacement] = {}
        for row in visible:
            body = row.body or {}
            targets = tuple((int(t[0]), int(t[1])) for t in body.get("targets", ()))
            message = body.get("message")
            replacement = Replacement(row.ref, targets, message if isinstance(message, dict) else None)
            for target in targets:
                result[target] = replacement
        return result
