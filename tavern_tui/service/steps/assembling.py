"""Provides `Assembling`: the assembler a step of a playthrough uses (its strategy, card, books,
timed effects, preset, persona section, macros, regex scripts and templates), and what every
build reads: the session's surface (cached per version of the log) and the claimed batch.

Rules: seed 000 (a preview builds with the same code as a step); a group chat reads every
member's character lore and, in join mode, every member's card fields (SillyTavern
`getCharacterLore`); the macros follow SillyTavern's chat metadata (`{{pick}}` seed, author's note).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from tavern_tui.assembly.basic import BasicAssembler, with_memory
from tavern_tui.assembly.macros.engine import MacroContext
from tavern_tui.assembly.macros.mvu_macros import tavern_helper_variables
from tavern_tui.assembly.memo import per_list
from tavern_tui.assembly.preset import PresetAssembler, RolesFirstAssembler, SlotsFirstAssembler, omit_notes
from tavern_tui.assembly.scripted import ScriptedAssembler
from tavern_tui.assembly.sillytavern import AuthorsNote, chat_overrides_from_metadata
from tavern_tui.assembly.strategies import COMPAT, PROJECTION, ROLES_FIRST, SLOTS_FIRST
from tavern_tui.assembly.worldinfo import timed_state_of
from tavern_tui.engine.log import SUMMARY_SOURCE, surface_of
from tavern_tui.engine.step import ContextRefresh, ContextSnapshot, Generation
from tavern_tui.scripts.regex_scripts import ScriptSet
from tavern_tui.service.compaction import CompactionService
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.groups import group_setting, joined_card
from tavern_tui.service.inbox import InboxService
from tavern_tui.service.library import LibraryService
from tavern_tui.service.lore import WorldInfoService
from tavern_tui.service.mvu import MvuService
from tavern_tui.service.persona import PersonaService, render_snapshot
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.presets import PresetService, omitted_parameters, strategy_of
from tavern_tui.service.roleplay import roleplay_policy
from tavern_tui.service.scripts import ScriptService
from tavern_tui.service.strategies import StrategyService
from tavern_tui.service.timeline import TimelineService
from tavern_tui.service.variables import VariableService
from tavern_tui.store.records import PlaythroughRecord
from tavern_tui.text.names import substitute_names
from tavern_tui.views import PlaythroughView


def _chat_id(playthrough_id: int, stored: Any) -> str:
    """The chat id `{{pick}}` hashes (ST: `chat_metadata.main_chat ?? getCurrentChatId()`, the chat
    file's name without `.jsonl`): an imported chat's, else "playthrough-N"."""
    header = stored.get("header") if isinstance(stored, dict) else None
    metadata = header.get("chat_metadata") if isinstance(header, dict) else None
    main = metadata.get("main_chat") if isinstance(metadata, dict) else None
    if isinstance(main, str) and main:
        return main
    source = stored.get("source") if isinstance(stored, dict) else None
    if isinstance(source, str) and source:
        return source[:-6] if source.endswith(".jsonl") else source
    return f"playthrough-{playthrough_id}"


def _with_chat_metadata(macros: MacroContext, chat_metadata: dict[str, Any]) -> None:
    """ST's {{pick}} seed (the chat's cached chat_id_hash and /reroll-pick seed, when it has them)
    and `{{authorsNote}}` (authors-note.js) from the chat's metadata."""
    cached = chat_metadata.get("chat_id_hash")
    if isinstance(cached, (int, float)) and not isinstance(cached, bool):
        macros.chat_id_hash = int(cached)
    macros.pick_reroll_seed = chat_metadata.get("pick_reroll_seed") or None
    note = chat_metadata.get("note_prompt")
    macros.authors_note = note if isinstance(note, str) else ""


@dataclass
class _Inputs:
    """What `Assembling.assembler_for` read, handed to the assembler it builds."""

    view: PlaythroughView
    playthrough: PlaythroughRecord
    generation: Generation
    card: Any
    card_data: dict[str, Any]
    books: list[Any]
    lore_settings: Any
    timed: Any
    chat_metadata: Any
    limit: Any
    group: Any
    macros: MacroContext | None
    meta: dict[str, Any]
    persona: Any
    memory: str
    facts: Any
    policy: str


class Assembling:
    """The assembler of a step (`StepRunner` and its previews build with it).

    Args:
        ctx: the shared settings, store and provider.
        library, playthroughs, lore, persona, presets, strategies: what an assembler reads
            (card, playthrough, books, persona section, preset, strategy).
        timeline: the swipe ids the macros read.
        variables: the macro variables a step starts from (None: a fresh context).
        compaction: the context limit every request fits.
        inbox: the queued batch a step claims (None: none).
        mvu: MVU state bound as the macros' message variables (None: no MVU state).
        scripts: the character's regex scripts (None: none).
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService, playthroughs: PlaythroughService,
                 lore: WorldInfoService, persona: PersonaService, presets: PresetService,
                 strategies: StrategyService, timeline: TimelineService, variables: VariableService | None,
                 compaction: CompactionService, *, inbox: InboxService | None = None, mvu: MvuService | None = None,
                 scripts: ScriptService | None = None) -> None:
        self.ctx = ctx
        self.library = library
        self.playthroughs = playthroughs
        self.lore = lore
        self.persona = persona
        self.presets = presets
        self.strategies = strategies
        self.timeline = timeline
        self.variables = variables
        self.compaction = compaction
        self.inbox = inbox
        self.mvu = mvu
        self.scripts = scripts
        self._surface_cache: tuple[tuple[int, tuple[int, int]], list[Any]] | None = None
        self._derived: tuple[list[Any], list[Any]] | None = None  # (the events list, its surface)

    # -- what every build reads -------------------------------------------------------------

    def batch(self, playthrough_id: int, text: str) -> list[str]:
        """What the next step would claim if `text` were sent now: the pending queue (steers
        first), then `text` (seed 000 §5: world info scans history plus the claimed batch)."""
        queued = [item.text for item in self.inbox.pending(playthrough_id)] if self.inbox is not None else []
        return queued + ([text] if text else [])

    def surface_events(self, session_id: int) -> list[Any]:
        """The session's surface events, re-read only when the log changed (`EventLog.version`):
        a preview, the gauge and a step's opening read the same 5,000-message surface in turn."""
        log = self.ctx.store.events
        version = log.version() if hasattr(log, "version") else None
        cached = self._surface_cache
        if version is not None and cached is not None and cached[0] == (session_id, version):
            return cached[1]
        snapshot = getattr(log, "surface_snapshot", None)
        events = snapshot(session_id) if snapshot is not None else log.surface_events(session_id)
        if version is not None:
            self._surface_cache = ((session_id, version), events)
        return events

    def surface(self, session_id: int) -> list[Any]:
        """`surface_of` the cached surface events (derived once per version of the log). The
        list is shared: callers must not change it."""
        events = self.surface_events(session_id)
        derived = self._derived
        if derived is not None and derived[0] is events:
            return derived[1]
        surface = per_list(events, "surface_of", lambda: surface_of(events))  # MVU's head derives it too
        self._derived = (events, surface)
        return surface

    def _swipe_ids(self, playthrough_id: int, generation_type: str = "normal") -> tuple[int | None, int | None]:
        """(`{{lastSwipeId}}`, `{{currentSwipeId}}`) of the chat's last message (chat-macros.js: its
        swipe count and 1-based swipe index), None for a message without swipes (the person's).
        While a swipe is generated, SillyTavern's last message is the reply being swiped, its
        `swipe_id` one past its swipes: (the replies there are, that number + 1)."""
        if generation_type == "swipe":  # the head is the fork before the reply (`Forks.for_regenerate`)
            timeline, _members = self.timeline.variant_tree(playthrough_id)
            last = self.timeline.last_visible(timeline)
            siblings = timeline.roots if last is None else timeline.variants[last].children
            count = sum(1 for ref in siblings if timeline.variants[ref].row.role == "assistant")
            return (count, count + 1) if count else (None, None)
        state = self.timeline.swipe_state(playthrough_id)
        if state.ref is None or not (state.greeting or state.can_generate):
            return None, None
        return state.position[1], state.position[0]

    # -- the assembler ------------------------------------------------------------------------

    def assembler(self, playthrough_id: int, generation: Generation, strategy: str | None = None,
                  view: PlaythroughView | None = None, *, pin_persona: bool = False,
                  pending: Sequence[str] = (), playthrough: PlaythroughRecord | None = None,
                  chat: Sequence[int] | None = None) -> Any:
        """`base_assembler` with the character's regex scripts and the templates around it (issue 18).
        `pending`: the person's messages the step sends (MVU applies their commands before the request).
        `playthrough` and `chat`: selections a preview changed in memory (`assembler_for`), so a
        preview with another preset or book shows the request a step would send with them."""
        view = view or self.playthroughs.playthrough(playthrough_id)
        playthrough = playthrough or self.ctx.playthrough_record(playthrough_id)
        record = self.ctx.character_record(view.character_id)
        bound = self.mvu.bound(playthrough_id, pending) if self.mvu is not None else None
        snapshot = bound.snapshot if bound is not None else None
        inner = self.assembler_for(view, playthrough, generation, strategy, pin_persona=pin_persona, record=record,
                                   message_vars=snapshot, chat=chat)
        scripts = self.scripts.script_set(view.character_id, record) if self.scripts is not None else ScriptSet()
        # Templates read MVU's bound snapshot first (`getvar('stat_data.…')`), as macros do.
        return ScriptedAssembler(inner, scripts, templates=self.ctx.settings.templates, message_vars=snapshot,
                                 message_texts=bound.texts if bound is not None else {},
                                 mvu_facts=bound.facts if bound is not None else None)

    def base_assembler(self, playthrough_id: int, generation: Generation, strategy: str | None = None,
                       view: PlaythroughView | None = None, *, pin_persona: bool = False,
                       message_vars: dict[str, Any] | None = None) -> Any:
        """The assembler a step of this playthrough uses: its applied strategy (`strategy`
        overrides it, for previews), with its card, books, timed effects, preset and persona
        section (`view`: the playthrough when the caller has already read it; `pin_persona`: a
        real step, which moves the playthrough's persona pin to the revision it sends).

        Raises:
            PersonaCapExceeded: the persona is over a cap.
        """
        view = view or self.playthroughs.playthrough(playthrough_id)
        with self.ctx.store.unit_of_work() as uow:
            playthrough = uow.playthroughs.get(playthrough_id)
        return self.assembler_for(view, playthrough, generation, strategy, pin_persona=pin_persona,
                                  message_vars=message_vars)

    def assembler_for(self, view: PlaythroughView, playthrough: PlaythroughRecord, generation: Generation,
                      strategy: str | None = None, *, pin_persona: bool = False,
                      chat: Sequence[int] | None = None, record: Any = None,
                      message_vars: dict[str, Any] | None = None) -> Any:
        """`assembler` on selections given as a record: a stored playthrough's, one a preview
        changed in memory (`service.selection`), or an opening draft's (`view.session_id` 0: no
        session, so no timed effects and no local variables). `chat`: the chat-lore book ids
        to use instead of the playthrough's bindings.

        Raises:
            PersonaCapExceeded: the persona is over a cap. NotFound: an unknown strategy or preset.
        """
        playthrough_id = playthrough.id
        if record is None:  # `record`: the character's record, when the caller has just read it
            with self.ctx.store.unit_of_work(write=False) as uow:
                record = uow.characters.get(view.character_id)
        spec = self.strategies.strategy_spec(strategy) if strategy else strategy_of(playthrough)
        card = self.library.card(record)
        group, books, card_data = self._cast(view, playthrough, record, card, chat)
        limit = self.compaction.limit_for_preset(playthrough.preset_id)
        lore_settings = self.lore_settings(limit)
        events = self.surface_events(view.session_id) if view.session_id else []
        timed = per_list(events, "steps.timed_state", lambda: timed_state_of(events))
        # The variables the step starts from (issue 17); the assembler stages what its macros change.
        stored = json.loads(playthrough.meta or "{}")
        header = stored.get("header") if isinstance(stored, dict) else None
        chat_metadata = header.get("chat_metadata") if isinstance(header, dict) else None
        macros = self._macros(view, playthrough_id, stored, chat_metadata, generation, card, group, message_vars)
        meta: dict[str, Any] = {
            "character_id": record.id, "character_sha256": record.original_sha256,
            "character_revision": record.revision, "playthrough_id": playthrough_id,
            "world_books": [{"name": b.book.name, "source": b.source, "entries": len(b.book.entries),
                             "sha256": self.lore.book_hash(b.book, record)} for b in books]}
        persona, meta["persona"] = self.persona.persona_step(playthrough_id, pin=pin_persona and playthrough_id > 0,
                                                             meta=playthrough.meta)
        inputs = _Inputs(view, playthrough, generation, card, card_data, books, lore_settings, timed, chat_metadata,
                         limit, group, macros, meta, persona,
                         memory=self.memory_text(meta["persona"]["persona"], card.name, view.user_name),
                         facts=self.lore.facts(record, card, view.user_name),
                         policy=roleplay_policy(self.ctx.settings, playthrough.meta))  # "" while OOC talk is on
        meta["strategy_snapshot"] = spec.snapshot()
        if spec.base != COMPAT:
            return self._preset_assembler(spec, inputs)
        return self._compat_assembler(inputs)

    def lore_settings(self, limit: Any) -> Any:
        """The world-info settings of a request with context `limit` (`CompactionService.limit_for_preset`):
        the budget is a share of this request's context (ST: % of max context); with nothing said
        anywhere, the `[world_info]` table's max_context (default 4095) stays."""
        world_info = self.ctx.settings.world_info
        return world_info if limit.source == "default" else replace(world_info, max_context=limit.max_context)

    def step_lore(self, view: PlaythroughView, playthrough: PlaythroughRecord, record: Any,
                  card: Any) -> tuple[list[Any], Any]:
        """(the books a step of this playthrough scans, its world-info settings): the world-book
        tester previews with exactly what a step uses (a group's other members' books, the preset's,
        the budget from the context the endpoint reports)."""
        _group, books, _card_data = self._cast(view, playthrough, record, card, None)
        return books, self.lore_settings(self.compaction.limit_for_preset(playthrough.preset_id))

    def _cast(self, view: PlaythroughView, playthrough: PlaythroughRecord, record: Any, card: Any,
              chat: Sequence[int] | None) -> tuple[Any, list[Any], dict[str, Any]]:
        """(the group setting or None, the books that apply, the card fields `{{char}}` reads). A group
        chat: every member's character lore applies (SillyTavern `getCharacterLore`), and in join mode
        every member's card fields are joined, one per line."""
        group = self.ctx.per_version(("group-setting", playthrough.id), lambda: self._group(playthrough.id))
        others = [(member, self.library.card(member)) for member, _muted in (group.members if group else ())
                  if member.id != record.id]
        books = self.lore.effective_books(view.id, record, card, chat, preset_id=playthrough.preset_id, also=others)
        card_data = card.data
        if group is not None and group.mode:  # join: every member's card fields, one per line
            cards = {record.id: card.data, **{member.id: parsed.data for member, parsed in others}}
            card_data = {**card.data, **joined_card(group, record.id, cards, view.user_name)}
        return group, books, card_data

    def _group(self, playthrough_id: int) -> Any:
        with self.ctx.store.unit_of_work(write=False) as uow:
            return group_setting(uow, playthrough_id)

    def _macros(self, view: PlaythroughView, playthrough_id: int, stored: Any, chat_metadata: Any,
                generation: Generation, card: Any, group: Any,
                message_vars: dict[str, Any] | None) -> MacroContext | None:
        """The macro context the step starts from (issue 17); None without the variables service. An
        opening draft has no chat yet: its globals only."""
        if self.variables is None:
            return None
        macros = (self.variables.macro_context(view.session_id, _chat_id(playthrough_id, stored))
                  if view.session_id else MacroContext(global_vars=self.variables.global_variables()))
        if isinstance(chat_metadata, dict):
            _with_chat_metadata(macros, chat_metadata)
        if view.session_id:
            self._session_macros(macros, view, playthrough_id, generation, message_vars)
        # Tavern Helper's character variables, `{{get_character_variable::…}}`
        macros.character_vars = tavern_helper_variables(card.data.get("extensions"))
        if group is not None:  # a group chat: `{{group}}`, `{{notChar}}` …
            macros.group, macros.group_not_muted = group.cast.group(), group.cast.not_muted()
            macros.not_char = group.cast.not_char(card.name, view.user_name)
        return macros

    def _session_macros(self, macros: MacroContext, view: PlaythroughView, playthrough_id: int,
                        generation: Generation, message_vars: dict[str, Any] | None) -> None:
        """The macros a chat's session gives: `{{summary}}` (Summarize extension: the newest summary's
        text), the swipe ids (read on use only) and MVU's bound snapshot (issue 18)."""
        surface = self.surface(view.session_id)
        macros.summary = per_list(surface, "steps.newest_summary", lambda: next(
            (m.content for m in reversed(surface) if getattr(m, "source", None) == SUMMARY_SOURCE), ""))
        memo: list[tuple[int | None, int | None]] = []

        def swipe_ids(gen_type: str = generation.type) -> tuple[int | None, int | None]:
            if not memo:
                memo.append(self._swipe_ids(playthrough_id, gen_type))
            return memo[0]

        macros.lazy = {"last_swipe_id": lambda: swipe_ids()[0], "current_swipe_id": lambda: swipe_ids()[1]}
        if self.mvu is not None:
            macros.message_vars = message_vars if message_vars is not None else self.mvu.snapshot(playthrough_id, view)

    def _preset_assembler(self, spec: Any, inputs: _Inputs) -> Any:
        """The assembler of a preset strategy (projection, slots-first, roles-first) on `inputs`."""
        preset, preset_facts = self.presets.preset_of(inputs.playthrough.preset_id)
        inputs.meta["preset"] = preset_facts
        if inputs.macros is not None:
            inputs.macros.preset_vars = tavern_helper_variables(preset.settings.get("extensions"))
        kind = {PROJECTION: PresetAssembler, SLOTS_FIRST: SlotsFirstAssembler,
                ROLES_FIRST: RolesFirstAssembler}[spec.base]
        generation, chat_metadata = inputs.generation, inputs.chat_metadata
        return kind(preset, inputs.card_data, inputs.card.name, inputs.view.user_name, inputs.meta,
                    omit=omitted_parameters(inputs.playthrough),
                    world_info=self.lore.world_info_step(inputs.books, settings=inputs.lore_settings),
                    facts=inputs.facts, timed_state=inputs.timed, generation_type=generation.type,
                    continue_text=generation.continue_text, persona=inputs.persona, options=dict(spec.options),
                    snapshot=spec.snapshot(), authors_note=AuthorsNote.from_chat_metadata(chat_metadata),
                    chat_overrides=chat_overrides_from_metadata(chat_metadata), count=self.ctx.token_counter,
                    memory=inputs.memory, macros=inputs.macros, limit=inputs.limit, policy=inputs.policy,
                    group=inputs.group is not None)

    def _compat_assembler(self, inputs: _Inputs) -> Any:
        """The compat strategy's assembler on `inputs`; a bound preset's parameters apply whatever
        the strategy."""
        config: dict[str, Any] = {}
        playthrough = inputs.playthrough
        if playthrough.preset_id is not None:
            preset, inputs.meta["preset"] = self.presets.preset_of(playthrough.preset_id)
            omit = omitted_parameters(playthrough)
            config = {k: v for k, v in preset.call_config().items() if k not in omit}
            inputs.meta["adjustments"] = preset.config_notes() + omit_notes(omit)
        return BasicAssembler(inputs.card_data, inputs.card.name, inputs.view.user_name, inputs.meta,
                              self.lore.world_info_step(inputs.books, settings=inputs.lore_settings), inputs.facts,
                              inputs.timed, inputs.generation.type, config, inputs.persona, inputs.memory,
                              inputs.macros, inputs.limit, self.ctx.token_counter, policy=inputs.policy)

    # -- the runtime context ------------------------------------------------------------------

    def memory_text(self, persona_id: int | None, char: str, user: str) -> str:
        """The persona's memory snapshot as sent (names filled in); "" when the setting is off or
        nothing is remembered."""
        if not self.ctx.settings.memory_snapshot:
            return ""
        return substitute_names(render_snapshot(self.persona.memory_snapshot(persona=persona_id)), char, user)

    def context_refresh(self, assembler: Any) -> ContextRefresh | None:
        """What the step's refresh stage calls to re-read the runtime context before admission
        (seed 000 §1 `refreshContext()`): the memory snapshot, the one runtime fact that can change
        between the build and admission (belief learning of another step), read again off the loop.
        None when memory is not sent (nothing to re-read)."""
        if not self.ctx.settings.memory_snapshot:
            return None
        persona = (assembler.meta.get("persona") or {}).get("persona")

        async def refresh(proposed: ContextSnapshot) -> ContextSnapshot:
            memory = await asyncio.to_thread(self.memory_text, persona, assembler.char, assembler.user)
            return with_memory(proposed, memory)
        return refresh
