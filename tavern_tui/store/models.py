"""Provides the SQLAlchemy table models. Columns only; behaviour lives in repositories."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

ORIGINS_SQL = "('customer', 'agent', 'engine', 'operator')"


class Base(DeclarativeBase):
    """Declarative base with a naming convention, so Alembic can name constraints stably."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class _Resource:
    """Columns every imported resource has: the original file, its hash and a normalised form."""

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(512))
    source_name: Mapped[str] = mapped_column(String(1024), default="")
    """The file name the resource was imported from."""
    original: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)
    """The imported file's exact bytes (for re-export and audit). Deferred: a card's PNG can be
    megabytes and only an export reads it; every other read of the row leaves it on disk."""
    original_sha256: Mapped[str] = mapped_column(String(64), index=True, unique=True)
    data: Mapped[str] = mapped_column(Text)
    """The normalised form as canonical JSON text."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Character(_Resource, Base):
    """An imported character card (V1/V2/V3, PNG or JSON)."""

    __tablename__ = "characters"
    spec: Mapped[str] = mapped_column(String(32))
    spec_version: Mapped[str] = mapped_column(String(16), default="")
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """When it was archived (hidden from lists; nothing deleted); None: not archived."""
    revision: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """The card revision `data` holds: 0 as imported, each edit one more (`character_revisions`)."""


class CharacterRevision(Base):
    """One revision of a character's card (issue 20 item 5). Rows are only added; the original
    file's bytes stay in `characters.original`, revision 0 is the card as imported."""

    __tablename__ = "character_revisions"
    __table_args__ = (UniqueConstraint("character_id", "revision", name="uq_character_revisions_character_id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    character_id: Mapped[int] = mapped_column(ForeignKey("characters.id"))
    revision: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(512))
    data: Mapped[str] = mapped_column(Text)
    """The normalised card (`ParsedCard.to_dict`) as canonical JSON text."""
    reason: Mapped[str] = mapped_column(String(64))
    """What made it: "imported", "edited", "lorebook edited"."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class WorldBook(_Resource, Base):
    """An imported world book (lorebook)."""

    __tablename__ = "world_books"
    __table_args__ = (Index("ix_world_books_stamp", "id", "name", "data_sha256"),)
    data_sha256: Mapped[str] = mapped_column(String(64), default="", server_default="")
    """SHA-256 of `data` (hex), written with it: the key of the parsed copy a step reuses."""


class Preset(_Resource, Base):
    """An imported chat-completion preset."""

    __tablename__ = "presets"
    data_sha256: Mapped[str] = mapped_column(String(64), default="", server_default="")
    """SHA-256 of `data` (hex), written with it (the trace names a preset by it)."""


class Persona(Base):
    """One of the person's personas (issue 20 item 6): its versioned document, beliefs and
    declines are those of `principal`. The name is the document's (`persona_revisions.name`);
    `name` here is what it was when the row was made."""

    __tablename__ = "personas"
    __table_args__ = (UniqueConstraint("principal", name="uq_personas_principal"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(512))
    description: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[str] = mapped_column(Text, default="{}")
    """JSON: `{"st_key"?}` (the SillyTavern avatar key a persona backup gave it)."""
    principal: Mapped[str | None] = mapped_column(String(128))
    is_default: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """The persona new chats and chats without a lock play as (SillyTavern's default persona)."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class SessionRow(Base):
    """A session: an append-only list of events; a fork points at its parent through `fork_seq`."""

    __tablename__ = "sessions"
    __table_args__ = (
        CheckConstraint("(parent_id IS NULL) = (fork_seq IS NULL)", name="fork_pair"),
        CheckConstraint("fork_seq IS NULL OR fork_seq >= 0", name="fork_seq_nonnegative"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("sessions.id"), index=True)
    fork_seq: Mapped[int | None] = mapped_column(Integer)
    """Inclusive: the fork's surface is the parent's events with seq <= fork_seq, then its own."""
    playthrough_id: Mapped[int | None] = mapped_column(Integer, index=True)
    """The playthrough whose timeline this session belongs to (no FK: a session is created
    before the playthrough that roots on it)."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Playthrough(Base):
    """A story with one character: its sessions form a tree; `head_session_id` is the active one."""

    __tablename__ = "playthroughs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    character_id: Mapped[int] = mapped_column(ForeignKey("characters.id"), index=True)
    title: Mapped[str] = mapped_column(String(512), default="")
    user_name: Mapped[str] = mapped_column(String(512), default="User")
    root_session_id: Mapped[int] = mapped_column(ForeignKey("sessions.id"))
    head_session_id: Mapped[int] = mapped_column(ForeignKey("sessions.id"))
    meta: Mapped[str] = mapped_column(Text, default="{}", server_default="{}")
    """JSON: what an imported chat carried that has no column (SillyTavern header, chat_metadata)."""
    preset_id: Mapped[int | None] = mapped_column(Integer)
    """The bound chat-completion preset (no FK, as SQLite cannot add one to a table in place)."""
    strategy: Mapped[str | None] = mapped_column(String(64))
    """The applied assembly strategy; None = nothing applied (the compatibility renderer)."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """When it was archived (hidden from lists; nothing deleted); None: not archived."""
    group_id: Mapped[int | None] = mapped_column(Integer, index=True)
    """The group it plays (`GroupRow`; no FK, as for preset_id); None: a one-character playthrough."""
    opening_draft: Mapped[int | None] = mapped_column(Integer)
    """The opening draft whose first send prepared it and is not admitted yet (not listed; the
    draft stays); None once that send is admitted, and for every other playthrough. A prepared
    one that was given up is archived too and keeps the mark (never listed)."""


class GroupRow(Base):
    """A group chat's cast: members in order (with muted ones), the turn order and the card mode
    (SillyTavern's group definition)."""

    __tablename__ = "groups"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(512))
    members: Mapped[str] = mapped_column(Text, default="[]", server_default="[]")
    """JSON: [{"character": character id, "muted": bool}] in the group's order."""
    strategy: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """SillyTavern's `activation_strategy`: 0 natural, 1 list, 2 manual, 3 pooled."""
    generation_mode: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """0 swap (the speaker's card), 1 join (every member's), 2 join with muted members too."""
    allow_self_responses: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    join_prefix: Mapped[str] = mapped_column(Text, default="", server_default="")
    join_suffix: Mapped[str] = mapped_column(Text, default="", server_default="")
    data: Mapped[str] = mapped_column(Text, default="{}", server_default="{}")
    """JSON: an imported SillyTavern group's other fields (kept for its export)."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class EventRow(Base):
    """One event of a session. Never updated or deleted (triggers refuse it in SQLite and PostgreSQL)."""

    __tablename__ = "events"
    __table_args__ = (
        UniqueConstraint("session_id", "seq", name="uq_events_session_seq"),
        CheckConstraint("seq >= 1", name="seq_positive"),
        CheckConstraint(f"origin IS NULL OR origin IN {ORIGINS_SQL}", name="origin_closed_set"),
        Index("ix_events_session_kind_seq", "session_id", "kind", "seq"),
        Index("ix_events_kind_session_seq", "kind", "session_id", "seq"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("sessions.id"))
    seq: Mapped[int] = mapped_column(Integer)
    """Gapless per session, from 1."""
    kind: Mapped[str] = mapped_column(String(64))
    role: Mapped[str | None] = mapped_column(String(16))
    origin: Mapped[str | None] = mapped_column(String(16))
    source: Mapped[str | None] = mapped_column(String(64))
    body: Mapped[str] = mapped_column(Text)
    """Canonical JSON text; `body_sha256` is the SHA-256 of its UTF-8 bytes."""
    body_sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class WorldBookBinding(Base):
    """Binds a world book to a scope: "global", a "character", a "playthrough" (SillyTavern's chat
    lore), a "persona" or a "preset" (every playthrough that uses it). Binding is separate from
    editing (issue 3 §4)."""

    __tablename__ = "world_book_bindings"
    __table_args__ = (
        UniqueConstraint("world_book_id", "scope", "target_id", name="uq_world_book_bindings_book_scope_target"),
        CheckConstraint("scope IN ('global', 'character', 'playthrough', 'persona', 'preset')", name="scope_known"),
        CheckConstraint("(scope = 'global') = (target_id IS NULL)", name="target_matches_scope"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    world_book_id: Mapped[int] = mapped_column(ForeignKey("world_books.id"), index=True)
    scope: Mapped[str] = mapped_column(String(16))
    target_id: Mapped[int | None] = mapped_column(Integer)
    """The character, playthrough, persona or preset id; None for global."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class PersonaRevision(Base):
    """One revision of a principal's persona document (seed 002). Rows are only added: the
    newest version is the document, the older ones are its history."""

    __tablename__ = "persona_revisions"
    __table_args__ = (UniqueConstraint("principal", "version", name="uq_persona_revisions_principal_version"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    principal: Mapped[str] = mapped_column(String(128))
    version: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(512), default="")
    lorebook: Mapped[str] = mapped_column(String(512), default="")
    entries: Mapped[str] = mapped_column(Text)
    """JSON list of entries (`PersonaEntry.to_json`)."""
    reason: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class BeliefRow(Base):
    """A belief learned from customer-origin messages (seed 002 decision 6)."""

    __tablename__ = "beliefs"
    __table_args__ = (
        CheckConstraint("kind IN ('direct', 'hypothesis')", name="kind_known"),
        CheckConstraint("status IN ('active', 'superseded')", name="status_known"),
        CheckConstraint("sensitivity IN ('low', 'normal', 'high')", name="sensitivity_known"),
        Index("ix_beliefs_principal_key", "principal", "key"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    principal: Mapped[str] = mapped_column(String(128))
    statement: Mapped[str] = mapped_column(Text)
    key: Mapped[str] = mapped_column(String(512))
    slot: Mapped[str] = mapped_column(String(512), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    category: Mapped[str] = mapped_column(String(32))
    confidence: Mapped[float] = mapped_column(Float)
    sensitivity: Mapped[str] = mapped_column(String(16))
    durable: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(16), default="active")
    superseded_by: Mapped[int | None] = mapped_column(Integer)
    promoted: Mapped[bool] = mapped_column(Boolean, default=False)
    entry_id: Mapped[int | None] = mapped_column(Integer)
    nominated: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class BeliefSupport(Base):
    """A message that supports a belief: one row per (belief, message), so consolidation is idempotent."""

    __tablename__ = "belief_supports"
    __table_args__ = (UniqueConstraint("belief_id", "session_id", "seq", name="uq_belief_supports_message"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    belief_id: Mapped[int] = mapped_column(ForeignKey("beliefs.id"), index=True)
    session_id: Mapped[int] = mapped_column(Integer)
    seq: Mapped[int] = mapped_column(Integer)
    quote: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class BeliefDecline(Base):
    """A declined nomination, durable by canonical key: a belief with this key is never nominated again."""

    __tablename__ = "belief_declines"
    __table_args__ = (UniqueConstraint("principal", "key", name="uq_belief_declines_principal_key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    principal: Mapped[str] = mapped_column(String(128))
    key: Mapped[str] = mapped_column(String(512))
    belief_id: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ConsolidationMark(Base):
    """How far consolidation has read each session (the last seq read), so a run reads only new events."""

    __tablename__ = "consolidation_marks"
    session_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer)


class StrategyRow(Base):
    """One saved version of an assembly strategy (a person's variant of a built-in one). Rows
    are only added: a new version is a new row; applying one records its snapshot."""

    __tablename__ = "strategies"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_strategies_name_version"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    version: Mapped[int] = mapped_column(Integer)
    base: Mapped[str] = mapped_column(String(64))
    options: Mapped[str] = mapped_column(Text)
    """JSON object of the base's options."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ComposerDraft(Base):
    """What the person has typed in a playthrough's composer and not sent yet (one row per
    playthrough; replaced as they type), so Esc, screen changes and restarts never lose it."""

    __tablename__ = "composer_drafts"
    playthrough_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    text: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class StepLeaseRow(Base):
    """Who is streaming a step in a playthrough right now (issue 23 item 4): one row per scope,
    so taking a step is one atomic insert (the primary key refuses a second owner). The owner's
    pid, host and process start time let the next opener see at once that it died; the
    heartbeat covers owners on other hosts, whose pid cannot be checked."""

    __tablename__ = "step_leases"
    scope: Mapped[str] = mapped_column(String(64), primary_key=True)
    """"p<playthrough id>", or "s<session id>" for a session outside any playthrough."""
    session_id: Mapped[int] = mapped_column(Integer)
    token: Mapped[str] = mapped_column(String(64))
    """Random per claim: a release or heartbeat touches only its own claim."""
    pid: Mapped[int] = mapped_column(Integer)
    host: Mapped[str] = mapped_column(String(255))
    started: Mapped[str] = mapped_column(String(32), default="")
    """The owner process's start time (Linux /proc ticks), to tell a reused pid; "" when unknown."""
    claimed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class RegexScriptRow(Base):
    """A global regex script (SillyTavern's Regex extension), imported from a regex JSON file
    (issue 18). Scripts run in `id` order, as SillyTavern keeps its global list."""

    __tablename__ = "regex_scripts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(512))
    data: Mapped[str] = mapped_column(Text)
    """The script as SillyTavern's JSON (canonical text)."""
    source_name: Mapped[str] = mapped_column(String(1024), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class RegexAllowance(Base):
    """A character whose card regex scripts the person allowed (SillyTavern's
    `character_allowed_regex`): keyed by the card file's hash, so a changed card asks again."""

    __tablename__ = "regex_allowances"
    character_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    allowed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class OpeningDraft(Base):
    """An opening draft (seed 000 §7): a playthrough not yet begun, with the selections its
    first send applies. It has no session; the first send replaces it with a playthrough."""

    __tablename__ = "opening_drafts"
    __table_args__ = (CheckConstraint("greeting_index >= 0", name="greeting_nonnegative"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    character_id: Mapped[int] = mapped_column(ForeignKey("characters.id"), index=True)
    greeting_index: Mapped[int] = mapped_column(Integer, default=0)
    """Which of the card's greetings opens it (0: first_mes, then alternate_greetings)."""
    preset_id: Mapped[int | None] = mapped_column(Integer)
    strategy: Mapped[str] = mapped_column(Text)
    """JSON: the strategy snapshot (`StrategySpec.snapshot`) the playthrough will pin."""
    lore: Mapped[str] = mapped_column(Text, default="[]")
    """JSON list of world book ids bound as chat lore at the first send."""
    user_name: Mapped[str] = mapped_column(String(512), default="")
    """The persona name `{{user}}` stands for ("" = the current persona's)."""
    persona_id: Mapped[int | None] = mapped_column(Integer)
    """The persona the playthrough will be locked to at the first send (None: the default's)."""
    line: Mapped[str] = mapped_column(Text, default="", server_default="")
    """The first line typed into the draft and not sent yet (never a text holding a secret)."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ConfigTemplate(Base):
    """A configuration template: the selection intent of a playthrough (strategy snapshot, preset,
    chat-lore books, persona) under a name, applied when a new playthrough is made from it. It
    holds no messages, trace, inbox or bodies."""

    __tablename__ = "config_templates"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(512), unique=True)
    data: Mapped[str] = mapped_column(Text)
    """JSON: {"strategy": snapshot, "preset_id": int | None, "lore": [book ids], "persona_id": int | None}."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
