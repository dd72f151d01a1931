"""Provides `Tavern`, the one facade every user operation goes through (CLI and TUI alike).

It wires the store (database), the engine (session log, step), the formats (card parsing), the
assembly (prompt) and a provider together, and returns plain dataclasses, never ORM objects.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tavern_tui.assembly.basic import BasicAssembler
from tavern_tui.assembly.preset import PresetAssembler, RolesFirstAssembler, SlotsFirstAssembler
from tavern_tui.text.names import substitute_names
from tavern_tui.assembly.sillytavern import AuthorsNote
from tavern_tui.assembly.sillytavern import chat_overrides_from_metadata, to_messages
from tavern_tui.assembly.strategies import COMPAT, PROJECTION, ROLES_FIRST, SLOTS_FIRST
from tavern_tui.text.tokens import estimate_messages, make_counter
from tavern_tui.config import Settings
from tavern_tui.engine.events import canonical_json
from tavern_tui.engine.log import (
    SYSTEM_PROMPT_SOURCE,
    SurfaceMessage,
    derive_messages,
    inspect,
    sent_to_model,
    tail,
)
from tavern_tui.engine.step import (
    CONTEXT_SOURCE,
    Generation,
    StepSettled,
    StepUpdate,
    admit_opening,
    context_events,
    recover_interrupted,
    run_step,
)
from tavern_tui.engine.stream import Provider
from tavern_tui.errors import FormatError, NotFound, SecretRefused, TavernError
from tavern_tui.formats.cards import ParsedCard, parse_card
from tavern_tui.formats.chatlog import CHAT_SUFFIXES, looks_like_chat_jsonl
from tavern_tui.formats.sniff import PERSONA, PRESET, WORLD_BOOK, sniff_bytes
from tavern_tui.assembly.worldinfo import timed_state_of
from tavern_tui.formats.worldinfo import parse_world_book, to_st_json
from tavern_tui.lore.fastindex import FastIndex
from tavern_tui.lore.matching import IndexCache, invalid_regex_keys
from tavern_tui.lore.model import WorldBook
from tavern_tui.store.repositories import CharacterRecord, PlaythroughRecord
from tavern_tui.service_chats import ChatFileOps
from tavern_tui.persona.model import LOCAL_PRINCIPAL
from tavern_tui.persona.safety import find_secrets
from tavern_tui.service_lore import LoreOps
from tavern_tui.service_persona import PersonaOps, render_snapshot
from tavern_tui.service_presets import PresetOps, strategy_of
from tavern_tui.service_timeline import TimelineOps
from tavern_tui.service_trace import TraceOps
from tavern_tui.store.store import Store
from tavern_tui.views import CharacterView, ImportResult, MessageView, PlaythroughView, WorldBookView

__all__ = ["CharacterView", "ImportResult", "MessageView", "PlaythroughView", "Tavern", "WorldBookView", "make_provider"]

logger = logging.getLogger(__name__)

CARD_SUFFIXES = (".png", ".json")
"""File types a folder import picks up."""


CHAT_SECRET_KINDS = ("api_key", "bearer_token", "private_key", "jwt")
"""Secret kinds (`persona.safety`) a chat message or edit is refused for unless the person says
`allow_secrets`. "password" is left out: "my password is swordfish" is ordinary fiction."""

MIN_CONFIGURED_KEY = 8
"""A configured API key shorter than this ("none", "ollama", "EMPTY") is not looked for verbatim
in messages: it would refuse ordinary words, and it is no credential worth guarding."""


def _did_you_mean(query: str, names: Sequence[str]) -> str:
    """The hint after "no X named Q": the closest stored names (case-insensitive, also names
    that contain Q, e.g. "Eldoria" for a book imported from eldoria_st_staging.json), or how to
    import one."""
    by_folded = {name.casefold(): name for name in names}
    wanted = query.casefold()
    close = [by_folded[n] for n in difflib.get_close_matches(wanted, list(by_folded), n=3, cutoff=0.6)]
    close += [name for folded, name in by_folded.items() if wanted and wanted in folded and name not in close]
    if close:
        return "did you mean " + " or ".join(repr(name) for name in close[:3]) + "?"
    return "import one with `tavern import FILE`"


def make_provider(settings: Settings) -> Provider:
    """The OpenAI-compatible adapter when an endpoint is configured, else the offline demo."""
    if settings.provider.base_url:
        from tavern_tui.providers.openai_compat import OpenAICompatProvider

        return OpenAICompatProvider(settings.provider)
    from tavern_tui.providers.demo import DemoProvider

    return DemoProvider()


def _unnamed_json(data: bytes) -> bool:
    """A JSON object without a `name`: no card importer could read it (a V1 card has one)."""
    try:
        obj = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError):
        return False
    return isinstance(obj, dict) and not ({"name", "char_name", "data"} & obj.keys())


def _iter_card_files(paths: Iterable[str | Path]) -> Iterable[tuple[str, Path | None]]:
    """(shown name, path) per file to import; a folder's own .png/.json/.jsonl files (not
    subfolders, as SillyTavern keeps characters in one flat folder); path None for an empty folder."""
    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.iterdir()
                           if p.is_file() and p.suffix.lower() in (*CARD_SUFFIXES, *CHAT_SUFFIXES))
            if not found:
                yield (str(given), None)
            yield from ((str(p), p) for p in found)
        else:
            yield (str(given), path)


@dataclass
class Tavern(TimelineOps, ChatFileOps, PresetOps, TraceOps, PersonaOps, LoreOps):
    """Every user operation: import, list, start/open a playthrough, send, read messages.

    Args:
        settings: database URL, provider endpoint, default user name.
        provider: overrides the provider chosen from settings (tests, demo).
        store: an already open store (tests); otherwise one is opened on `settings.db_url`.

    Raises:
        StoreError: the database cannot be opened or migrated.
    """

    settings: Settings
    provider: Provider | None = None
    store: Store | None = None
    _cards: dict[int, ParsedCard] = field(default_factory=dict, repr=False)
    _books: dict[tuple[int, str], WorldBook] = field(default_factory=dict, repr=False)
    _card_books: dict[int, WorldBook] = field(default_factory=dict, repr=False)
    _index_cache: IndexCache = field(default_factory=lambda: IndexCache(FastIndex), repr=False)
    _presets: dict[str, Any] = field(default_factory=dict, repr=False)
    _book_hashes: dict[int, str] = field(default_factory=dict, repr=False)
    _counts: dict[tuple[int, tuple[int, int]], int] = field(default_factory=dict, repr=False)
    _timelines: dict[tuple[int, bool], tuple[tuple[int, int], Any, list[int]]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._token_counter = make_counter(self.settings.tokenizer or None)
        if self.store is None:
            self.store = Store(self.settings.db_url)
        if self.provider is None:
            self.provider = make_provider(self.settings)

    @property
    def _store(self) -> Store:
        assert self.store is not None
        return self.store

    @property
    def _provider(self) -> Provider:
        assert self.provider is not None
        return self.provider

    @property
    def _stale_after(self) -> float:
        # A live stream checkpoints at least once per read timeout; quieter than this, it crashed.
        return self.settings.provider.timeout + 15.0

    @property
    def provider_label(self) -> str:
        """"<provider> · <model>" for status lines; never contains the API key."""
        model = getattr(self._provider, "model", "") or "default model"
        return f"{self._provider.name} · {model}"

    def close(self) -> None:
        """Close the database (the provider's HTTP client closes with `aclose_provider`)."""
        self._store.close()

    async def aclose_provider(self) -> None:
        """Close the provider's HTTP client, if it has one; call it on the loop that used it."""
        closer = getattr(self._provider, "aclose", None)
        if closer is not None:
            await closer()

    async def aclose(self) -> None:
        """Close the provider's HTTP client (if any) and the database."""
        await self.aclose_provider()
        self.close()

    # -- import ---------------------------------------------------------------------------

    def import_paths(self, paths: Sequence[str | Path], *, character: str | None = None) -> list[ImportResult]:
        """Import character cards, world books, presets, persona backups and SillyTavern chats
        (.jsonl) from files and folders (a folder: every .png/.json in it). What a file is comes
        from its content (`formats.sniff`, `formats.chatlog.looks_like_chat_jsonl`).

        Args:
            character: the character (id or name) imported chats are with; default: the
                name the chat file gives.

        Each file is parsed completely before anything is stored, and stored in one transaction,
        so a broken file stores nothing. Importing the same bytes again stores nothing new.

        Returns:
            One result per file, in order; failures carry `error` instead of raising.
        """
        results: list[ImportResult] = []
        for shown, path in _iter_card_files(paths):
            if path is None:
                results.append(ImportResult(shown, "character", error=f"{shown}: no .png, .json or .jsonl files in this folder"))
                continue
            if not path.exists():
                results.append(ImportResult(shown, "character", error=f"{shown}: no such file or folder"))
                continue
            try:
                data = path.read_bytes()
            except OSError as exc:
                results.append(ImportResult(shown, "character", error=f"{shown}: cannot read: {exc.strerror}"))
                continue
            if path.suffix.lower() in CHAT_SUFFIXES or looks_like_chat_jsonl(data):
                results.append(self.import_chat_bytes(data, shown, character=character))
            elif (kind := sniff_bytes(data)) == WORLD_BOOK:
                results.append(self.import_world_book_bytes(data, shown))
            elif kind == PRESET:
                results.append(self.import_preset_bytes(data, shown))
            elif kind == PERSONA:
                results.append(self.import_persona_bytes(data, shown))
            elif kind is None and _unnamed_json(data):
                results.append(ImportResult(shown, "unknown", error=(
                    f"{shown}: not a file tavern-tui knows: expected a character card, world book, chat-completion "
                    "preset, persona backup or SillyTavern chat (.jsonl)")))
            else:
                results.append(self.import_card_bytes(data, shown))
        return results

    def import_card_bytes(self, payload: bytes, name: str) -> ImportResult:
        """Import one card from bytes; `name` is used in messages and kept as the source name."""
        try:
            card = parse_card(payload, name)
        except FormatError as exc:
            return ImportResult(name, "character", error=str(exc))
        for warning in card.warnings:
            logger.info("%s: %s", name, warning)  # (the result carries it: each front end shows it)
        return self._store_import("character", "characters", name, payload, card.warnings, name=card.name,
                                  spec=card.spec, spec_version=card.spec_version, data=canonical_json(card.to_dict()))

    def import_world_book_bytes(self, payload: bytes, name: str) -> ImportResult:
        """Import one world book from bytes (any shape `formats.worldinfo` reads).

        The book is stored as SillyTavern World Info JSON plus the original bytes; the same
        bytes imported again store nothing new. A broken file stores nothing.
        """
        try:
            book = parse_world_book(payload, name)
        except FormatError as exc:
            return ImportResult(name, "world_book", error=str(exc))
        warnings = tuple(invalid_regex_keys(book))
        for warning in warnings:
            logger.info("%s: %s", name, warning)  # (the result carries it: each front end shows it)
        return self._store_import("world_book", "world_books", name, payload, warnings, name=book.name,
                                  data=canonical_json(to_st_json(book)))

    def _store_import(self, kind: str, repository: str, file: str, original: bytes, warnings: tuple[str, ...],
                      **fields: Any) -> ImportResult:
        """Store a parsed resource with its original bytes in one transaction; the same bytes
        imported again return the earlier record (`duplicate`) and store nothing."""
        digest = hashlib.sha256(original).hexdigest()
        with self._store.unit_of_work() as uow:
            repo = getattr(uow, repository)
            existing = repo.by_sha256(digest)
            if existing is not None:
                return ImportResult(file, kind, existing.id, existing.name, warnings=warnings, duplicate=True)
            record = repo.add(source_name=Path(file).name, original=original, original_sha256=digest, **fields)
        return ImportResult(file, kind, record.id, record.name, warnings=warnings)

    # -- characters -----------------------------------------------------------------------

    def _card(self, record: CharacterRecord) -> ParsedCard:
        card = self._cards.get(record.id)
        if card is None:
            card = ParsedCard.from_dict(json.loads(record.data))
            self._cards[record.id] = card
        return card

    def _character_view(self, record: CharacterRecord) -> CharacterView:
        card = self._card(record)
        book = card.character_book
        tags = card.data.get("tags") or []
        return CharacterView(record.id, record.name, record.spec, str(card.data.get("creator") or ""),
                             tuple(str(t) for t in tags), len(card.greetings),
                             len(book.get("entries", [])) if book else None, record.source_name, record.created_at,
                             str(card.data.get("description") or ""))

    def characters(self) -> list[CharacterView]:
        """Every imported character, by name."""
        with self._store.unit_of_work() as uow:
            records = uow.characters.all()
        return [self._character_view(r) for r in records]

    def character(self, character_id: int) -> CharacterView:
        """One character. Raises NotFound."""
        with self._store.unit_of_work() as uow:
            return self._character_view(uow.characters.get(character_id))

    def find_character(self, query: str) -> CharacterView:
        """A character by id ("3") or by name (case-insensitive; the newest import of that name).

        Raises:
            NotFound: nothing matches.
        """
        return self._character_view(self._find(query, "characters", "character"))

    def _find(self, query: str, repository: str, what: str) -> Any:
        """The record with id `query`, else the newest with that name (case-insensitive)."""
        with self._store.unit_of_work() as uow:
            repo = getattr(uow, repository)
            if query.strip().isdigit():
                try:
                    return repo.get(int(query))
                except NotFound:
                    pass
            matches = repo.by_name(query.strip())
            names = [] if matches else repo.names()
        if not matches:
            raise NotFound(f"no {what} named {query!r}; " + _did_you_mean(query.strip(), names))
        return matches[0]

    # -- playthroughs ---------------------------------------------------------------------

    def _playthrough_view(self, record: PlaythroughRecord, names: dict[int, str], counts: dict[int, int],
                          persona_name: str = "") -> PlaythroughView:
        # The persona's name is `{{user}}` in every playthrough once the person has set one.
        return PlaythroughView(record.id, record.character_id, names.get(record.character_id, "?"),
                               persona_name or record.user_name,
                               record.head_session_id, record.created_at, record.updated_at,
                               counts.get(record.head_session_id, 0), record.strategy or "compat", record.preset_id)

    def playthroughs(self, character_id: int | None = None, limit: int | None = None) -> list[PlaythroughView]:
        """Playthroughs, most recently played first."""
        with self._store.unit_of_work() as uow:
            records = uow.playthroughs.list(character_id, limit)
            names = {c.id: c.name for c in uow.characters.all()}
            persona_name = uow.personas.current(LOCAL_PRINCIPAL).name
        counts = {r.head_session_id: self._message_count(r.head_session_id) for r in records}
        return [self._playthrough_view(r, names, counts, persona_name) for r in records]

    def _message_count(self, head_session_id: int) -> int:
        """Messages on a head session's surface, cached until the next append or fork (every
        operation reads its playthrough, and counting a 5,000-message chat takes milliseconds)."""
        version = self._store.events.version()
        key = (head_session_id, version)
        if key not in self._counts:
            if len(self._counts) > 256:
                self._counts.clear()
            self._counts[key] = self._store.events.count_messages(head_session_id)
        return self._counts[key]

    def playthrough(self, playthrough_id: int) -> PlaythroughView:
        """One playthrough. Raises NotFound."""
        with self._store.unit_of_work() as uow:
            record = uow.playthroughs.get(playthrough_id)
            name = uow.characters.get(record.character_id).name
            persona_name = uow.personas.current(LOCAL_PRINCIPAL).name
        counts = {record.head_session_id: self._message_count(record.head_session_id)}
        return self._playthrough_view(record, {record.character_id: name}, counts, persona_name)

    def latest_playthrough(self, character_id: int) -> PlaythroughView | None:
        """The character's most recently played playthrough, or None."""
        found = self.playthroughs(character_id, limit=1)
        return found[0] if found else None

    def new_playthrough(self, character_id: int, *, user_name: str | None = None) -> PlaythroughView:
        """Start a playthrough: a new session opened with the card's greeting as an opening
        reference (role assistant, origin engine; seed 000 §3). A card without a greeting opens
        empty. The persona revision is pinned and `settings.default_strategy` applied
        (preset-slots-first unless configured).

        Raises:
            NotFound: no such character.
        """
        user = user_name or self.persona().name or self.settings.user_name
        self.rendered_persona()  # over a cap, the session does not open (PersonaCapExceeded)
        with self._store.unit_of_work() as uow:
            record = uow.characters.get(character_id)
        card = self._card(record)
        log = self._store.events
        session_id = log.create_session()
        greetings = card.greetings
        if greetings and greetings[0].strip():
            text = substitute_names(greetings[0], card.name, user)
            admit_opening(log, session_id, text, {"greeting_index": 0, "greetings": len(greetings)})
        with self._store.unit_of_work() as uow:
            created = uow.playthroughs.add(character_id=character_id, title="", user_name=user, session_id=session_id)
        self._pin_persona(created.id)
        self.apply_strategy(created.id, self.settings.default_strategy)  # seed 000 §2.1: new openings
        return self.playthrough(created.id)

    def open_playthrough(self, playthrough_id: int) -> PlaythroughView:
        """Open a playthrough for play: settles a reply a crash left mid-stream, then returns it.

        Raises:
            NotFound: no such playthrough.
            PersonaCapExceeded: the persona is over a cap (the session does not open).
        """
        view = self.playthrough(playthrough_id)
        self.rendered_persona(playthrough_id)
        if recover_interrupted(self._store.events, view.session_id, stale_after=self._stale_after) is not None:
            logger.info("recovered an interrupted reply in playthrough %s", playthrough_id)
        return view

    def _message_view(self, message: SurfaceMessage, char: str, user: str) -> MessageView:
        origin = message.effective_origin
        if message.role == "user":
            speaker = user
        elif message.role == "assistant":
            speaker = char
        else:
            speaker = "System"
        error = message.body.get("error")
        error = error if isinstance(error, dict) else {}
        return MessageView(message.ref, message.role, origin.value if origin else "engine", message.origin is None,
                           message.kind, message.source, message.content, speaker, message.created_at,
                           str(message.body.get("reasoning") or ""), message.partial,
                           str(error["message"]) if "message" in error else None,
                           str(error["category"]) if "category" in error else None)

    def messages(self, playthrough_id: int, *, include_system: bool = False,
                 last: int | None = None) -> list[MessageView]:
        """The playthrough's messages in order (its head session's surface), including replies
        that failed before any text arrived (`partial`, with `error`), which the model never sees.

        Args:
            include_system: also return the system section sent to the model (hidden in the chat).
            last: only the newest `last` messages, read with one bounded query (`engine.log.tail`);
                the system section is never among them.
        """
        view = self.playthrough(playthrough_id)
        if last is not None:
            log = self._store.events
            recent = tail(log, inspect(log, view.session_id), last, include_failed=True)
            return [self._message_view(m, view.character_name, view.user_name) for m in recent]
        surface = derive_messages(self._store.events, view.session_id, include_failed=True)
        return [self._message_view(m, view.character_name, view.user_name) for m in surface
                if include_system or m.source != SYSTEM_PROMPT_SOURCE]

    def estimate_tokens(self, playthrough_id: int) -> int:
        """Estimated prompt tokens of the next request without new input (the status line
        figure): the total of `preview`, i.e. the same assembly a step runs (strategy, preset,
        world info, persona), so the status line, the strategy pane and the trace agree.

        Raises:
            TavernError: as `preview` (no such playthrough, a persona over its cap, …).
        """
        return int(self.preview(playthrough_id)["tokens"]["total"])

    def _assembler(self, playthrough_id: int, generation: Generation, strategy: str | None = None,
                   view: PlaythroughView | None = None, *, pin_persona: bool = False) -> Any:
        """The assembler a step of this playthrough uses: its applied strategy (`strategy`
        overrides it, for previews), with its card, books, timed effects, preset and persona
        section (`view`: the playthrough when the caller has already read it; `pin_persona`: a
        real step, which moves the playthrough's persona pin to the revision it sends).

        Raises:
            PersonaCapExceeded: the persona is over a cap.
        """
        view = view or self.playthrough(playthrough_id)
        with self._store.unit_of_work() as uow:
            record = uow.characters.get(view.character_id)
            playthrough = uow.playthroughs.get(playthrough_id)
        spec = self.strategy_spec(strategy) if strategy else strategy_of(playthrough)
        card = self._card(record)
        books = self._effective_books(view.id, record, card)
        timed = timed_state_of(self._store.events.surface_events(view.session_id))
        meta: dict[str, Any] = {
            "character_id": record.id, "character_sha256": record.original_sha256, "playthrough_id": playthrough_id,
            "world_books": [{"name": b.book.name, "source": b.source, "entries": len(b.book.entries),
                             "sha256": self._book_hash(b.book, record)} for b in books]}
        persona, meta["persona"] = self._persona_step(playthrough_id, pin=pin_persona, meta=playthrough.meta)
        memory = (substitute_names(render_snapshot(self.memory_snapshot()), card.name, view.user_name)
                  if self.settings.memory_snapshot else "")
        facts = self._facts(record, card, view.user_name)
        meta["strategy_snapshot"] = spec.snapshot()
        if spec.base != COMPAT:
            preset, preset_facts = self.playthrough_preset(playthrough_id)
            meta["preset"] = preset_facts
            kind = {PROJECTION: PresetAssembler, SLOTS_FIRST: SlotsFirstAssembler,
                    ROLES_FIRST: RolesFirstAssembler}[spec.base]
            stored = json.loads(playthrough.meta or "{}")
            header = stored.get("header") if isinstance(stored, dict) else None
            chat_metadata = header.get("chat_metadata") if isinstance(header, dict) else None
            return kind(preset, card.data, card.name, view.user_name, meta, world_info=self._world_info(books),
                        facts=facts, timed_state=timed, generation_type=generation.type,
                        continue_text=generation.continue_text, persona=persona, options=dict(spec.options),
                        snapshot=spec.snapshot(), authors_note=AuthorsNote.from_chat_metadata(chat_metadata),
                        chat_overrides=chat_overrides_from_metadata(chat_metadata), count=self._token_counter,
                        memory=memory)
        config: dict[str, Any] = {}
        if playthrough.preset_id is not None:  # a bound preset's parameters apply whatever the strategy
            preset, meta["preset"] = self.playthrough_preset(playthrough_id)
            config = preset.call_config()
        return BasicAssembler(card.data, card.name, view.user_name, meta, self._world_info(books), facts, timed,
                              generation.type, config, persona, memory)

    def preview(self, playthrough_id: int, text: str = "", *, strategy: str | None = None) -> dict[str, Any]:
        """The exact request the next step would send if `text` were sent now (seed 000: the
        same code path as a step, no provider call, nothing stored).

        Returns:
            `{"strategy", "messages": [{"role", "content", "source"}], "config", "tokens",
            "adjustments", "world_info"}`; `tokens` are estimates per source and in total.

        Raises:
            NotFound: unknown strategy (the message lists them), or no such playthrough.
        """
        view = self.playthrough(playthrough_id)
        assembler = self._assembler(playthrough_id, Generation(), strategy, view)
        history = derive_messages(self._store.events, view.session_id)
        claimed = [text] if text else []
        if getattr(assembler, "strategy", None) == PROJECTION:
            built, meta, _records = assembler.build(history, claimed)
            messages = [{**m, "source": p.source} for m, p in zip(to_messages(built.parts), built.parts)]
            config = assembler.preset.call_config()
            tokens = {**built.tokens, "total": sum(built.tokens.values())}
        else:
            assembly = assembler(history, claimed)
            meta, config = assembly.meta, assembly.config
            messages = ([{"role": "system", "content": assembly.system, "source": "system"}] if assembly.system else [])
            messages += [{**m.to_request(), "source": "context" if m.source == CONTEXT_SOURCE else "history"}
                         for m in history if m.source != SYSTEM_PROMPT_SOURCE and sent_to_model(m)]
            # Context the step would admit now, just before the input (roles-first).
            messages += [{"role": "user", "content": e.body["content"], "source": "context"}
                         for e in context_events(history, assembly.context)]
            messages += [{"role": "user", "content": t, "source": "input"} for t in claimed]
            tokens = {"total": estimate_messages(messages)}
        return {"strategy": meta.get("strategy", "compat"), "strategy_snapshot": meta.get("strategy_snapshot"),
                "persona": meta.get("persona"), "messages": messages, "config": config, "tokens": tokens,
                "adjustments": meta.get("adjustments", []), "world_info": meta.get("world_info")}

    def _configured_keys(self) -> set[str]:
        """The provider API keys configured (settings, and the provider's own), long enough to look for."""
        keys = {self.settings.provider.api_key, getattr(getattr(self._provider, "settings", None), "api_key", "")}
        return {k.strip() for k in keys if isinstance(k, str) and len(k.strip()) >= MIN_CONFIGURED_KEY}

    def check_message(self, text: str, *, allow_secrets: bool = False, where: str = "message",
                      already: str = "") -> None:
        """Return None when the person's `text` may be stored and sent; `send` and `edit_message`
        call it before anything is written, and a surface may call it first to keep the text.

        Rule: API keys never reach the database, the trace, logs or the screen (seed 002 decision 11).

        Args:
            allow_secrets: the person confirmed: secret-looking text (`CHAT_SECRET_KINDS`) passes;
                the configured provider API key never does.
            where: names the surface in the message ("message", "edit").
            already: text already stored (the message being edited); a secret-looking string it
                holds is not refused again.

        Raises:
            SecretRefused: `configured` when `text` holds the configured provider API key verbatim;
                else `overridable` for the first `CHAT_SECRET_KINDS` finding. The message names
                the kind, never the secret.
        """
        if any(key in text for key in self._configured_keys()):
            raise SecretRefused("api_key", where, configured=True,
                                advice="it is never stored or sent to the model (remove it)")
        if allow_secrets:
            return
        for finding in find_secrets(text, CHAT_SECRET_KINDS):
            if text[finding.start:finding.end] not in already:
                raise SecretRefused(finding.kind, where, overridable=True,
                                    advice="nothing was stored or sent (remove it, or allow it explicitly)")

    async def send(self, playthrough_id: int, text: str, *, allow_secrets: bool = False) -> AsyncIterator[StepUpdate]:
        """Send the person's text and stream the reply (one engine step on the head session).

        Args:
            allow_secrets: the person confirmed a secret-looking text (`check_message`).

        Yields:
            `StepStarted`, `TextDelta`/`ReasoningDelta`…, `StepSettled` (engine.step).

        Raises:
            TavernError: empty text.
            SecretRefused: the text holds the configured API key, or a secret without
                `allow_secrets` (`check_message`); nothing is stored or sent.
            StepBusy: another process is replying in this playthrough right now.
            StepFailed: the provider failed or the stream was cut; the partial reply is kept as an attempt.
            asyncio.CancelledError: cancelled by the caller; the partial reply is kept first.
        """
        if not text.strip():
            raise TavernError("nothing to send: the message is empty")
        self.check_message(text, allow_secrets=allow_secrets)
        async with aclosing(self._step(playthrough_id, text, Generation())) as steps:
            async for update in steps:
                yield update

    async def _step(self, playthrough_id: int, text: str | None, generation: Generation) -> AsyncIterator[StepUpdate]:
        """One engine step on the playthrough's head session (send, regenerate, continue, impersonate)."""
        view = self.playthrough(playthrough_id)
        with self._store.unit_of_work() as uow:
            uow.playthroughs.touch(playthrough_id)
        # Off the event loop: the assembler reads (and on first use parses) the books, and the
        # step's world info needs the key indexes, which the chat's warm-up (a worker thread) may
        # hold for a while on a big book. The screen keeps answering (and keeps what is typed).
        assembler = await asyncio.to_thread(self._assembler, playthrough_id, generation, view=view, pin_persona=True)
        await asyncio.to_thread(self._index_cache.wait_free)
        # aclosing: if our caller closes this generator, the step settles its attempt now, not at GC.
        steps = run_step(self._store.events, view.session_id, self._provider, assembler, text,
                         generation=generation, stale_after=self._stale_after)
        async with aclosing(steps):
            async for update in steps:
                if isinstance(update, StepSettled):
                    await self._consolidate_quietly(playthrough_id)
                yield update

    async def _consolidate_quietly(self, playthrough_id: int) -> None:
        """Learn from what the person just said, off the event loop (the UI's thread); a failure
        is logged, never fails the step it follows. The model extractor runs only when
        configured and the provider is a real model."""
        try:
            if self.settings.belief_extractor == "model" and not getattr(self._provider, "placeholder", False):
                await self.consolidate_with_model(playthrough_id)
            else:
                await asyncio.to_thread(self.consolidate, playthrough_id)
        except Exception:  # noqa: BLE001 - learning is best effort; the reply is already stored
            logger.exception("belief consolidation failed for playthrough %s", playthrough_id)
