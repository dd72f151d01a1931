"""Provides `Previews`: the dry runs of a step (`preview` and its selections and drafts, the token
estimate and context gauge, the world-info preview) and the world-info warm-up when a chat opens.

Rules: seed 000 (preview runs the same code path as a step, calls no provider and stores
nothing); performance-anchors B1/B7 (the warm-up builds the key indexes in a worker, after first
paint, then freezes the heap).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from tavern_tui.assembly.attribution import attribute, default_parts, split_persona
from tavern_tui.assembly.fit import ContextOverflow, admitted_context, sendable_history
from tavern_tui.assembly.macros.engine import MacroContext
from tavern_tui.assembly.sillytavern import REPLY_PRIMING, PromptTooLarge, to_messages
from tavern_tui.assembly.strategies import PROJECTION
from tavern_tui.assembly.worldinfo import WorldInfoStep, scan_context, timed_state_of
from tavern_tui.engine.log import SUMMARY_SOURCE, derive_messages, surface_of
from tavern_tui.engine.step import CONTEXT_SOURCES, Generation
from tavern_tui.lore.context import ActivationContext
from tavern_tui.lore.result import ActivationResult
from tavern_tui.service.compaction import CompactionService
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.service.lore import WorldInfoService
from tavern_tui.service.mvu import MvuService
from tavern_tui.service.openings import draft_opening, draft_playthrough, draft_user_name, opening_history
from tavern_tui.service.persona import PersonaService
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.steps.assembling import Assembling
from tavern_tui.service.tools import ToolService
from tavern_tui.service.variables import VariableService
from tavern_tui.text.tokens import estimate_messages


class Previews:
    """The dry runs of a step (`StepRunner` delegates its previews here).

    Args:
        ctx: the shared settings, store and provider.
        assembling: the assembler, surface and claimed batch a step would use.
        library, playthroughs, lore, persona: the card, playthrough, books and persona a dry run reads.
        compaction: the context limit the gauge reports.
        variables, mvu: the macro and MVU variables the world-info templates render against.
        tools: the tools a request would carry (None: none).
    """

    def __init__(self, ctx: ServiceContext, assembling: Assembling, library: LibraryService,
                 playthroughs: PlaythroughService, lore: WorldInfoService, persona: PersonaService,
                 compaction: CompactionService, *, variables: VariableService | None = None,
                 mvu: MvuService | None = None, tools: ToolService | None = None) -> None:
        self.ctx = ctx
        self.assembling = assembling
        self.library = library
        self.playthroughs = playthroughs
        self.lore = lore
        self.persona = persona
        self.compaction = compaction
        self.variables = variables
        self.mvu = mvu
        self.tools = tools
        # playthrough → the books (id, entry count) and the names its warm-up primed
        self._primed: dict[int, tuple[tuple[tuple[int, int], ...], str, str]] = {}

    def estimate_tokens(self, playthrough_id: int) -> int:
        """Estimated prompt tokens of the next request without new input (the status line
        figure): the total of `preview`, i.e. the same assembly a step runs (strategy, preset,
        world info, persona), so the status line, the strategy pane and the trace agree.

        Raises:
            TavernError: as `preview` (no such playthrough, a persona over its cap, …).
        """
        return int(self.preview(playthrough_id)["tokens"]["total"])

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
        with self.ctx.one_version():
            view = self.playthroughs.playthrough(playthrough_id)
            assembler = self.assembling.assembler(playthrough_id, Generation(), strategy, view)
            return self._dry_run(assembler, self.assembling.surface(view.session_id),
                                 self.assembling.batch(playthrough_id, text))

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
        with self.ctx.one_version():
            view = self.playthroughs.playthrough(playthrough_id)
            with self.ctx.store.unit_of_work(write=False) as uow:
                playthrough = uow.playthroughs.get(playthrough_id)
                bound = uow.bindings.books_for("playthrough", playthrough_id)
            if preset is not False:
                playthrough = replace(playthrough, preset_id=preset)  # in memory only
            chat = list(bound) + [b for b in lore if b not in bound]
            # The card's regex scripts, templates and MVU state as a step has them (a trial's
            # `preview --preset` showed the update blocks a real send strips).
            assembler = self.assembling.assembler(playthrough_id, Generation(), strategy, view,
                                                  playthrough=playthrough, chat=chat)
            return self._with_tools(self._dry_run(assembler, self.assembling.surface(view.session_id),
                                                  self.assembling.batch(playthrough_id, text)), playthrough_id)

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
        assembler = self.assembling.assembler_for(view, record, Generation(), chat=list(draft.lore))
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
            meta, config, messages, spans = _native_request(assembler, history, claimed)
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
            playthrough = uow.playthroughs.get(playthrough_id)
        card = self.library.card(record)
        events = self.ctx.store.events.surface_events(view.session_id)
        history = derive_messages(self.ctx.store.events, view.session_id)
        ctx = scan_context(history, self.assembling.batch(playthrough_id, text),
                           self.lore.facts(record, card, view.user_name), timed_state_of(events))
        books, settings = self.assembling.step_lore(view, playthrough, record, card)  # as a step scans
        return self.lore.world_info_step(books, rng, settings=settings), ctx

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
        books = tuple((id(b.book), len(b.book.entries)) for b in step.books)
        primed = (books, ctx.char_name, ctx.user_name)
        if self._primed.get(playthrough_id) != primed:
            step.prime(ctx)
            gc.collect()
            self._primed[playthrough_id] = primed
        gc.freeze()
        return len(result.activated)

    @staticmethod
    def release_heap() -> None:
        """After a chat closed (its screen gone): give what `warm_world_info` froze back to the
        collector, collect once (the closed screen and whatever else became garbage is freed),
        and freeze what is still alive again (the books, indexes and caches stay out of later
        full collections). Holds the interpreter for one full collection (~130 ms with a
        5,000-entry book open): the chat screen runs it in a worker once the next screen painted.

        Unfreezing alone (as before) left ~500k objects to the next full collection, which then
        landed inside the next chat's opening: 240-350 ms of every second reopening
        (transcript_window, 5,000 messages and a 5,000-entry book)."""
        gc.unfreeze()
        gc.collect()
        gc.freeze()


def _native_request(assembler: Any, history: list[Any],
                    claimed: list[str]) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]], list[Any]]:
    """(meta, config, messages, spans) of a native-delivery request (compat, slots-first,
    roles-first): the system section, the sendable history as sent (regex scripts' text), the
    context the step would admit now just before the input (roles-first), then the claimed input."""
    assembly = assembler(history, claimed)
    meta, config = assembly.meta, assembly.config
    messages = ([{"role": "system", "content": assembly.system, "source": "system"}] if assembly.system else [])
    spans: list[Any] = [meta.get("system_parts")] if assembly.system else []
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
    return meta, config, messages, spans
