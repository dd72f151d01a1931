"""Provides `StepRunner`: every engine step of a playthrough (send, reply, regenerate, continue,
impersonate), the assembler a step uses, and the dry runs of one (`preview`, the token
estimate, the world-info preview and the warm-up when a chat opens).

Rules: seed 000 (preview runs the same code path as a step, calls no provider and stores
nothing); SillyTavern behaviour followed (format-digest §d): swiping right past the last reply
generates a new one; continue extends the last reply; impersonate writes the person's line.
The async steps run no SQL on the event loop (the TUI awaits them there): each one's synchronous
prelude (checks, forks, head moves, the assembler, the wait for the key indexes) runs in one
`asyncio.to_thread` call, and the step itself awaits its log through `engine.log.ThreadedLog`.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractContextManager, aclosing, nullcontext
from dataclasses import replace
from typing import Any

from tavern_tui.assembly.attribution import attribute, default_parts, split_persona
from tavern_tui.assembly.basic import BasicAssembler, with_memory
from tavern_tui.assembly.fit import ContextOverflow, admitted_context, sendable_history
from tavern_tui.assembly.macros.engine import MacroContext
from tavern_tui.assembly.macros.mvu_macros import tavern_helper_variables
from tavern_tui.assembly.memo import per_list
from tavern_tui.assembly.preset import PresetAssembler, RolesFirstAssembler, SlotsFirstAssembler, omit_notes
from tavern_tui.assembly.scripted import ScriptedAssembler
from tavern_tui.assembly.sillytavern import (
    REPLY_PRIMING,
    AuthorsNote,
    PromptTooLarge,
    chat_overrides_from_metadata,
    to_messages,
)
from tavern_tui.assembly.strategies import COMPAT, PROJECTION, ROLES_FIRST, SLOTS_FIRST
from tavern_tui.assembly.worldinfo import WorldInfoStep, scan_context, timed_state_of
from tavern_tui.engine.events import EventKind
from tavern_tui.engine.log import (
    COMPOSER_SOURCE,
    SUMMARY_SOURCE,
    derive_messages,
    replacement_event,
    surface_of,
)
from tavern_tui.engine.step import (
    CONTEXT_SOURCES,
    OPENING_SOURCE,
    CallNotPrepared,
    ContextRefresh,
    ContextSnapshot,
    Generation,
    InboxEmpty,
    StepBusy,
    StepFailed,
    StepOptions,
    StepSettled,
    StepUpdate,
    run_step,
)
from tavern_tui.errors import TavernError
from tavern_tui.lore.context import ActivationContext
from tavern_tui.lore.result import ActivationResult
from tavern_tui.providers.base import endpoint_problem
from tavern_tui.scripts.regex_scripts import ScriptSet
from tavern_tui.service.compaction import CompactionService
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.groups import group_setting, joined_card
from tavern_tui.service.inbox import ClaimedElsewhere, InboxService
from tavern_tui.service.library import LibraryService
from tavern_tui.service.lore import WorldInfoService
from tavern_tui.service.mvu import MvuService
from tavern_tui.service.openings import draft_opening, draft_playthrough, draft_user_name, opening_history
from tavern_tui.service.persona import PersonaService, render_snapshot
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.presets import PresetService, omitted_parameters, strategy_of
from tavern_tui.service.roleplay import roleplay_policy
from tavern_tui.service.scripts import ScriptService
from tavern_tui.service.strategies import StrategyService
from tavern_tui.service.timeline import TimelineService
from tavern_tui.service.tools import ToolService
from tavern_tui.service.variables import VariableService
from tavern_tui.store.repositories import PlaythroughRecord
from tavern_tui.text.names import substitute_names
from tavern_tui.text.tokens import estimate_messages
from tavern_tui.views import InboxItemView, PlaythroughView

logger = logging.getLogger(__name__)

CONTINUE_NUDGE = "[Continue your last message without repeating its original content.]"
"""SillyTavern's default `continue_nudge_prompt` (format-digest §c utility prompts)."""

IMPERSONATION_PROMPT = ("[Write your next reply from the point of view of {{user}}, using the chat history so far "
                        "as a guideline for the writing style of {{user}}. Don't write as or describe actions of "
                        "{{char}}.]")
"""SillyTavern's default `impersonation_prompt` (format-digest §c utility prompts)."""


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


def _parse_ref(text: object) -> tuple[int, int] | None:
    """"12:7" → (12, 7); None for anything else."""
    session, _, seq = str(text or "").partition(":")
    return (int(session), int(seq)) if session.isdigit() and seq.isdigit() else None


class StepRunner:
    """Engine steps and their dry runs (`tavern.steps`).

    Args:
        ctx: the shared settings, store and provider.
        library, playthroughs, lore, persona, presets, strategies: what a step's assembler
            reads (card, playthrough, books, persona section, preset, strategy).
        timeline: the forks a regenerate or continue starts from.
        variables: the macro variables a step starts from (issue 17; None: a fresh context).
        compaction: the context limit every request fits and the summaries auto-compaction
            writes (issue 16).
        inbox: the queued batch a step claims (previews include it; None: previews see none).
        mvu: MVU state (issue 18): initialised before a step, bound as the macros' message variables, and
            committed from each settled reply (None: no MVU state).
        tools: the tools a turn offers and runs (issue 19; None or none configured: no tools).
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService, playthroughs: PlaythroughService,
                 lore: WorldInfoService, persona: PersonaService, presets: PresetService,
                 strategies: StrategyService, timeline: TimelineService,
                 variables: VariableService | None = None, compaction: CompactionService | None = None, *,
                 inbox: InboxService | None = None, mvu: MvuService | None = None,
                 tools: ToolService | None = None, scripts: ScriptService | None = None) -> None:
        self.ctx = ctx
        self.mvu = mvu
        self.scripts = scripts
        self.variables = variables
        self.library = library
        self.playthroughs = playthroughs
        self.lore = lore
        self.persona = persona
        self.presets = presets
        self.strategies = strategies
        self.timeline = timeline
        self.inbox = inbox
        self.tools = tools
        self.compaction = compaction or CompactionService(ctx, playthroughs, presets)
        self._surface_cache: tuple[tuple[int, tuple[int, int]], list[Any]] | None = None
        self._derived: tuple[list[Any], list[Any]] | None = None  # (the events list, its surface)
        self._primed: dict[int, tuple] = {}  # playthrough → the books (and names) its warm-up primed
        self.last_mvu: dict[int, Any] = {}  # playthrough → the MVU commit of its last settled reply (MvuView | None)

    def _batch(self, playthrough_id: int, text: str) -> list[str]:
        """What the next step would claim if `text` were sent now: the pending queue (steers
        first), then `text` (seed 000 §5: world info scans history plus the claimed batch)."""
        queued = [item.text for item in self.inbox.pending(playthrough_id)] if self.inbox is not None else []
        return queued + ([text] if text else [])

    def estimate_tokens(self, playthrough_id: int) -> int:
        """Estimated prompt tokens of the next request without new input (the status line
        figure): the total of `preview`, i.e. the same assembly a step runs (strategy, preset,
        world info, persona), so the status line, the strategy pane and the trace agree.

        Raises:
            TavernError: as `preview` (no such playthrough, a persona over its cap, …).
        """
        return int(self.preview(playthrough_id)["tokens"]["total"])

    def _surface_events(self, session_id: int) -> list[Any]:
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

    def _surface(self, session_id: int) -> list[Any]:
        """`surface_of` the cached surface events (derived once per version of the log). The
        list is shared: callers must not change it."""
        events = self._surface_events(session_id)
        derived = self._derived
        if derived is not None and derived[0] is events:
            return derived[1]
        surface = per_list(events, "surface_of", lambda: surface_of(events))  # MVU's head derives it too
        self._derived = (events, surface)
        return surface

    def context_gauge(self, playthrough_id: int) -> dict[str, Any]:
        """The status line's context gauge for the next request without new input (issue 16):
        `{"tokens", "used", "limit", "dropped_messages", "summaries", "overflow", "over"}`;
        `overflow` True (with `over` tokens) when it cannot fit even with all history left out.

        Raises:
            TavernError: as `preview`, other than the request not fitting.
        """
        try:
            shown = self.preview(playthrough_id)
        except (ContextOverflow, PromptTooLarge) as refused:
            limit = self.compaction.limit_for(playthrough_id).limit
            needed = getattr(refused, "needed", limit)
            return {"tokens": None, "used": needed, "limit": limit, "dropped_messages": 0, "summaries": [],
                    "overflow": True, "over": max(0, needed - limit)}
        context = shown.get("context") or {}
        return {"tokens": int(shown["tokens"]["total"]), "used": context.get("used"), "limit": context.get("limit"),
                "dropped_messages": int(context.get("dropped_messages") or 0),
                "summaries": list(context.get("summaries") or []), "overflow": False, "over": 0}

    def _swipe_ids(self, playthrough_id: int, generation_type: str = "normal") -> tuple[int | None, int | None]:
        """(`{{lastSwipeId}}`, `{{currentSwipeId}}`) of the chat's last message (chat-macros.js: its
        swipe count and 1-based swipe index), None for a message without swipes (the person's).
        While a swipe is generated, SillyTavern's last message is the reply being swiped, its
        `swipe_id` one past its swipes: (the replies there are, that number + 1)."""
        if generation_type == "swipe":  # the head is the fork before the reply (`_fork_for_regenerate`)
            timeline, _members = self.timeline.variant_tree(playthrough_id)
            last = self.timeline.last_visible(timeline)
            siblings = timeline.roots if last is None else timeline.variants[last].children
            count = sum(1 for ref in siblings if timeline.variants[ref].row.role == "assistant")
            return (count, count + 1) if count else (None, None)
        state = self.timeline.swipe_state(playthrough_id)
        if state.ref is None or not (state.greeting or state.can_generate):
            return None, None
        return state.position[1], state.position[0]

    def _assembler(self, playthrough_id: int, generation: Generation, strategy: str | None = None,
                   view: PlaythroughView | None = None, *, pin_persona: bool = False,
                   pending: Sequence[str] = ()) -> Any:
        """`_base_assembler` with the character's regex scripts and the templates around it (issue 18).
        `pending`: the person's messages the step sends (MVU applies their commands before the request)."""
        view = view or self.playthroughs.playthrough(playthrough_id)
        with self.ctx.store.unit_of_work(write=False) as uow:  # both rows in one read
            playthrough = uow.playthroughs.get(playthrough_id)
            record = uow.characters.get(view.character_id)
        bound = self.mvu.bound(playthrough_id, pending) if self.mvu is not None else None
        snapshot = bound.snapshot if bound is not None else None
        inner = self._assembler_for(view, playthrough, generation, strategy, pin_persona=pin_persona, record=record,
                                    message_vars=snapshot)
        scripts = self.scripts.script_set(view.character_id, record) if self.scripts is not None else ScriptSet()
        # Templates read MVU's bound snapshot first (`getvar('stat_data.…')`), as macros do.
        return ScriptedAssembler(inner, scripts, templates=self.ctx.settings.templates, message_vars=snapshot,
                                 message_texts=bound.texts if bound is not None else {},
                                 mvu_facts=bound.facts if bound is not None else None)

    def _base_assembler(self, playthrough_id: int, generation: Generation, strategy: str | None = None,
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
        return self._assembler_for(view, playthrough, generation, strategy, pin_persona=pin_persona,
                                   message_vars=message_vars)

    def _assembler_for(self, view: PlaythroughView, playthrough: PlaythroughRecord, generation: Generation,
                       strategy: str | None = None, *, pin_persona: bool = False,
                       chat: Sequence[int] | None = None, record: Any = None,
                       message_vars: dict[str, Any] | None = None) -> Any:
        """`_assembler` on selections given as a record: a stored playthrough's, one a preview
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
        with self.ctx.store.unit_of_work(write=False) as uow:
            group = group_setting(uow, playthrough_id)
        # A group chat: every member's character lore applies (SillyTavern `getCharacterLore`).
        others = [(member, self.library.card(member)) for member, _muted in (group.members if group else ())
                  if member.id != record.id]
        books = self.lore.effective_books(view.id, record, card, chat, preset_id=playthrough.preset_id, also=others)
        card_data = card.data
        if group is not None and group.mode:  # join: every member's card fields, one per line
            cards = {record.id: card.data, **{member.id: parsed.data for member, parsed in others}}
            card_data = {**card.data, **joined_card(group, record.id, cards, view.user_name)}
        limit = self.compaction.limit_for_preset(playthrough.preset_id)
        # The world-info budget is a share of this request's context (ST: % of max context);
        # with nothing said anywhere, the `[world_info]` table's max_context (default 4095) stays.
        lore_settings = (self.ctx.settings.world_info if limit.source == "default"
                         else replace(self.ctx.settings.world_info, max_context=limit.max_context))
        events = self._surface_events(view.session_id) if view.session_id else []
        timed = per_list(events, "steps.timed_state", lambda: timed_state_of(events))
        # The variables the step starts from (issue 17); the assembler stages what its macros change.
        stored = json.loads(playthrough.meta or "{}")
        header = stored.get("header") if isinstance(stored, dict) else None
        chat_metadata = header.get("chat_metadata") if isinstance(header, dict) else None
        macros = None
        if self.variables is not None:  # an opening draft has no chat yet: its globals only
            macros = (self.variables.macro_context(view.session_id, _chat_id(playthrough_id, stored))
                      if view.session_id else MacroContext(global_vars=self.variables.global_variables()))
        if macros is not None and isinstance(chat_metadata, dict):
            # ST's {{pick}} seed: the chat's cached chat_id_hash and /reroll-pick seed, when it has them.
            cached = chat_metadata.get("chat_id_hash")
            if isinstance(cached, (int, float)) and not isinstance(cached, bool):
                macros.chat_id_hash = int(cached)
            macros.pick_reroll_seed = chat_metadata.get("pick_reroll_seed") or None
            note = chat_metadata.get("note_prompt")
            macros.authors_note = note if isinstance(note, str) else ""  # authors-note.js `{{authorsNote}}`
        if macros is not None and view.session_id:
            # `{{summary}}` (Summarize extension): the newest summary's text; swipe ids read on use only.
            surface = self._surface(view.session_id)
            macros.summary = per_list(surface, "steps.newest_summary", lambda: next(
                (m.content for m in reversed(surface) if getattr(m, "source", None) == SUMMARY_SOURCE), ""))
            memo: list[tuple[int | None, int | None]] = []

            def swipe_ids(gen_type: str = generation.type) -> tuple[int | None, int | None]:
                if not memo:
                    memo.append(self._swipe_ids(playthrough_id, gen_type))
                return memo[0]

            macros.lazy = {"last_swipe_id": lambda: swipe_ids()[0], "current_swipe_id": lambda: swipe_ids()[1]}
        if macros is not None and view.session_id and self.mvu is not None:  # the bound snapshot (issue 18)
            macros.message_vars = message_vars if message_vars is not None else self.mvu.snapshot(playthrough_id, view)
        if macros is not None:  # Tavern Helper's character variables, `{{get_character_variable::…}}`
            macros.character_vars = tavern_helper_variables(card.data.get("extensions"))
        if macros is not None and group is not None:  # a group chat: `{{group}}`, `{{notChar}}` …
            macros.group, macros.group_not_muted = group.cast.group(), group.cast.not_muted()
            macros.not_char = group.cast.not_char(card.name, view.user_name)
        meta: dict[str, Any] = {
            "character_id": record.id, "character_sha256": record.original_sha256,
            "character_revision": record.revision, "playthrough_id": playthrough_id,
            "world_books": [{"name": b.book.name, "source": b.source, "entries": len(b.book.entries),
                             "sha256": self.lore.book_hash(b.book, record)} for b in books]}
        persona, meta["persona"] = self.persona.persona_step(playthrough_id, pin=pin_persona and playthrough_id > 0,
                                                             meta=playthrough.meta)
        memory = self._memory_text(meta["persona"]["persona"], card.name, view.user_name)
        facts = self.lore.facts(record, card, view.user_name)
        policy = roleplay_policy(self.ctx.settings, playthrough.meta)  # "" while out-of-character talk is on
        meta["strategy_snapshot"] = spec.snapshot()
        if spec.base != COMPAT:
            preset, preset_facts = self.presets.preset_of(playthrough.preset_id)
            meta["preset"] = preset_facts
            if macros is not None:
                macros.preset_vars = tavern_helper_variables(preset.settings.get("extensions"))
            kind = {PROJECTION: PresetAssembler, SLOTS_FIRST: SlotsFirstAssembler,
                    ROLES_FIRST: RolesFirstAssembler}[spec.base]
            return kind(preset, card_data, card.name, view.user_name, meta, omit=omitted_parameters(playthrough),
                        world_info=self.lore.world_info_step(books, settings=lore_settings),
                        facts=facts, timed_state=timed, generation_type=generation.type,
                        continue_text=generation.continue_text, persona=persona, options=dict(spec.options),
                        snapshot=spec.snapshot(), authors_note=AuthorsNote.from_chat_metadata(chat_metadata),
                        chat_overrides=chat_overrides_from_metadata(chat_metadata), count=self.ctx.token_counter,
                        memory=memory, macros=macros, limit=limit, policy=policy, group=group is not None)
        config: dict[str, Any] = {}
        if playthrough.preset_id is not None:  # a bound preset's parameters apply whatever the strategy
            preset, meta["preset"] = self.presets.preset_of(playthrough.preset_id)
            omit = omitted_parameters(playthrough)
            config = {k: v for k, v in preset.call_config().items() if k not in omit}
            meta["adjustments"] = preset.config_notes() + omit_notes(omit)
        return BasicAssembler(card_data, card.name, view.user_name, meta,
                              self.lore.world_info_step(books, settings=lore_settings), facts,
                              timed, generation.type, config, persona, memory, macros, limit, self.ctx.token_counter,
                              policy=policy)

    def _memory_text(self, persona_id: int | None, char: str, user: str) -> str:
        """The persona's memory snapshot as sent (names filled in); "" when the setting is off or
        nothing is remembered."""
        if not self.ctx.settings.memory_snapshot:
            return ""
        return substitute_names(render_snapshot(self.persona.memory_snapshot(persona=persona_id)), char, user)

    def _context_refresh(self, assembler: Any) -> ContextRefresh | None:
        """What the step's refresh stage calls to re-read the runtime context before admission
        (seed 000 §1 `refreshContext()`): the memory snapshot, the one runtime fact that can change
        between the build and admission (belief learning of another step), read again off the loop.
        None when memory is not sent (nothing to re-read)."""
        if not self.ctx.settings.memory_snapshot:
            return None
        persona = (assembler.meta.get("persona") or {}).get("persona")

        async def refresh(proposed: ContextSnapshot) -> ContextSnapshot:
            memory = await asyncio.to_thread(self._memory_text, persona, assembler.char, assembler.user)
            return with_memory(proposed, memory)
        return refresh

    def preview(self, playthrough_id: int, text: str = "", *, strategy: str | None = None) -> dict[str, Any]:
        """The exact request the next step would send if `text` were sent now (seed 000: the
        same code path as a step, no provider call, nothing stored).

        Returns:
            `{"context", "strategy", "messages": [{"role", "content", "source"}], "config",
            "tokens", "adjustments", "world_info"}`; `tokens` are estimates per source and in
            total; `context` is the fit (`assembly.fit.ContextFit.to_json`: limit, used,
            dropped_messages, first_kept, summaries).

        Raises:
            ContextOverflow / PromptTooLarge: the request cannot fit even with all history left out.

        Raises:
            NotFound: unknown strategy (the message lists them), or no such playthrough.
        """
        with self._pinned():
            view = self.playthroughs.playthrough(playthrough_id)
            assembler = self._assembler(playthrough_id, Generation(), strategy, view)
            return self._dry_run(assembler, self._surface(view.session_id), self._batch(playthrough_id, text))

    def _pinned(self) -> AbstractContextManager[Any]:
        """The log read as of one version for a read-only build (`EventLog.pinned_version`): its
        caches' dozen version checks then cost one query. A log without it: no pin."""
        pin = getattr(self.ctx.store.events, "pinned_version", None)
        return pin() if pin is not None else nullcontext()

    def preview_selection(self, playthrough_id: int, text: str = "", *, strategy: str | None = None,
                          preset: int | None | bool = False, lore: Sequence[int] = ()) -> dict[str, Any]:
        """`preview` with other selections, binding nothing (issue 20 item 3: `tavern preview
        --strategy/--preset/--lore` and the TUI's preview), plus `tools`, the tools the request
        would carry (`_with_tools`; MCP servers are started to list theirs): `preset` a preset id to use instead
        of the bound one (None: the built-in default; False: the bound one), `lore` world-book
        ids added to the chat lore. The playthrough row and its log are not touched.

        Raises:
            as `preview`; NotFound for an unknown preset id.
        """
        if preset is False and not lore:
            return self._with_tools(self.preview(playthrough_id, text, strategy=strategy), playthrough_id)
        with self._pinned():
            view = self.playthroughs.playthrough(playthrough_id)
            with self.ctx.store.unit_of_work(write=False) as uow:
                playthrough = uow.playthroughs.get(playthrough_id)
                bound = uow.bindings.books_for("playthrough", playthrough_id)
            if preset is not False:
                playthrough = replace(playthrough, preset_id=preset)  # in memory only
            chat = list(bound) + [b for b in lore if b not in bound]
            assembler = self._assembler_for(view, playthrough, Generation(), strategy, chat=chat)
            return self._with_tools(self._dry_run(assembler, self._surface(view.session_id),
                                                  self._batch(playthrough_id, text)), playthrough_id)

    def _with_tools(self, shown: dict[str, Any], playthrough_id: int | None) -> dict[str, Any]:
        """A preview with `tools`: what the request would carry (`ToolService.preview`: name, risk,
        source, allowed), [] when none is configured."""
        shown["tools"] = self.tools.preview(playthrough_id) if self.tools is not None else []
        return shown

    def preview_draft(self, draft_id: int, text: str = "") -> dict[str, Any]:
        """The request an opening draft's first send would make (seed 000 §7: no history and no
        unsent input; the chosen greeting is there as the opening reference, as it will be).
        `text` is the first line, for the first send's fit check only. Nothing is stored, no
        session is created, no provider is called.

        Raises:
            NotFound: no such draft. ContextOverflow / PromptTooLarge / PersonaCapExceeded: as `preview`.
        """
        with self.ctx.store.unit_of_work(write=False) as uow:
            draft = uow.openings.get(draft_id)
            card = self.library.card(uow.characters.get(draft.character_id))
        user = draft_user_name(draft, self.persona, self.ctx.settings.user_name)
        view, record = draft_playthrough(draft, card.name, user)
        assembler = self._assembler_for(view, record, Generation(), chat=list(draft.lore))
        return self._with_tools(self._dry_run(assembler, surface_of(opening_history(draft_opening(draft, card, user))),
                                              [text] if text else []), None)

    def _dry_run(self, assembler: Any, history: list[Any], claimed: list[str]) -> dict[str, Any]:
        """`preview`'s result for an assembler, the history it reads and the claimed batch."""
        if getattr(assembler, "strategy", None) == PROJECTION:
            built, meta, _records = assembler.build(history, claimed)
            messages = [{**m, "source": p.source} for m, p in zip(to_messages(built.parts), built.parts)]
            spans: list[Any] = [list(p.spans) for p in built.parts]
            config = assembler.call_config()
            tokens = {**built.tokens, "total": sum(built.tokens.values())}
            context = meta.get("context")
        else:
            assembly = assembler(history, claimed)
            meta, config = assembly.meta, assembly.config
            messages = ([{"role": "system", "content": assembly.system, "source": "system"}] if assembly.system else [])
            spans = [meta.get("system_parts")] if assembly.system else []
            omit = assembly.omit
            shown = [m for m in sendable_history(history)[0] if not omit or m.ref not in omit]
            sources = ["context" if m.source in CONTEXT_SOURCES else "summary" if m.source == SUMMARY_SOURCE
                       else "history" for m in shown]
            sent = [dict(assembly.rewrite.get(m.ref) or m.to_request()) for m in shown]  # regex scripts' text
            messages += [{**r, "source": source} for r, source in zip(sent, sources)]
            spans += [default_parts(r, source, m.ref, str(m.body.get("context") or ""))
                      for r, m, source in zip(sent, shown, sources)]
            # Context the step would admit now, just before the input (roles-first).
            admitted = admitted_context(history, assembly.context)
            messages += [{"role": "user", "content": e.body["content"], "source": "context"} for e in admitted]
            spans += [default_parts(e.body, "context", None, str(e.body.get("context") or "")) for e in admitted]
            messages += [{"role": "user", "content": t, "source": "input"} for t in claimed]
            spans += [default_parts({"content": t}, "input") for t in claimed]
            context = meta.get("context")
            # The messages alone (the fit's `used` adds the reply priming).
            tokens = {"total": int(context["used"]) - REPLY_PRIMING if context else estimate_messages(messages)}
        entry_ids = list((meta.get("persona") or {}).get("entries") or [])
        spans = [split_persona(s, str(m.get("content") or ""), entry_ids) for m, s in zip(messages, spans)]
        attribution = attribute(messages, spans, self.ctx.token_counter)
        return {"context": context, "strategy": meta.get("strategy", "compat"),
                "strategy_snapshot": meta.get("strategy_snapshot"), "persona": meta.get("persona"),
                "preset": meta.get("preset"), "world_books": meta.get("world_books"),
                "messages": messages, "config": config, "tokens": tokens,
                "adjustments": meta.get("adjustments", []), "world_info": meta.get("world_info"),
                "parts": attribution["messages"], "breakdown": attribution["breakdown"]}

    async def send(self, playthrough_id: int, text: str, *, allow_secrets: bool = False,
                   speaker: int | None = None) -> AsyncIterator[StepUpdate]:
        """Send the person's text and stream the reply (one engine step on the head session).

        Args:
            allow_secrets: the person confirmed a secret-looking text (`check_message`).
            speaker: the character who replies, when not the playthrough's own (a group member:
                its card is `{{char}}` and the reply is stored under its name).

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
        self.playthroughs.check_message(text, allow_secrets=allow_secrets)
        generation = await asyncio.to_thread(self._spoken_by, Generation(), speaker)
        async with aclosing(self._step(playthrough_id, text, generation)) as steps:
            async for update in steps:
                yield update

    async def send_or_queue(self, playthrough_id: int, text: str, *, steer: bool = False, allow_secrets: bool = False,
                            queued: Callable[[InboxItemView], object] | None = None) -> AsyncIterator[StepUpdate]:
        """`send`, unless a step is under way in this playthrough in another window or command
        (`InboxService.step_in_progress`, or `send` refusing as busy): then the text is queued
        (a durable inbox insert; `queued` is told), the running step is waited for, and a step
        claims the queue (`run_queued`) and streams. The queue-instead-of-fail of issue 15,
        in this one function, on today's busy detection.

        Raises:
            ClaimedElsewhere: another window or command claimed the queued text meanwhile.
            TavernError / SecretRefused / StepFailed / CancelledError: as `send` (a cancel
                while waiting leaves the text queued).
        """
        assert self.inbox is not None, "send_or_queue needs the inbox service"
        if not await asyncio.to_thread(self.inbox.step_in_progress, playthrough_id):
            updates = self.send(playthrough_id, text, allow_secrets=allow_secrets)
            try:
                first = await anext(updates)
            except StepBusy:  # it started elsewhere between the check and the send
                await updates.aclose()
            else:
                async with aclosing(updates):
                    yield first
                    async for update in updates:
                        yield update
                return
        item = await asyncio.to_thread(self.inbox.add, playthrough_id, text, steer=steer,
                                       allow_secrets=allow_secrets)
        if queued is not None:
            queued(item)
        while True:
            await self.inbox.wait_settled(playthrough_id)
            pending = await asyncio.to_thread(self.inbox.pending, playthrough_id)
            if all(p.id != item.id for p in pending):
                raise ClaimedElsewhere(f"the queued message {item.id} was sent by another tavern window or "
                                       "command; its reply is there")
            updates = self.run_queued(playthrough_id)
            try:
                first = await anext(updates)
            except (StepBusy, InboxEmpty):  # another process got there first: wait for its step
                await updates.aclose()
                continue
            async with aclosing(updates):
                yield first
                async for update in updates:
                    yield update
            return

    async def run_queued(self, playthrough_id: int) -> AsyncIterator[StepUpdate]:
        """Answer what waits in the inbox: one step that claims the whole pending batch (steers
        first, then next-turn items, one `user/message` each, in order) before assembly. The
        chat calls it when a reply settles with items queued; `tavern chat --say` after waiting.

        Raises:
            InboxEmpty: nothing is pending (nothing is written).
            StepBusy / StepFailed / CancelledError: as `send`.
        """
        async with aclosing(self._step(playthrough_id, None, Generation(), claim=True)) as steps:
            async for update in steps:
                yield update

    def _prepare_step(self, playthrough_id: int, generation: Generation, text: str | None = None,
                      claim: bool = False) -> tuple[PlaythroughView, Any, dict[str, Any] | None]:
        """(the playthrough, the assembler) of a step about to run; marks the playthrough played.
        Called in a worker thread: it runs SQL, reads (and on first use parses) the books, and
        waits for the key indexes, which the chat's warm-up (another worker thread) may hold for
        a while on a big book.

        The request is fitted once here, before anything of the step is stored: one that cannot
        fit is refused now (issue 16: refused before sending, nothing half-stored). Returns
        (the playthrough, the assembler, that fit's `context` record).

        Raises:
            NotFound: no such playthrough. PersonaCapExceeded: as `_assembler`.
            ContextOverflow / PromptTooLarge: the request cannot fit the context.
        """
        view = self.playthroughs.playthrough(playthrough_id)
        with self.ctx.store.unit_of_work() as uow:
            uow.playthroughs.touch(playthrough_id)
        if generation.author_id is not None:  # a group member speaks: its card, book and scripts
            view = replace(view, character_id=generation.author_id, character_name=generation.author_name)
        if self.mvu is not None:  # MVU initialises before the first generation (initCheck on GENERATION_STARTED)
            self.mvu.ensure_initialised(playthrough_id)
        # The batch the step will claim (engine `step.claim.claim_inbox`: the pending items, steers first,
        # then `text`), read now; an item queued between here and the claim is fitted again by
        # the assembler in the step's own build, which refuses the same way.
        claimed = self._batch(playthrough_id, text or "") if text is not None or claim else []
        assembler = self._assembler(playthrough_id, generation, view=view, pin_persona=True, pending=claimed)
        self.lore.index_cache.wait_free()
        history = self._surface(view.session_id)
        if getattr(assembler, "strategy", None) == PROJECTION:
            fitted = assembler.build(history, claimed)[1].get("context")
        else:
            fitted = assembler(history, claimed).meta.get("context")
        return view, assembler, fitted

    async def _step(self, playthrough_id: int, text: str | None, generation: Generation, *,
                    claim: bool = False, hide_reply: bool = False) -> AsyncIterator[StepUpdate]:
        """One engine step on the playthrough's head session (send, regenerate, continue,
        impersonate; `claim`: the inbox's pending batch is its input; `hide_reply`: the settled
        reply is taken off the surface at once and neither MVU nor consolidation reads it)."""
        problem = endpoint_problem(self.ctx.settings.provider.base_url)
        if problem is not None:  # nothing can be sent: admit nothing, keep the text queued
            raise await asyncio.to_thread(self._kept_after_failure, playthrough_id, text, problem)
        # Off the event loop, so the screen keeps answering (and keeps what is typed).
        try:
            view, assembler, fitted = await asyncio.to_thread(self._prepare_step, playthrough_id, generation,
                                                              text, claim)
        except TavernError:
            raise  # a refusal that names its cause (a fit, a cap, a busy chat): the caller keeps the text
        except Exception as exc:  # noqa: BLE001 - anything a card's content broke in the build
            raise await asyncio.to_thread(self._kept_after_failure, playthrough_id, text, exc) from exc
        # The person writes under the persona the chat plays as now; their lines keep its name.
        playing = await asyncio.to_thread(self.persona.playthrough_persona, playthrough_id)
        generation = replace(generation, speaker=view.user_name, persona=playing.id)
        rounds = 0
        while fitted and fitted.get("dropped_messages") and self.ctx.settings.auto_compact and rounds < 3:
            # Auto-compaction: summarise the oldest block instead of dropping it, then fit again. The
            # summary itself takes room, so a message or two may still not fit: those are summarised
            # into it too (a few rounds at most).
            rounds += 1
            first_kept = _parse_ref(fitted.get("first_kept"))
            await self.compaction.compact(playthrough_id, until=first_kept, keep=0 if first_kept is None else None)
            view, assembler, fitted = await asyncio.to_thread(self._prepare_step, playthrough_id, generation,
                                                              text, claim)
        # aclosing: if our caller closes this generator, the step settles its attempt now, not at GC.
        options = StepOptions(generation=generation, stale_after=self.ctx.stale_after, claim=claim,
                              claims=self.ctx.store.claims, refresh=self._context_refresh(assembler),
                              **self._turn_tools(playthrough_id))
        steps = run_step(self.ctx.store.events, view.session_id, self.ctx.provider, assembler, text, options=options)
        last: StepSettled | None = None  # the turn's final reply: state and learning wait for the lease's release
        async with aclosing(steps):
            try:
                async for update in steps:
                    if isinstance(update, StepSettled) and hide_reply:
                        # Off the surface before anything reads it; the request's trace keeps it.
                        hide = replacement_event([update.event.ref], None, source=COMPOSER_SOURCE)
                        await asyncio.to_thread(self.ctx.store.events.append, update.event.session_id, [hide])
                        yield update
                        continue
                    if isinstance(update, StepSettled) and not update.calls:
                        last = update  # the last update of the turn: `run_step` ends (and frees the step) next
                        continue
                    if isinstance(update, StepSettled):  # a tool call follows: its results build on this state
                        await self._commit_mvu(playthrough_id, view.session_id, update)
                    yield update
            except StepFailed as exc:
                raise _with_omit_step(exc, playthrough_id) from exc.cause
            except CallNotPrepared as exc:  # nothing admitted; the engine put the claimed input back
                raise TavernError(_not_sent(exc.problem, kept=exc.kept)) from exc
        if last is not None:
            # After the step's lease is released: MVU's commit (compare-and-set, retried on a moved base)
            # and belief learning (perhaps a second model call) no longer tell another window "busy".
            await self._commit_mvu(playthrough_id, view.session_id, last)
            await self._consolidate_quietly(playthrough_id)
            yield last

    def _spoken_by(self, generation: Generation, speaker: int | None) -> Generation:
        """`generation` replying as the character `speaker` (None: the playthrough's own). Runs SQL:
        call it in a worker. Raises NotFound (no such character)."""
        if speaker is None:
            return generation
        with self.ctx.store.unit_of_work(write=False) as uow:
            name = uow.characters.get(speaker).name
        return replace(generation, author_id=speaker, author_name=name)

    def _kept_after_failure(self, playthrough_id: int, text: str | None, exc: BaseException | str) -> TavernError:
        """The error for a step that cannot be prepared (a card, book or template that broke the
        build, or `exc` as text: an endpoint that cannot be reached as configured), after the
        person's `text` is queued in the inbox, durable, so nothing typed is lost: the next step
        (or `tavern inbox`) sends it."""
        if isinstance(exc, str):
            reason = exc
        else:
            logger.error("preparing a step of playthrough %s failed", playthrough_id, exc_info=exc)
            reason = f"{type(exc).__name__}: {str(exc)[:200]}".rstrip(": ")
        if text is None or self.inbox is None:
            return TavernError(_not_sent(reason, kept=False))
        try:  # already checked by `send`: the by-value key check still runs in `add`
            self.inbox.add(playthrough_id, text, allow_secrets=True)
        except Exception:  # noqa: BLE001 - the store itself failed: say the text was not kept
            logger.exception("queueing the unsent message of playthrough %s failed", playthrough_id)
            return TavernError(f"the request could not be built ({reason}); nothing was sent or kept")
        return TavernError(_not_sent(reason, kept=True))

    async def _commit_mvu(self, playthrough_id: int, session_id: int, settled: StepSettled) -> None:
        """Commit the settled reply's MVU commands (issue 18), off the event loop; a failure is logged and
        never fails the step (the reply is stored; the state stays at the record before it)."""
        if self.mvu is None:
            return
        try:
            self.last_mvu[playthrough_id] = await asyncio.to_thread(
                self.mvu.commit_reply, playthrough_id, settled.event.session_id, settled.event)
        except Exception:  # noqa: BLE001 - state is best effort once the reply is kept
            logger.exception("MVU commit failed for playthrough %s", playthrough_id)

    def _turn_tools(self, playthrough_id: int) -> dict[str, Any]:
        """`StepOptions`' tool fields for this playthrough (issue 19): the toolbox, the step
        limit, and the steers claimed at each step boundary (`InboxService.claim_at_step_boundary`,
        in a worker thread). Empty when no tool is configured: a plain one-step turn."""
        toolbox = self.tools.toolbox(playthrough_id) if self.tools is not None else None
        if toolbox is None or self.tools is None:
            return {}
        inbox = self.inbox

        async def at_boundary() -> tuple[Any, list[Any]]:
            if inbox is None:
                return None, []
            return await asyncio.to_thread(inbox.claim_at_step_boundary, playthrough_id)

        return {"tools": toolbox, "max_steps": self.tools.max_steps, "at_boundary": at_boundary}

    async def _consolidate_quietly(self, playthrough_id: int) -> None:
        """Learn from what the person just said, off the event loop (the UI's thread); a failure
        is logged, never fails the step it follows. The model extractor runs only when
        configured and the provider is a real model."""
        try:
            if self.ctx.settings.belief_extractor == "model" and not getattr(self.ctx.provider, "placeholder", False):
                await self.persona.consolidate_with_model(playthrough_id)
            else:
                await asyncio.to_thread(self.persona.consolidate, playthrough_id)
        except Exception:  # noqa: BLE001 - learning is best effort; the reply is already stored
            logger.exception("belief consolidation failed for playthrough %s", playthrough_id)

    # -- generating variants --------------------------------------------------------------

    async def regenerate(self, playthrough_id: int) -> AsyncIterator[StepUpdate]:
        """Generate a new variant of the last reply (a swipe right past the end, `--swipe`):
        a fork before the reply, then one step without new input. When the chat ends with the
        person's message (no reply yet, or the last one failed), it just generates the reply.

        Raises:
            TavernError: the last message is the greeting (swipes move among greetings instead).
            StepBusy / StepFailed / CancelledError: as `send`.
        """
        generation = await asyncio.to_thread(self._fork_for_regenerate, playthrough_id)
        async with aclosing(self._step(playthrough_id, None, generation)) as steps:
            async for update in steps:
                yield update

    def _fork_for_regenerate(self, playthrough_id: int) -> Generation:
        """`regenerate`'s prelude (a worker thread: it reads the tree and may fork): when the
        chat ends with a reply, the head moves to a fork before it and a swipe is generated;
        else a regenerate of the missing reply. Raises TavernError as `regenerate`."""
        timeline, _members = self.timeline.variant_tree(playthrough_id)
        last = self.timeline.last_visible(timeline)
        if last is None:
            return Generation("regenerate")
        row = timeline.variants[last].row
        if row.source == OPENING_SOURCE:
            raise TavernError("the greeting swipes among the card's greetings; there is no reply to regenerate")
        if row.role != "assistant":
            return Generation("regenerate")
        last = _tool_turn_start(timeline, last)
        parent = timeline.variants[last].parent
        if parent is None:
            # The model spoke first (no greeting, nothing before it): its swipe is a fork at the
            # very start, as a greeting's is.
            with self.ctx.store.unit_of_work() as uow:
                root = uow.playthroughs.get(playthrough_id).root_session_id
            origin = self.ctx.store.events.ancestry(root)[0][0]
            self.timeline.set_head(playthrough_id, self.timeline.fork(playthrough_id, None, root_session=origin))
            return Generation("swipe")
        _view, shown = self.timeline.last_message(playthrough_id)  # a group member's reply: the same member again
        # The fork is made (with its carried edits) before the head moves onto it.
        self.timeline.set_head(playthrough_id, self.timeline.fork(playthrough_id, parent, timeline))
        return _authored(Generation("swipe"), shown)

    async def generate(self, playthrough_id: int, *, speaker: int | None = None,
                       claim: bool = False) -> AsyncIterator[StepUpdate]:
        """Have the model speak without new input, whatever the chat ends with: an empty chat
        (the model speaks first), the greeting, or its own last reply (SillyTavern's Send with
        an empty box is `Generate('normal')`; nothing is fabricated as the person's turn).
        `speaker`: as `send` (the next member of a group round); `claim`: the inbox's pending
        lines are the step's input (a group's line that waited for a member to be asked).

        Raises:
            StepBusy / StepFailed / CancelledError: as `send`.
        """
        generation = await asyncio.to_thread(self._spoken_by, Generation(), speaker)
        async with aclosing(self._step(playthrough_id, None, generation, claim=claim)) as steps:
            async for update in steps:
                yield update

    async def reply(self, playthrough_id: int) -> AsyncIterator[StepUpdate]:
        """Answer the person's last line without new input: SillyTavern's Send with an empty box
        after the person's message (e.g. an impersonated one) is `Generate('normal')`, so world
        info `triggers` and the trace see a normal generation, not a regenerate.

        Raises:
            TavernError: the chat does not end with the person's message.
            StepBusy / StepFailed / CancelledError: as `send`.
        """
        await asyncio.to_thread(self._check_reply, playthrough_id)
        async with aclosing(self._step(playthrough_id, None, Generation())) as steps:
            async for update in steps:
                yield update

    def _check_reply(self, playthrough_id: int) -> None:
        """`reply`'s prelude (a worker thread: it reads the chat's last message). Raises
        TavernError when the chat does not end with the person's message."""
        _view, shown = self.timeline.last_message(playthrough_id)
        if shown is None or shown.role != "user":
            raise TavernError("nothing to answer: the chat does not end with your message")

    async def continue_reply(self, playthrough_id: int) -> AsyncIterator[StepUpdate]:
        """Extend the last reply (SillyTavern "continue"): the reply is sent as the last
        assistant message with the continue nudge after it, and the result, the original text
        plus the new, becomes a sibling variant of it (the original stays one swipe away).

        Raises:
            TavernError: the chat does not end with a reply.
        """
        generation = await asyncio.to_thread(self._fork_for_continue, playthrough_id)
        async with aclosing(self._step(playthrough_id, None, generation)) as steps:
            async for update in steps:
                yield update

    def _fork_for_continue(self, playthrough_id: int) -> Generation:
        """`continue_reply`'s prelude (a worker thread: it reads the tree and forks): the head
        moves to a fork before the last reply, and the continue generation carries its text.
        Raises TavernError as `continue_reply`."""
        timeline, _members = self.timeline.variant_tree(playthrough_id)
        last = self.timeline.last_visible(timeline)
        _view, shown = self.timeline.last_message(playthrough_id)
        if last is None or shown is None or shown.role != "assistant":
            raise TavernError("continue extends the last reply, and the chat does not end with one")
        parent = timeline.variants[last].parent
        if parent is None:
            with self.ctx.store.unit_of_work() as uow:
                root = uow.playthroughs.get(playthrough_id).root_session_id
            origin = self.ctx.store.events.ancestry(root)[0][0]
            session_id = self.timeline.fork(playthrough_id, None, root_session=origin)
        else:
            session_id = self.timeline.fork(playthrough_id, parent, timeline)
        self.timeline.set_head(playthrough_id, session_id)  # last: the fork is complete
        generation = Generation("continue", continue_text=shown.content, continues=shown.ref,
                                instruction=CONTINUE_NUDGE)
        return _authored(generation, shown)

    async def impersonate(self, playthrough_id: int, *, into_composer: bool = False) -> AsyncIterator[StepUpdate]:
        """Have the model write the person's next line (SillyTavern "impersonate").

        By default it is stored as `user/message` with origin agent (DESIGN.md), then the person
        may send or edit it. With `into_composer` (SillyTavern's own behaviour: the line lands in
        the send box, `#send_textarea`, not in the chat) the settled line is hidden from the chat
        at once (a `surface/replaced` delete, source `COMPOSER_SOURCE`): the caller puts
        `StepSettled.event.content` in its composer, and what the person then sends is theirs.
        The request and its reply stay in the trace either way.

        Yields / raises: as `send` (no text of the person's, so no `SecretRefused`).
        """
        _greetings, char, user = await asyncio.to_thread(self.timeline.greetings, playthrough_id)
        generation = Generation("impersonate", instruction=substitute_names(IMPERSONATION_PROMPT, char, user))
        async with aclosing(self._step(playthrough_id, None, generation, hide_reply=into_composer)) as steps:
            async for update in steps:
                yield update

    def world_info_preview(self, playthrough_id: int, text: str = "", *,
                           rng: Callable[[], float] | None = None) -> ActivationResult:
        """Which entries would fire if `text` were sent now in this playthrough, and why.

        A dry run (seed 000: preview runs the same code and never calls a provider): the same
        books, settings, history and timed effects as a real step; nothing is stored.
        """
        step, ctx = self._preview_step(playthrough_id, text, rng)
        result = step.run(ctx)
        if self.ctx.settings.templates and any("<%" in e.content for e in result.activated):
            result.template_failures = self._template_failures(playthrough_id, result)
        return result

    def _template_failures(self, playthrough_id: int, result: Any) -> list[tuple[str, str]]:
        """Render the fired entries' templates against the bound snapshot (as a step would: macro and MVU
        variables, writes discarded) and return the failures, `(where, error)` (issue 18: named in the pane)."""
        from tavern_tui.scripts.templates import TemplateRunner, template_snapshot

        view = self.playthroughs.playthrough(playthrough_id)
        macros = self.variables.macro_context(view.session_id, f"playthrough-{playthrough_id}") \
            if self.variables is not None else MacroContext()
        snapshot = template_snapshot(macros.local_vars, macros.global_vars,
                                     self.mvu.snapshot(playthrough_id) if self.mvu is not None else None)
        runner = TemplateRunner()
        try:
            for entry in result.activated:
                if "<%" in entry.content:
                    where = f"world info: {entry.book}/{entry.uid}" + (f" ({entry.comment})" if entry.comment else "")
                    runner.render(entry.content, snapshot, where=where)
            return list(runner.failures)
        finally:
            runner.close()

    def _preview_step(self, playthrough_id: int, text: str,
                      rng: Callable[[], float] | None) -> tuple[WorldInfoStep, ActivationContext]:
        """The world-info step and scan context a send of `text` would use now."""
        view = self.playthroughs.playthrough(playthrough_id)
        with self.ctx.store.unit_of_work() as uow:
            record = uow.characters.get(view.character_id)
        card = self.library.card(record)
        events = self.ctx.store.events.surface_events(view.session_id)
        history = derive_messages(self.ctx.store.events, view.session_id)
        ctx = scan_context(history, self._batch(playthrough_id, text), self.lore.facts(record, card, view.user_name),
                           timed_state_of(events))
        return self.lore.world_info_step(self.lore.effective_books(view.id, record, card), rng), ctx

    def warm_world_info(self, playthrough_id: int) -> int:
        """Get this playthrough's world info ready before the first send (the chat screen calls
        it from a worker thread when it opens): builds or reuses the books' key indexes, compiles
        their regex keys and caches the current history's matches, through the same dry run as
        `world_info_preview` (nothing is stored), then primes the indexes with every entry
        content recursion may scan (`WorldInfoStep.prime`).

        Then the heap is collected once and frozen (`gc.freeze`): the books, indexes and caches
        alive now move to the permanent generation, so later full collections do not walk them
        (a 5,000-entry book is hundreds of thousands of objects: 60-90 ms per full collection,
        which would land inside a step). The caller calls `release_heap` when the chat closes:
        frozen objects are never collected as cyclic garbage, so a screen left frozen would
        stay in memory. performance-anchors B1/B7: the automaton is built in a worker, after
        first paint.

        Returns:
            How many entries the dry run activated (0 without world info).

        Raises:
            TavernError: no such playthrough.
        """
        step, ctx = self._preview_step(playthrough_id, "", None)
        result = step.run(ctx)
        # Reopening the chat with the same book revisions (the lore service keeps one parsed
        # book per revision) finds them primed and their heap collected already: only the dry
        # run over the history is redone (issue 22: not per chat open).
        books = tuple((id(getattr(b, "book", b)), len(getattr(b, "book", b).entries)) for b in step.books)
        primed = (books, ctx.char_name, ctx.user_name)
        if self._primed.get(playthrough_id) != primed:
            step.prime(ctx)
            gc.collect()
            self._primed[playthrough_id] = primed
        gc.freeze()
        return len(result.activated)

    @staticmethod
    def release_heap() -> None:
        """Undo `warm_world_info`'s freeze (when its chat closes): what was frozen goes back to
        the collector, so whatever has become garbage since (the closed screen) can be freed."""
        gc.unfreeze()


def _tool_turn_start(timeline: Any, last: Any) -> Any:
    """The first reply of the tool turn `last` ends (issue 19: a swipe of a tool turn re-runs the
    whole turn, calls included, as a new variant): from the final reply, back over each run of
    `tool/result`s and the assistant message that made those calls. `last` itself for a plain reply."""
    ref = last
    while True:
        parent = timeline.variants[ref].parent
        if parent is None or timeline.variants[parent].row.kind != EventKind.TOOL_RESULT:
            return ref
        while parent is not None and timeline.variants[parent].row.kind == EventKind.TOOL_RESULT:
            parent = timeline.variants[parent].parent
        if parent is None or timeline.variants[parent].row.role != "assistant":
            return ref
        ref = parent


def _authored(generation: Generation, message: Any) -> Generation:
    """`generation` replying as the character who wrote `message` (a surface message; a group
    member's reply names it: `character_id`, `name` in its body); unchanged for the playthrough's
    own character's."""
    body = message.body if message is not None else None
    if isinstance(body, dict) and isinstance(body.get("character_id"), int):
        return replace(generation, author_id=body["character_id"], author_name=str(body.get("name") or ""))
    return generation


def _not_sent(reason: str, *, kept: bool) -> str:
    """The message of a step refused before anything was admitted: `reason` (what to fix), that
    nothing was sent, and, when `kept`, where the person's input waits."""
    if not kept:
        return f"the request could not be built ({reason}); nothing was sent"
    return (f"the request could not be built ({reason}); nothing was sent, and your message is kept in the "
            "queue (`tavern inbox`, or above the message box): it goes with the next step")


def _with_omit_step(exc: StepFailed, playthrough_id: int) -> StepFailed:
    """A step failed on a call parameter the fallback never drops (the provider's message names
    it and `tavern omit-param PLAYTHROUGH NAME`): the same failure with this playthrough's number
    in the command, so the one step past it can be copied as it is. Anything else unchanged."""
    cause = exc.cause
    if not (cause.param and "tavern omit-param PLAYTHROUGH" in str(cause)):
        return exc
    message = str(cause).replace("tavern omit-param PLAYTHROUGH", f"tavern omit-param {playthrough_id}")
    named = type(cause)(message, status=cause.status, param=cause.param)
    return StepFailed(named, exc.attempt)
