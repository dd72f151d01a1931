"""Provides `PlaythroughService`: the playthroughs (list, read, start, open), their messages (how
each looks is `message_views`'), the check every message the person writes passes before it is
stored, and the workflows the front ends share: picking the playthrough to play (`resolve`) and
binding a preset, books and a strategy to it (`apply_selection`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from tavern_tui.engine.events import Event
from tavern_tui.engine.log import SurfaceMessage
from tavern_tui.engine.step import admit_opening, recover_interrupted
from tavern_tui.errors import SecretRefused, TavernError
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.service.list_views import (
    default_title,
    message_counts,
    persona_names,
    playthrough_view,
    user_names,
)
from tavern_tui.service.lore import WorldInfoService
from tavern_tui.service.message_views import as_shown, event_view, message_view, surface_views
from tavern_tui.service.persona import PersonaService
from tavern_tui.service.presets import PresetService
from tavern_tui.service.secrets import configured_secrets, refuse_configured
from tavern_tui.service.strategies import StrategyService
from tavern_tui.store.records import PlaythroughRecord
from tavern_tui.text.names import substitute_names
from tavern_tui.views import MessageView, PlaythroughView, PresetView, WorldBookView

logger = logging.getLogger(__name__)

CHAT_SECRET_KINDS = ("api_key", "bearer_token", "private_key", "jwt")
"""Secret kinds (`persona.safety`) a chat message or edit is refused for unless the person says
`allow_secrets`. "password" is left out: "my password is swordfish" is ordinary fiction."""

MIN_CONFIGURED_KEY = 8
"""A configured API key shorter than this ("none", "ollama", "EMPTY") is not looked for verbatim
in messages: it would refuse ordinary words, and it is no credential worth guarding."""

MAX_TITLE = 200
"""The longest title `rename` takes."""


class PlaythroughService:
    """Playthroughs and their messages (`tavern.playthroughs`).

    Args:
        ctx: the shared settings, store and provider.
        library: the characters (a new playthrough opens with its card's greeting).
        persona: the persona (its name is `{{user}}`; it is pinned on a new playthrough).
        presets, lore, strategies: what `apply_selection` binds or applies.
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService, persona: PersonaService,
                 presets: PresetService, lore: WorldInfoService, strategies: StrategyService) -> None:
        self.ctx = ctx
        self.library = library
        self.persona = persona
        self.presets = presets
        self.lore = lore
        self.strategies = strategies
        self._counts: dict[tuple[int, tuple[int, int]], tuple[int, int, int]] = {}
        # Read and filled from worker threads (a step's prelude, TUI thread workers) and the loop:
        # the lock keeps a clear in one thread from racing a lookup in another.
        self._counts_lock = threading.Lock()
        self.display: Callable[[int, list[MessageView]], list[MessageView]] | None = None
        """`(character id, views) -> views` setting what the transcript shows (the facade wires the
        regex scripts' `ScriptService.display_views` here); None = the raw text."""
        self.mvu_texts: Callable[[int], dict[tuple[int, int], str]] | None = None
        """`playthrough id -> {message ref: text}`: MVU's derived texts of the messages it has read (its status
        placeholder appended, `MvuService.display_texts`), put in `display` before the regex scripts run."""
        self._titles: dict[tuple[int, tuple[int, int]], str] = {}

    def _playthrough_view(self, record: PlaythroughRecord, names: dict[int, str],
                          counts: dict[int, tuple[int, int, int]],
                          persona_names: dict[int, str] | None = None, default: int = 0) -> PlaythroughView:
        names_of = self._user_names(record, persona_names or {}, default)
        return playthrough_view(record, names.get(record.character_id, "?"), names_of,
                                counts.get(record.head_session_id, (0, 0, 0)), self.chat_title(record))

    def _user_names(self, record: PlaythroughRecord, persona_names: dict[int, str], default: int) -> tuple[str, str]:
        """(the name new lines are written under, an imported chat's own name or "") by
        `list_views.user_names`, with the configured `user_name`."""
        return user_names(record, persona_names, default, self.ctx.settings.user_name)

    def name_choices(self, playthrough_id: int) -> tuple[str, str]:
        """(the name new lines get by default, an imported chat's own name or "") of a playthrough:
        what `play_as` chooses between. Raises NotFound."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            record = uow.playthroughs.get(playthrough_id)
            personas, default = _persona_names(uow)
        try:
            meta = json.loads(record.meta or "{}")
        except ValueError:
            meta = {}
        if isinstance(meta, dict):
            meta.pop("play_as", None)
            record = replace(record, meta=json.dumps(meta, ensure_ascii=False))
        return self._user_names(record, personas, default)

    def play_as(self, playthrough_id: int, name: str) -> PlaythroughView:
        """Write the playthrough's new lines (and `{{user}}`) under `name` from now on; lines
        already written keep theirs. An empty name goes back to the default (`_user_names`).
        Raises NotFound."""
        name = " ".join(name.split())
        with self.ctx.store.unit_of_work() as uow:
            record = uow.playthroughs.get(playthrough_id)
            try:
                meta = json.loads(record.meta or "{}")
            except ValueError:
                meta = {}
            meta = meta if isinstance(meta, dict) else {}
            if name:
                meta["play_as"] = name
            else:
                meta.pop("play_as", None)
            uow.playthroughs.set_meta(playthrough_id, json.dumps(meta, ensure_ascii=False))
        return self.playthrough(playthrough_id)

    def chat_title(self, record: PlaythroughRecord) -> str:
        """A chat's title (issue 20 item 4): the one given, else its first line (first
        `list_views.TITLE_CHARS` characters of the person's first message on the active path), else the
        day it was started ("3 Dec 2026"). Cached per head session until the log changes."""
        if record.title:
            return record.title
        version = self.ctx.store.events.version()
        key = (-record.head_session_id, version)  # beside the counts' keys, never equal to one
        with self._counts_lock:
            cached = self._titles.get(key)
        if cached is not None:
            return cached
        line = self.ctx.store.search.first_line(self.ctx.store.events.ancestry(record.head_session_id))
        title = default_title(line, record.created_at)
        with self._counts_lock:
            if len(self._titles) > 256:
                self._titles.clear()
            self._titles[key] = title
        return title

    def rename(self, playthrough_id: int, title: str) -> PlaythroughView:
        """Give a chat a title ("" or blanks: back to the default one). Raises NotFound;
        TavernError for a title longer than `MAX_TITLE` characters."""
        title = " ".join(title.split())
        if len(title) > MAX_TITLE:
            raise TavernError(f"a title has at most {MAX_TITLE} characters; this one has {len(title)}")
        with self.ctx.store.unit_of_work() as uow:
            uow.playthroughs.set_title(playthrough_id, title)
        return self.playthrough(playthrough_id)

    def associate_opening(self, playthrough_id: int) -> None:
        """A playthrough an opening draft's first send prepared had that send admitted: it is
        listed from now on and the draft removed (`OpeningRepository.associate`; seed 000 §7: a
        first send associates the session only after admission). Raises NotFound."""
        with self.ctx.store.unit_of_work() as uow:
            uow.openings.associate(playthrough_id)

    def archive(self, playthrough_id: int, archived: bool = True) -> PlaythroughView:
        """Archive a chat (hidden from lists and from Enter on its character; nothing is deleted,
        the log stays append-only) or, with `archived` False, bring it back. Raises NotFound."""
        with self.ctx.store.unit_of_work() as uow:
            uow.playthroughs.set_archived(playthrough_id, archived)
        return self.playthrough(playthrough_id)

    def playthroughs(self, character_id: int | None = None, limit: int | None = None, *,
                     include_archived: bool = False, group_id: int | None = None) -> list[PlaythroughView]:
        """Playthroughs, most recently played first (archived ones only with `include_archived`):
        a character's one-character chats, a group's chats (`group_id`), or all."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            records = uow.playthroughs.list(character_id, limit, include_archived=include_archived, group_id=group_id)
            names = {c.id: c.name for c in uow.characters.all()}
            personas, default = _persona_names(uow)
        counts = {r.head_session_id: self._message_count(r.head_session_id) for r in records}
        return [self._playthrough_view(r, names, counts, personas, default) for r in records]

    def _message_count(self, head_session_id: int) -> tuple[int, int, int]:
        """(messages on a head session's surface, messages played, of those the ones summarised:
        `list_views.message_counts`), cached until the next append or fork (every operation reads
        its playthrough, and counting a 5,000-message chat takes milliseconds)."""
        version = self.ctx.store.events.version()
        key = (head_session_id, version)
        with self._counts_lock:
            cached = self._counts.get(key)
        if cached is not None:
            return cached
        count = message_counts(self.ctx.store.events, head_session_id)  # outside the lock: SQL
        with self._counts_lock:
            if len(self._counts) > 256:
                self._counts.clear()
            self._counts[key] = count
        return count

    def revision(self, playthrough_id: int) -> tuple[int, int]:
        """(the head session, its last seq): changes whenever anything is written to the chat as
        shown — a message, a swipe or branch jump, a queued line, a compaction — by this process or
        another (a second window, `tavern chat --say`). Two short reads; a chat screen polls it to
        follow other writers. Raises NotFound."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            session = uow.playthroughs.get(playthrough_id).head_session_id
        return session, self.ctx.store.events.head_seq(session)

    def follow_mark(self, playthrough_id: int) -> tuple[tuple[int, int], int | None]:
        """(`revision`, the database's data version): what a chat screen polls to follow other
        writers. The revision changes with what the chat shows; the data version with anything
        committed anywhere (`Store.data_version`; None where it cannot be told), such as the
        persona renamed or the card edited from another shell, which its title shows. Raises NotFound."""
        return self.revision(playthrough_id), self.ctx.store.data_version()

    def playthrough(self, playthrough_id: int) -> PlaythroughView:
        """One playthrough (read once per database version: `ServiceContext.per_version`). Raises NotFound."""
        return self.ctx.per_version(("playthrough", playthrough_id), lambda: self._read_playthrough(playthrough_id))

    def _read_playthrough(self, playthrough_id: int) -> PlaythroughView:
        with self.ctx.store.unit_of_work(write=False) as uow:
            record = uow.playthroughs.get(playthrough_id)
            name = uow.characters.get(record.character_id).name
            personas, default = _persona_names(uow)
        counts = {record.head_session_id: self._message_count(record.head_session_id)}
        return self._playthrough_view(record, {record.character_id: name}, counts, personas, default)

    def latest_playthrough(self, character_id: int) -> PlaythroughView | None:
        """The character's most recently played playthrough, or None."""
        found = self.playthroughs(character_id, limit=1)
        return found[0] if found else None

    def new_playthrough(self, character_id: int, *, user_name: str | None = None,
                        member: bool = False) -> PlaythroughView:
        """Start a playthrough: a new session opened with the card's greeting as an opening
        reference (role assistant, origin engine; seed 000 §3). A card without a greeting opens
        empty. The persona revision is pinned and `settings.default_strategy` applied
        (preset-slots-first unless configured). `member`: a group chat's, whose greeting keeps
        its speaker (`name`, `character_id`) as a member's reply does.

        Raises:
            NotFound: no such character.
        """
        user = user_name or self.persona.persona().name or self.ctx.settings.user_name
        self.persona.rendered_persona()  # over a cap, the session does not open (PersonaCapExceeded)
        with self.ctx.store.unit_of_work() as uow:
            record = uow.characters.get(character_id)
        card = self.library.card(record)
        log = self.ctx.store.events
        session_id = log.create_session()
        greetings = card.greetings
        if greetings and greetings[0].strip():
            text = substitute_names(greetings[0], card.name, user)
            meta: dict[str, Any] = {"greeting_index": 0, "greetings": len(greetings)}
            if member:
                meta.update(name=card.name, character_id=character_id)
            admit_opening(log, session_id, text, meta)
        with self.ctx.store.unit_of_work() as uow:
            created = uow.playthroughs.add(character_id=character_id, title="", user_name=user, session_id=session_id)
        self.persona.pin_persona(created.id)
        self.strategies.apply_strategy(created.id, self.ctx.settings.default_strategy)  # seed 000 §2.1: new openings
        return self.playthrough(created.id)

    def open_playthrough(self, playthrough_id: int) -> PlaythroughView:
        """Open a playthrough for play: settles a reply a crash left mid-stream, then returns it.

        Raises:
            NotFound: no such playthrough.
            PersonaCapExceeded: the persona is over a cap (the session does not open).
        """
        view = self.playthrough(playthrough_id)
        self.persona.rendered_persona(playthrough_id)
        if recover_interrupted(self.ctx.store.events, view.session_id, stale_after=self.ctx.stale_after,
                               claims=self.ctx.store.claims) is not None:
            logger.info("recovered an interrupted reply in playthrough %s", playthrough_id)
        return view

    def _message_view(self, message: SurfaceMessage, char: str, user: str) -> MessageView:
        """One surface message as the chat shows it (`message_views.message_view`; compaction shows
        its summaries through it)."""
        return message_view(message, char, user)

    def view_of(self, event: Event, char: str, user: str) -> MessageView:
        """A just-stored event as the chat shows it (a step's reply with tool calls, a tool
        result: issue 19); no database read, so a screen may call it on its event loop."""
        return event_view(event, char, user)

    def messages(self, playthrough_id: int, *, include_system: bool = False,
                 last: int | None = None) -> list[MessageView]:
        """The playthrough's messages in order (its head session's surface), including replies
        that failed before any text arrived (`partial`, with `error`), which the model never sees,
        and a reply a killed process left open (`message_views.left_open`), each with the text
        MVU and the character's regex scripts display (`message_views.as_shown`).

        Args:
            include_system: also return the system section sent to the model (hidden in the chat).
            last: only the newest `last` messages, read with one bounded query (`engine.log.tail`);
                the system section is never among them.
        """
        view = self.playthrough(playthrough_id)
        views = surface_views(self.ctx, view, include_system=include_system, last=last)
        texts = self.mvu_texts(playthrough_id) if self.mvu_texts is not None else None
        return as_shown(views, view.character_id, texts, self.display)

    def _configured_keys(self) -> list[str]:
        """The configured credentials (API keys, base-URL user and password), long enough to look for."""
        return configured_secrets(self.ctx.settings, self.ctx.provider)

    def keepable(self, text: str) -> tuple[str, bool]:
        """(what may be kept of an unsent `text`, whether that is all of it): a composer's draft or
        a draft's first line. A text that holds a secret or the configured API key is never
        written (DESIGN.md: keys never reach the database): ("", False) then."""
        try:
            self.check_message(text) if text.strip() else None
        except SecretRefused:
            return "", False
        return text, True

    def check_message(self, text: str, *, allow_secrets: bool = False, where: str = "message",
                      already: str = "") -> None:
        """Return None when the person's `text` may be stored and sent; `steps.send` and
        `timeline.edit_message` call it before anything is written, and a surface may call it
        first to keep the text.

        Rule: API keys never reach the database, the trace, logs or the screen (seed 002 decision 11).

        Args:
            allow_secrets: the person confirmed: secret-looking text (`CHAT_SECRET_KINDS`) passes;
                the configured provider API key never does.
            where: names the surface in the message ("message", "edit").
            already: text already stored (the message being edited); a secret-looking string it
                holds is not refused again.

        Raises:
            SecretRefused: `configured` when `text` holds the configured provider API key (or a
                base-URL credential) in any form `text.secret_values` matches;
                else `overridable` for the first `CHAT_SECRET_KINDS` finding. The message names
                the kind, never the secret.
        """
        from tavern_tui.persona.safety import find_secrets
        refuse_configured(text, self._configured_keys(), where)  # by value, in any encoding
        if allow_secrets:
            return
        for finding in find_secrets(text, CHAT_SECRET_KINDS):
            if text[finding.start:finding.end] not in already:
                raise SecretRefused(finding.kind, where, overridable=True,
                                    advice="nothing was stored or sent (remove it, or allow it explicitly)")

    # -- workflows the front ends share ----------------------------------------------------

    def resolve(self, character: int | str, *, playthrough: int | None = None, new: bool = False,
                notes: list[str] | None = None) -> PlaythroughView:
        """The playthrough to play with a character: `playthrough` when given (it must be the
        character's), else a new one when `new`, else the most recently played one, else a new
        one (`tavern chat`, and choosing a character on the home screen).

        Args:
            character: a character id, or a query as `LibraryService.find_character` takes it.
            notes: when given, "started playthrough N with NAME" is appended to it when one was started.

        Raises:
            NotFound: no such character or playthrough.
            TavernError: `playthrough` belongs to another character.
            PersonaCapExceeded: a new playthrough was needed and the persona is over a cap.
        """
        found = self.library.find_character(str(character))
        if playthrough is not None:
            view = self.playthrough(playthrough)
            if view.character_id != found.id:
                raise TavernError(f"playthrough {view.id} belongs to {view.character_name}, not {found.name}")
            return view
        latest = None if new else self.latest_playthrough(found.id)
        if latest is not None:
            return latest
        created = self.new_playthrough(found.id)
        if notes is not None:
            notes.append(f"started playthrough {created.id} with {found.name}")
        return created

    def check_selection(self, *, preset: str | None = None, lore: Iterable[str] = (),
                        strategy: str | None = None) -> tuple[PresetView | None, list[WorldBookView]]:
        """Look up what `apply_selection` would bind, changing nothing (`tavern chat` checks
        before it creates a playthrough, so an unknown name creates nothing either).

        Returns:
            The preset (None when not given) and the world books, in the order given.

        Raises:
            NotFound: an unknown preset, book or strategy (the message lists the known ones).
        """
        chosen = self.presets.find_preset(preset) if preset else None
        books = [self.lore.find_world_book(book) for book in lore]
        if strategy:
            self.strategies.strategy_spec(strategy)
        return chosen, books

    def apply_selection(self, playthrough_id: int, *, preset: str | None = None, lore: Iterable[str] = (),
                        strategy: str | None = None) -> list[str]:
        """Bind a preset and world books to a playthrough and apply a strategy (what `tavern chat
        --preset/--lore/--strategy` name; the playthrough remembers them, issue 5 §7). Every name
        is looked up before anything is bound, so an unknown one changes nothing.

        Args:
            preset: a preset id or name; lore: world book ids or names (bound as chat lore);
            strategy: a strategy name (its newest version).

        Returns:
            One note per change, in order, e.g. "bound preset Warm to playthrough 3 (remembered)".

        Raises:
            NotFound: an unknown preset, book, strategy or playthrough (the message lists the known ones).
        """
        chosen, books = self.check_selection(preset=preset, lore=lore, strategy=strategy)
        notes: list[str] = []
        if chosen is not None:
            self.presets.bind_preset(playthrough_id, chosen.id)
            notes.append(f"bound preset {chosen.name} to playthrough {playthrough_id} (remembered)")
        for book in books:
            self.lore.bind_world_book(book.id, "playthrough", playthrough_id)
            notes.append(f"bound world book {book.name} to playthrough {playthrough_id} (remembered)")
        if strategy:
            spec = self.strategies.apply_strategy(playthrough_id, strategy)
            notes.append(f"applied strategy {spec.name} v{spec.version} to playthrough {playthrough_id} (remembered)")
        return notes


def _persona_names(uow: Any) -> tuple[dict[int, str], int]:
    """({persona id: its document's name}, the default persona's id) in one read (`list_views.persona_names`)."""
    return persona_names([(persona_id, bool(is_default), uow.personas.current(principal).name)
                          for persona_id, principal, is_default, _data in uow.personas.personas()])
