"""Provides the pure steps from stored rows to the views the lists show (`tavern sessions`,
`tavern presets`, the home screen's chats): one function each, called by the services
(`PlaythroughService`, `PresetService`, on records the store's repositories give) and by
`service.list_reads` (on rows read with sqlite3 before the service opens), so the two paths differ
only in their SQL.

A light module: views, the engine's event kinds and the preset parser, nothing that loads
SQLAlchemy or the store.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from tavern_tui.engine.events import Event, EventKind
from tavern_tui.engine.log import SUMMARY_SOURCE
from tavern_tui.formats.preset_model import ParsedPreset
from tavern_tui.formats.presets import parse_preset
from tavern_tui.service.roleplay import ooc_of
from tavern_tui.store.records import PlaythroughRecord
from tavern_tui.views import PlaythroughView, PresetView

TITLE_CHARS = 48
"""Characters of the first line a default chat title keeps (then "…")."""

DEFAULT_PRESET_NAME = "SillyTavern default"
"""The name of the built-in preset a playthrough without a bound one uses."""

DEFAULT_PRESET_DATA = "{}"
"""The built-in preset's stored form: an empty preset, which the parser fills with SillyTavern's defaults."""


class SurfaceCounts(Protocol):
    """The two reads a message count takes: `EventLog`'s, or `list_reads.ListReader`'s."""

    def surface_events_of(self, session_id: int, kinds: Sequence[str]) -> list[Event]: ...
    def count_messages(self, session_id: int, replaced: Sequence[Event] | None = None) -> int: ...


class StoredPreset(Protocol):
    """What a preset's list line reads of its record (`PresetRepository`'s, or `list_reads.PresetRow`)."""

    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def source_name(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...


def first_line_title(text: str) -> str:
    """The first non-blank line of `text`, whitespace folded, cut at `TITLE_CHARS` with "…"."""
    line = next((" ".join(part.split()) for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= TITLE_CHARS else line[:TITLE_CHARS - 1].rstrip() + "…"


def default_title(first_line: str | None, created_at: datetime) -> str:
    """The title of a chat given none (issue 20 item 4): its first line (`first_line_title` of the
    person's first message on the active path), else the day it was started ("3 Dec 2026")."""
    return first_line_title(first_line) if first_line else f"{created_at.day} {created_at:%b %Y}"


def played_counts(shown: int, replaced: Sequence[Event]) -> tuple[int, int, int]:
    """(messages shown, messages played, of those the ones summarised) of a surface whose
    `shown` count (`count_messages`) and `surface/replaced` events are given.

    A summary shows as one message for its targets; its targets may be an earlier summary (or
    an edit of one), so the played count adds each summary's targets but itself, and the
    summarised count is what the summaries no later summary folds stand for (`covers`)."""
    summaries = [e for e in replaced if e.source == SUMMARY_SOURCE]
    folded = {(int(t[0]), int(t[1])) for e in summaries for t in e.body.get("targets") or ()}
    played = shown + sum(len(e.body.get("targets") or ()) - 1 for e in summaries)
    summarised = 0
    for event in summaries:
        if event.ref not in folded:
            meta = (event.body.get("message") or {}).get("summary")
            covers = meta.get("covers") if isinstance(meta, dict) else None
            summarised += covers if isinstance(covers, int) else len(event.body.get("targets") or ())
    return shown, played, min(summarised, played)


def message_counts(log: SurfaceCounts, head_session_id: int) -> tuple[int, int, int]:
    """`played_counts` of a head session's surface, read from `log`. Raises NotFound."""
    replaced = log.surface_events_of(head_session_id, [EventKind.SURFACE_REPLACED])
    return played_counts(log.count_messages(head_session_id, replaced), replaced)


def persona_names(personas: Sequence[tuple[int, bool, str]]) -> tuple[dict[int, str], int]:
    """({persona id: name}, the default persona's id: the one marked, else the oldest, 0 for none)
    from (id, is default, its document's name) oldest first."""
    names = {persona_id: name for persona_id, _default, name in personas}
    default = next((p[0] for p in personas if p[1]), personas[0][0] if personas else 0)
    return names, default


def user_names(record: PlaythroughRecord, personas: dict[int, str], default: int,
               configured: str) -> tuple[str, str]:
    """(the name new lines are written under, an imported chat's own name or "").

    `{{user}}` is the name chosen with `play_as`; else the persona's the playthrough plays as
    (its lock, else the default persona) once that persona has one; else, for an imported chat,
    the configured `user_name` when one is set (its old lines keep the file's name), and
    otherwise the name it was started with."""
    try:
        meta = json.loads(record.meta or "{}")
    except ValueError:
        meta = {}
    meta = meta if isinstance(meta, dict) else {}
    pin = meta.get("persona")
    lock = pin.get("lock") if isinstance(pin, dict) else None
    persona = personas.get(lock if lock in personas else default, "")
    imported = record.user_name if isinstance(meta.get("header"), dict) else ""
    chosen = meta.get("play_as")
    if isinstance(chosen, str) and chosen.strip():
        return chosen, imported
    if imported:  # SillyTavern's default "User" names nobody: the file's own name wins over it
        return persona or (configured if configured and configured != "User" else imported), imported
    return persona or record.user_name, imported


def playthrough_view(record: PlaythroughRecord, character_name: str, names: tuple[str, str],
                     counts: tuple[int, int, int], title: str) -> PlaythroughView:
    """The view of a playthrough: `names` from `user_names`, `counts` from `message_counts`,
    `title` the one given or `default_title`; its out-of-character flag from its meta (`ooc_of`)."""
    shown, played, summarised = counts
    return PlaythroughView(record.id, record.character_id, character_name, names[0], record.head_session_id,
                           record.created_at, record.updated_at, shown, record.strategy or "compat",
                           record.preset_id, title, record.archived_at is not None, played, summarised,
                           names[1], ooc_of(record.meta), record.opening_draft)


def parse_stored_preset(data: str, name: str) -> ParsedPreset:
    """A preset parsed from its stored data (`DEFAULT_PRESET_DATA` for the built-in one)."""
    return parse_preset(data.encode("utf-8"), name, name=name)


def preset_view(record: StoredPreset, preset: ParsedPreset) -> PresetView:
    """The list view of an imported preset, `preset` parsed from its data: its prompts, the order
    it sends (`order_source`) and how many prompts that order enables."""
    return PresetView(record.id, record.name, len(preset.prompts), preset.order_source,
                      sum(1 for item in preset.order if item.enabled), record.source_name, record.created_at)
