"""Provides the persona document, its entries, beliefs and the rules that read them.

Rules: seed 002 (ADR-0079) decisions 3, 5, 7, 9, 11 and DESIGN.md "Persona and nominations".
The persona is a versioned, per-principal list of entries; each has provenance (`owner`, or
`affirmed` from a named belief) and a sensitivity. It renders as one system section whose
name is `{{user}}`; an empty persona renders zero bytes. Pure: no database, no network.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from tavern_tui.errors import TavernError

LOCAL_PRINCIPAL = "local"
"""The one principal of a local install: the person using this profile."""

SENSITIVITIES = ("low", "normal", "high")
"""Sensitivity levels, least to most sensitive. A session's ceiling leaves out entries above it."""

DEFAULT_SENSITIVITY = "normal"
DEFAULT_CEILING = "normal"
"""A playthrough's default sensitivity ceiling: `high` entries render only where it is raised."""

PROVENANCES = ("owner", "affirmed")

MAX_ENTRIES = 30
MAX_TOKENS = 2000
"""Persona caps (ADR-0079 decision 9): over either, opening a session fails naming the class."""

PERSONA_CHANGED = "persona_changed"
"""Reason of the rotation a step records when the persona revision differs from the pinned one."""


class PersonaCapExceeded(TavernError):
    """The persona is over a cap; the message names the class ("persona") and the cap.

    Attributes:
        cap: "entries" or "tokens"; limit: the cap; actual: the persona's figure.
    """

    def __init__(self, cap: str, limit: int, actual: int) -> None:
        self.cap, self.limit, self.actual = cap, limit, actual
        unit = "entries" if cap == "entries" else "tokens"
        super().__init__(f"persona over its cap: {actual} {unit}, the cap is {limit} {unit}; "
                         "shorten the persona (tavern persona edit) before opening a session")


def check_sensitivity(value: object, where: str = "sensitivity") -> str:
    """A valid sensitivity name.

    Raises:
        TavernError: any value outside `SENSITIVITIES`; the message names it and the allowed set.
    """
    if isinstance(value, str) and value.strip().lower() in SENSITIVITIES:
        return value.strip().lower()
    raise TavernError(f"{where}: unknown sensitivity {value!r}; allowed: {', '.join(SENSITIVITIES)}")


def within(sensitivity: str, ceiling: str) -> bool:
    """True when `sensitivity` is at or below `ceiling` (both names from `SENSITIVITIES`)."""
    return SENSITIVITIES.index(sensitivity) <= SENSITIVITIES.index(ceiling)


@dataclass(frozen=True, slots=True)
class PersonaEntry:
    """One entry of the persona document.

    Attributes:
        id: stable within the principal's document (kept across revisions).
        text: the entry's text, as the owner wrote or affirmed it (macros like `{{user}}` allowed).
        provenance: "owner" (typed by the person) or "affirmed" (copied from belief `belief_id`).
        sensitivity: one of `SENSITIVITIES`.
        stale: the source belief was superseded; the owner should review the entry (never auto-edited).
    """

    id: int
    text: str
    provenance: str = "owner"
    sensitivity: str = DEFAULT_SENSITIVITY
    belief_id: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    stale: bool = False

    def to_json(self) -> dict[str, Any]:
        """JSON form: id, text, provenance, belief_id, sensitivity, stale, created_at, updated_at."""
        return {"id": self.id, "text": self.text, "provenance": self.provenance, "belief_id": self.belief_id,
                "sensitivity": self.sensitivity, "stale": self.stale,
                "created_at": self.created_at.isoformat() if self.created_at else None,
                "updated_at": self.updated_at.isoformat() if self.updated_at else None}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> PersonaEntry:
        """Read the `to_json` form back (stored revisions)."""
        def when(value: Any) -> datetime | None:
            return datetime.fromisoformat(value) if isinstance(value, str) else None
        return cls(int(obj["id"]), str(obj["text"]), str(obj.get("provenance") or "owner"),
                   str(obj.get("sensitivity") or DEFAULT_SENSITIVITY),
                   obj.get("belief_id"), when(obj.get("created_at")), when(obj.get("updated_at")),
                   bool(obj.get("stale")))


@dataclass(frozen=True, slots=True)
class PersonaDocument:
    """One revision of a principal's persona.

    Attributes:
        version: 0 for the empty document nobody has written yet; each write adds one.
        name: the persona's name (`{{user}}`); "" = the configured user name.
        entries: in the owner's order.
        reason: why this revision exists ("edit", "affirm", "import", "belief_superseded", …).
        lorebook: the name of the persona's own world book (SillyTavern persona lore), "" = none.
    """

    principal: str = LOCAL_PRINCIPAL
    version: int = 0
    name: str = ""
    entries: tuple[PersonaEntry, ...] = ()
    reason: str = ""
    created_at: datetime | None = None
    lorebook: str = ""

    def next_entry_id(self) -> int:
        """The id the next new entry gets (ids are never reused within a document's life)."""
        return max((e.id for e in self.entries), default=0) + 1

    def entry(self, entry_id: int) -> PersonaEntry | None:
        """The entry with this id, or None."""
        return next((e for e in self.entries if e.id == entry_id), None)

    def with_entries(self, entries: Sequence[PersonaEntry], reason: str) -> PersonaDocument:
        """The next revision with these entries (version + 1)."""
        return replace(self, version=self.version + 1, entries=tuple(entries), reason=reason, created_at=None)

    def to_json(self) -> dict[str, Any]:
        """JSON form (`tavern persona show --json`)."""
        return {"principal": self.principal, "version": self.version, "name": self.name,
                "lorebook": self.lorebook, "reason": self.reason,
                "created_at": self.created_at.isoformat() if self.created_at else None,
                "entries": [e.to_json() for e in self.entries]}


def principal_for(persona_id: int) -> str:
    """The principal of a persona made here after the first (issue 20 item 6): "persona:<id>"
    (the first one keeps "local", so its document, beliefs and declines stay where they were)."""
    return f"persona:{persona_id}"


@dataclass(frozen=True, slots=True)
class PersonaView:
    """One of the person's personas as lists show it (issue 20 item 6).

    Attributes:
        id: the persona's id (stable across renames; `--id`, the lock and drafts name it).
        principal: whose document, beliefs and declines are this persona's.
        name: its document's current name (`{{user}}`; "" = the configured user name).
        version: its document's current version (0: nothing written yet).
        entries: how many entries the document has.
        default: the persona new chats and chats without a lock play as.
        st_key: the SillyTavern avatar key a persona backup gave it ("" when made here).
    """

    id: int
    principal: str
    name: str
    version: int = 0
    entries: int = 0
    default: bool = False
    st_key: str = ""
    lorebook: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON form (`tavern persona list --json`)."""
        return {"id": self.id, "name": self.name, "version": self.version, "entries": self.entries,
                "default": self.default, "st_key": self.st_key, "lorebook": self.lorebook}


@dataclass(frozen=True, slots=True)
class RenderedPersona:
    """The persona as one session sees it.

    Attributes:
        text: the section's text ("" = render nothing); entries joined by newlines, injection
            hits replaced with `[BLOCKED]`.
        version: the revision it came from.
        entry_ids: the entries included, in order.
        left_out: ids of entries above the session's sensitivity ceiling.
        blocked: (entry id, kind) of each injection hit replaced.
        tokens: the text's token count.
    """

    text: str
    version: int
    entry_ids: tuple[int, ...] = ()
    left_out: tuple[int, ...] = ()
    blocked: tuple[tuple[int, str], ...] = ()
    tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        """The trace/preview form (no text: the request itself holds it)."""
        return {"version": self.version, "entries": list(self.entry_ids), "left_out": list(self.left_out),
                "blocked": [list(b) for b in self.blocked], "tokens": self.tokens}


def render_persona(document: PersonaDocument, *, ceiling: str = DEFAULT_CEILING,
                   scan: Callable[[str], tuple[str, list[Any]]] | None = None,
                   count: Callable[[str], int] | None = None) -> RenderedPersona:
    """Render the persona section for a session (ADR-0079 decisions 3, 9, 11).

    Entries above `ceiling` are left out; each remaining entry's text is injection-scanned with
    `scan` (returns the text with hits replaced by `[BLOCKED]` and the findings, each with a
    `kind`); the result is the entries joined by newlines. Caps are checked on the rendered
    text: more than `MAX_ENTRIES` entries or `MAX_TOKENS` tokens (by `count`) fails.

    Raises:
        PersonaCapExceeded: over a cap (opening a session fails naming the class).
    """
    if count is None:
        from tavern_tui.text.tokens import estimate_tokens as count
    included, left_out, blocked, texts = [], [], [], []
    for entry in document.entries:
        if not within(entry.sensitivity, ceiling):
            left_out.append(entry.id)
            continue
        text = entry.text.strip()
        if not text:
            continue
        if scan is not None:
            text, hits = scan(text)
            blocked.extend((entry.id, hit.kind) for hit in hits)
        included.append(entry.id)
        texts.append(text)
    if len(included) > MAX_ENTRIES:
        raise PersonaCapExceeded("entries", MAX_ENTRIES, len(included))
    text = "\n".join(texts)
    tokens = count(text) if text else 0
    if tokens > MAX_TOKENS:
        raise PersonaCapExceeded("tokens", MAX_TOKENS, tokens)
    return RenderedPersona(text, document.version, tuple(included), tuple(left_out), tuple(blocked), tokens)


BELIEF_KINDS = ("direct", "hypothesis")
BELIEF_STATUSES = ("active", "superseded")


@dataclass(frozen=True, slots=True)
class Support:
    """One message that supports a belief: its place in the log and the words quoted."""

    session_id: int
    seq: int
    quote: str

    def to_json(self) -> dict[str, Any]:
        """JSON form: session, seq, quote."""
        return {"session": self.session_id, "seq": self.seq, "quote": self.quote}


@dataclass(frozen=True, slots=True)
class Belief:
    """A belief learned from what the person said (seed 002 decision 6).

    Attributes:
        statement: the canonical statement, as an entry would carry it ("{{user}} likes cats.").
        key: canonical key; equal keys are the same belief (declines are durable by key).
        slot: what a newer belief replaces: a belief with the same slot and another key
            supersedes this one ("name", "pref:cats", …).
        kind: "direct" (the person said it of themselves) or "hypothesis" (inferred).
        category: "name", "preference", "dislike", "identity", "boundary", "story", or a
            never-nominate category ("health", "sexuality", "religion", "politics",
            "credentials", "location", "finances").
        confidence: 0..1.
        supports: the messages that say it, one per message.
        durable: a standing fact, not a passing state ("I'm tired").
        status: "active" or "superseded"; `superseded_by` names the newer belief.
        promoted: affirmed into the persona as entry `entry_id`.
        nominated: currently offered to the person for affirmation.
        declined: the person declined this key.
    """

    id: int
    statement: str
    key: str
    slot: str
    kind: str
    category: str
    confidence: float
    sensitivity: str
    durable: bool
    supports: tuple[Support, ...] = ()
    status: str = "active"
    superseded_by: int | None = None
    promoted: bool = False
    entry_id: int | None = None
    nominated: bool = False
    declined: bool = False
    created_at: datetime | None = None
    updated_at: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def corroborations(self) -> int:
        """How many separate messages support the belief."""
        return len({(s.session_id, s.seq) for s in self.supports})

    def to_json(self) -> dict[str, Any]:
        """JSON form (`tavern beliefs --json`)."""
        return {"id": self.id, "statement": self.statement, "key": self.key, "slot": self.slot, "kind": self.kind,
                "category": self.category, "confidence": self.confidence, "sensitivity": self.sensitivity,
                "durable": self.durable, "status": self.status, "superseded_by": self.superseded_by,
                "promoted": self.promoted, "entry_id": self.entry_id, "nominated": self.nominated,
                "declined": self.declined, "corroborations": self.corroborations,
                "supports": [s.to_json() for s in self.supports],
                "created_at": self.created_at.isoformat() if self.created_at else None,
                "updated_at": self.updated_at.isoformat() if self.updated_at else None}
