"""Provides `session_list`, `preset_list` and `trace_list`: what `tavern sessions`, `tavern presets`
and `tavern trace list` print, read before the service opens, so these commands do not load
SQLAlchemy, the store or the services (start-up: performance-anchors §7 B7, `benchmarks/ui_start`
cli_start).

The rows are read with the standard library's `sqlite3` (`store.list_reads`: an embedded SQLite
file at the newest schema, read-only) and turned into views by the functions the services use
(`list_views`, `trace_views`), so both paths give the same views (tests compare their output on
the corpus). Each answers None when it cannot read that way (another database, a file not created
yet, a schema to migrate, any SQLite error, a row the service would refuse, a playthrough that
does not exist): the caller then opens the service, as every command does.
"""

from __future__ import annotations

from dataclasses import dataclass

from tavern_tui.formats.preset_model import ParsedPreset
from tavern_tui.service.list_views import (
    DEFAULT_PRESET_DATA,
    DEFAULT_PRESET_NAME,
    default_title,
    message_counts,
    parse_stored_preset,
    persona_names,
    playthrough_view,
    preset_view,
    user_names,
)
from tavern_tui.store.list_reads import ListReader, read_lists
from tavern_tui.views import PlaythroughView, PresetView, TraceView


@dataclass(frozen=True, slots=True)
class SessionList:
    """`tavern sessions`' rows: the playthroughs as `PlaythroughService.playthroughs` lists them,
    and {playthrough id: its group's name} of the group chats among them (empty unless asked)."""

    playthroughs: list[PlaythroughView]
    groups: dict[int, str]


@dataclass(frozen=True, slots=True)
class PresetList:
    """`tavern presets`' rows: the imported presets as `PresetService.presets` lists them, and the
    built-in default (`PresetService.preset_of(None)`), which no database read gives."""

    presets: list[PresetView]
    default: ParsedPreset


def _sessions(reader: ListReader, user_name: str, include_archived: bool, with_groups: bool,
              character: str | None) -> SessionList:
    character_id = reader.character_named(character) if character is not None else None
    rows = reader.playthroughs(include_archived=include_archived, character_id=character_id)
    characters = reader.character_names()
    personas, default = persona_names(reader.personas())
    views = []
    for row in rows:
        title = row.title or default_title(reader.first_line(reader.chain(row.head_session_id)), row.created_at)
        views.append(playthrough_view(row, characters.get(row.character_id, "?"),
                                      user_names(row, personas, default, user_name),
                                      message_counts(reader, row.head_session_id), title))
    return SessionList(views, reader.group_names() if with_groups else {})


def session_list(db_url: str, user_name: str, *, include_archived: bool = False, with_groups: bool = False,
                 character: str | None = None) -> SessionList | None:
    """The playthroughs of every character (or of `character`, an id or a name as
    `LibraryService.find_character` takes it: its one-character chats), most recently played first
    (archived ones only with `include_archived`), as `PlaythroughService.playthroughs()` gives them
    with the configured `user_name`; with `with_groups`, the group chats' group names too. None to
    open the service instead (see the module text; a character not found or named twice too, which
    the service then says)."""
    return read_lists(db_url, lambda reader: _sessions(reader, user_name, include_archived, with_groups, character))


def _presets(reader: ListReader) -> list[PresetView]:
    return [preset_view(row, parse_stored_preset(row.data, row.name)) for row in reader.presets()]


def preset_list(db_url: str) -> PresetList | None:
    """The imported presets by name, as `PresetService.presets()` gives them, and the built-in
    default. None to open the service instead (see the module text)."""
    presets = read_lists(db_url, _presets)
    if presets is None:
        return None
    return PresetList(presets, parse_stored_preset(DEFAULT_PRESET_DATA, DEFAULT_PRESET_NAME))


def trace_list(db_url: str, playthrough_id: int | None = None, session_id: int | None = None) -> list[TraceView] | None:
    """The recorded requests of a session, else of a playthrough's own sessions, else all, oldest
    first, as `TraceService.traces` gives them. None to open the service instead (see the module
    text), as for a playthrough that does not exist."""
    from tavern_tui.service.trace_views import list_traces

    def read(reader: ListReader) -> list[TraceView]:
        sessions = ([session_id] if session_id is not None
                    else reader.playthrough_sessions(playthrough_id) if playthrough_id is not None else None)
        return list_traces(reader, sessions)

    return read_lists(db_url, read)
