"""Provides `StepRunner`: every engine step of a playthrough (send, reply, regenerate, continue,
impersonate), when what follows a settled one runs (MVU's commit, belief learning: `Settling`),
and the entry points of its dry runs, which it delegates to `Previews` (the assembler comes from
`Assembling`, a step's preparation and the builds made ahead of it from `Preparing`, the variants'
forks from `Forks`, the errors of a failed or refused step from `failures`).

Rules: SillyTavern behaviour followed (format-digest §d): impersonate writes the person's line.
The async steps run no SQL on the event loop (the TUI awaits them there): each one's synchronous
prelude (checks, forks, head moves, the assembler, the wait for the key indexes) runs in one
`asyncio.to_thread` call, and the step itself awaits its log through `engine.log.ThreadedLog`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import Any

from tavern_tui.engine.log import COMPOSER_SOURCE, replacement_event
from tavern_tui.engine.step import (
    CallNotPrepared,
    Generation,
    InboxEmpty,
    InputRejected,
    Prebuilt,
    PreStepHook,
    StepBusy,
    StepFailed,
    StepOptions,
    StepSettled,
    StepStarted,
    StepUpdate,
    run_step,
)
from tavern_tui.errors import TavernError
from tavern_tui.lore.result import ActivationResult
from tavern_tui.providers.base import endpoint_problem
from tavern_tui.service.compaction import CompactionService
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.inbox import ClaimedElsewhere, InboxService
from tavern_tui.service.library import LibraryService
from tavern_tui.service.lore import WorldInfoService
from tavern_tui.service.mvu import MvuService
from tavern_tui.service.persona import PersonaService
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.presets import PresetService
from tavern_tui.service.scripts import ScriptService
from tavern_tui.service.steps.ahead import BuildsAhead
from tavern_tui.service.steps.assembling import Assembling
from tavern_tui.service.steps.failures import kept_after_failure, not_sent, with_omit_step
from tavern_tui.service.steps.forks import Forks
from tavern_tui.service.steps.preparing import Prepared, Preparing
from tavern_tui.service.steps.preview import Previews
from tavern_tui.service.steps.settling import Settling
from tavern_tui.service.strategies import StrategyService
from tavern_tui.service.timeline import TimelineService
from tavern_tui.service.tools import ToolService
from tavern_tui.service.variables import VariableService
from tavern_tui.text.names import substitute_names
from tavern_tui.views import InboxItemView, PlaythroughView

IMPERSONATION_PROMPT = ("[Write your next reply from the point of view of {{user}}, using the chat history so far "
                        "as a guideline for the writing style of {{user}}. Don't write as or describe actions of "
                        "{{char}}.]")
"""SillyTavern's default `impersonation_prompt` (format-digest §c utility prompts)."""


class StepRunner:
    """Engine steps and their dry runs (`tavern.steps`), composed of `Assembling` (`assembling`: the
    assembler and what it reads), `Previews` (`previews`: the dry runs), `Forks` (`forks`: the
    variants' preludes) and `Settling` (`settling`: MVU's commit and belief learning after a reply).

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
        self.assembling = Assembling(ctx, library, playthroughs, lore, persona, presets, strategies, timeline,
                                     variables, self.compaction, inbox=inbox, mvu=mvu, scripts=scripts)
        self.previews = Previews(ctx, self.assembling, library, playthroughs, lore, persona, self.compaction,
                                 variables=variables, mvu=mvu, tools=tools)
        self.forks = Forks(ctx, timeline)
        self.settling = Settling(ctx, persona, mvu)
        self.preparing = Preparing(ctx, playthroughs, persona, lore, self.assembling, mvu,
                                   assembler=lambda *a, **k: self._assembler(*a, **k))
        """A step's preparation in its worker, and the builds made ahead of it (`build_ahead`)."""
        self.pre_step_hooks: list[PreStepHook] = []
        """Every step's pre-step hooks, in order (`engine.step.PreStepHook`); none by default."""

    @property
    def ahead(self) -> BuildsAhead:
        """The requests built ahead of their step (`Preparing.ahead`)."""
        return self.preparing.ahead

    @property
    def last_mvu(self) -> dict[int, Any]:
        """Playthrough → the MVU commit of its last settled reply (MvuView | None; `Settling.last_mvu`)."""
        return self.settling.last_mvu

    # -- the dry runs (`Previews`) --------------------------------------------------------

    def estimate_tokens(self, playthrough_id: int) -> int:
        """Estimated prompt tokens of the next request without new input (the status line
        figure): the total of `preview` (`Previews.estimate_tokens`)."""
        return self.previews.estimate_tokens(playthrough_id)

    def context_gauge(self, playthrough_id: int) -> dict[str, Any]:
        """The status line's context gauge for the next request without new input (issue 16;
        `Previews.context_gauge`)."""
        return self.previews.context_gauge(playthrough_id)

    def preview(self, playthrough_id: int, text: str = "", *, strategy: str | None = None) -> dict[str, Any]:
        """The exact request the next step would send if `text` were sent now (seed 000: the
        same code path as a step, no provider call, nothing stored; `Previews.preview`)."""
        return self.previews.preview(playthrough_id, text, strategy=strategy)

    def preview_selection(self, playthrough_id: int, text: str = "", *, strategy: str | None = None,
                          preset: int | None | bool = False, lore: Sequence[int] = ()) -> dict[str, Any]:
        """`preview` with other selections, binding nothing, plus the tools the request would
        carry (issue 20 item 3; `Previews.preview_selection`)."""
        return self.previews.preview_selection(playthrough_id, text, strategy=strategy, preset=preset, lore=lore)

    def preview_draft(self, draft_id: int, text: str = "") -> dict[str, Any]:
        """The request an opening draft's first send would make (seed 000 §7; `Previews.preview_draft`)."""
        return self.previews.preview_draft(draft_id, text)

    def world_info_preview(self, playthrough_id: int, text: str = "", *,
                           rng: Callable[[], float] | None = None) -> ActivationResult:
        """Which entries would fire if `text` were sent now in this playthrough, and why (a dry
        run; `Previews.world_info_preview`)."""
        return self.previews.world_info_preview(playthrough_id, text, rng=rng)

    def warm_world_info(self, playthrough_id: int) -> int:
        """Get this playthrough's world info ready before the first send, then freeze the heap
        (`Previews.warm_world_info`; `release_heap` undoes the freeze). Returns how many entries
        the dry run activated."""
        return self.previews.warm_world_info(playthrough_id)

    def warm_provider(self) -> None:
        """Get the provider ready for the first send (`Provider.warm`: e.g. its HTTP client made
        in this worker thread, not on the event loop when the person presses Enter)."""
        self.ctx.provider.warm()

    @staticmethod
    def release_heap() -> None:
        """After a chat closed: collect what it left and freeze the rest again (`Previews.release_heap`)."""
        Previews.release_heap()

    def _assembler(self, playthrough_id: int, generation: Generation, strategy: str | None = None,
                   view: PlaythroughView | None = None, *, pin_persona: bool = False,
                   pending: Sequence[str] = ()) -> Any:
        """`Assembling.assembler`: the one place a step gets its assembler (tests replace it)."""
        return self.assembling.assembler(playthrough_id, generation, strategy, view, pin_persona=pin_persona,
                                         pending=pending)

    # -- sending ----------------------------------------------------------------------------

    async def send(self, playthrough_id: int, text: str, *, allow_secrets: bool = False,
                   speaker: int | None = None) -> AsyncGenerator[StepUpdate, None]:
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
        generation = Generation() if speaker is None else await asyncio.to_thread(self.forks.spoken_by,
                                                                                  Generation(), speaker)
        async with aclosing(self._step(playthrough_id, text, generation)) as steps:
            async for update in steps:
                yield update

    async def send_or_queue(self, playthrough_id: int, text: str, *, steer: bool = False, allow_secrets: bool = False,
                            queued: Callable[[InboxItemView], object] | None = None,
                            ) -> AsyncGenerator[StepUpdate, None]:
        """`send`, unless a step is under way in this playthrough in another window or command
        (`send` refuses as busy: `StepLeases.refuse_if_held` before it builds anything, in the
        same worker call as its preparation, or the step's lease): then the text is queued
        (a durable inbox insert; `queued` is told), the running step is waited for, and a step
        claims the queue (`run_queued`) and streams. The queue-instead-of-fail of issue 15,
        in this one function, on today's busy detection.

        Raises:
            ClaimedElsewhere: another window or command claimed the queued text meanwhile.
            TavernError / SecretRefused / StepFailed / CancelledError: as `send` (a cancel
                while waiting leaves the text queued).
        """
        assert self.inbox is not None, "send_or_queue needs the inbox service"
        updates = self.send(playthrough_id, text, allow_secrets=allow_secrets)
        try:
            first = await anext(updates)
        except StepBusy:  # refused before anything was built (`_prepare_step`), or by the step's lease
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

    async def run_queued(self, playthrough_id: int) -> AsyncGenerator[StepUpdate, None]:
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

    # -- one step ---------------------------------------------------------------------------

    def _prepare_step(self, playthrough_id: int, generation: Generation, text: str | None = None,
                      claim: bool = False) -> Prepared:
        """`Preparing.prepare`: the playthrough, the assembler, its fit's context record and the
        persona written as, of a step about to run (in a worker thread; tests replace it)."""
        return self.preparing.prepare(playthrough_id, generation, text, claim)

    def build_ahead(self, playthrough_id: int, text: str) -> bool:
        """Build the request a send of `text` would make now and keep it for the step that sends
        it (`Preparing.build_ahead`; in a worker thread, writes nothing). Returns whether a build
        was kept."""
        return self.preparing.build_ahead(playthrough_id, text)

    async def _prepared(self, playthrough_id: int, text: str | None, generation: Generation,
                        claim: bool) -> tuple[PlaythroughView, Any, Generation]:
        """(the playthrough, the assembler, the generation as the person's persona) of a step
        about to run, fitted: `_prepare_step` off the event loop, auto-compacted while history
        would be dropped. A step that cannot be prepared keeps the person's text queued."""
        problem = endpoint_problem(self.ctx.settings.provider.base_url)
        if problem is not None:  # nothing can be sent: admit nothing, keep the text queued
            raise await asyncio.to_thread(kept_after_failure, self.inbox, playthrough_id, text, problem)
        # Off the event loop, so the screen keeps answering (and keeps what is typed).
        started = time.perf_counter()
        try:
            view, assembler, fitted, playing = await asyncio.to_thread(self._prepare_step, playthrough_id,
                                                                       generation, text, claim)
        except TavernError:
            raise  # a refusal that names its cause (a fit, a cap, a busy chat): the caller keeps the text
        except Exception as exc:  # noqa: BLE001 - anything a card's content broke in the build
            raise await asyncio.to_thread(kept_after_failure, self.inbox, playthrough_id, text, exc) from exc
        if isinstance(assembler, Prebuilt):  # the trace's `gather` stage: the worker's time less the build's
            assembler.gather_ms = max(0.0, round((time.perf_counter() - started) * 1000 - assembler.build_ms, 1))
        rounds = 0
        while fitted and fitted.get("dropped_messages") and self.ctx.settings.auto_compact and rounds < 3:
            # Auto-compaction: summarise the oldest block instead of dropping it, then fit again. The
            # summary itself takes room, so a message or two may still not fit: those are summarised
            # into it too (a few rounds at most).
            rounds += 1
            first_kept = _parse_ref(fitted.get("first_kept"))
            await self.compaction.compact(playthrough_id, until=first_kept, keep=0 if first_kept is None else None)
            view, assembler, fitted, playing = await asyncio.to_thread(self._prepare_step, playthrough_id,
                                                                       generation, text, claim)
        # The person writes under the persona the chat plays as now; their lines keep its name.
        return view, assembler, replace(generation, speaker=view.user_name, persona=playing)

    async def _step(self, playthrough_id: int, text: str | None, generation: Generation, *,
                    claim: bool = False, hide_reply: bool = False) -> AsyncGenerator[StepUpdate, None]:
        """One engine step on the playthrough's head session (send, regenerate, continue,
        impersonate; `claim`: the inbox's pending batch is its input; `hide_reply`: the settled
        reply is taken off the surface at once and neither MVU nor consolidation reads it)."""
        view, assembler, generation = await self._prepared(playthrough_id, text, generation, claim)
        # aclosing: if our caller closes this generator, the step settles its attempt now, not at GC.
        options = StepOptions(generation=generation, stale_after=self.ctx.stale_after, claim=claim,
                              claims=self.ctx.store.claims, refresh=self.assembling.context_refresh(assembler),
                              pre_step_hooks=tuple(self.pre_step_hooks), **self._turn_tools(playthrough_id))
        steps = run_step(self.ctx.store.events, view.session_id, self.ctx.provider, assembler, text, options=options)
        last: StepSettled | None = None  # the turn's final reply: state and learning wait for the lease's release
        async with aclosing(steps):
            try:
                async for update in steps:
                    if isinstance(update, StepStarted) and view.opening_draft is not None:
                        # The draft's first send is admitted: the prepared playthrough becomes its own.
                        await asyncio.to_thread(self.playthroughs.associate_opening, view.id)
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
                        await self.settling.commit_mvu(playthrough_id, update)
                    yield update
            except StepFailed as exc:
                raise with_omit_step(exc, playthrough_id) from exc.cause
            except CallNotPrepared as exc:  # nothing admitted; the engine put the claimed input back
                raise TavernError(not_sent(exc.problem, kept=exc.kept)) from exc
            except InputRejected as exc:  # a pre-step hook said no: nothing admitted, the input put back
                raise TavernError(not_sent(exc.reason, kept=exc.kept)) from exc
        if last is not None:
            # After the step's lease is released: MVU's commit (compare-and-set, retried on a moved base)
            # and belief learning (perhaps a second model call) no longer tell another window "busy".
            # They start now and the settled reply goes out while they run (the screen shows it at
            # once); the turn ends when they are done, so the next step builds on the new state. A
            # caller that stops listening (Esc, a closed window) does not stop them.
            after = asyncio.ensure_future(self._after_settle(playthrough_id, last))
            try:
                yield last
            finally:
                await asyncio.shield(after)

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

    # -- after a reply settles (`Settling`) ------------------------------------------------

    async def _after_settle(self, playthrough_id: int, settled: StepSettled) -> None:
        """The settled reply's MVU commit, then belief learning (each logs its own failure)."""
        await self.settling.commit_mvu(playthrough_id, settled)
        await self._consolidate_quietly(playthrough_id)

    async def _consolidate_quietly(self, playthrough_id: int) -> None:
        """`Settling.consolidate_quietly`: the one place a step's belief learning starts (tests replace it)."""
        await self.settling.consolidate_quietly(playthrough_id)

    # -- generating variants (their preludes: `Forks`) ------------------------------------

    async def regenerate(self, playthrough_id: int) -> AsyncGenerator[StepUpdate, None]:
        """Generate a new variant of the last reply (a swipe right past the end, `--swipe`):
        a fork before the reply, then one step without new input. When the chat ends with the
        person's message (no reply yet, or the last one failed), it just generates the reply.

        Raises:
            TavernError: the last message is the greeting (swipes move among greetings instead).
            StepBusy / StepFailed / CancelledError: as `send`.
        """
        generation = await asyncio.to_thread(self.forks.for_regenerate, playthrough_id)
        async with aclosing(self._step(playthrough_id, None, generation)) as steps:
            async for update in steps:
                yield update

    async def generate(self, playthrough_id: int, *, speaker: int | None = None,
                       claim: bool = False) -> AsyncGenerator[StepUpdate, None]:
        """Have the model speak without new input, whatever the chat ends with: an empty chat
        (the model speaks first), the greeting, or its own last reply (SillyTavern's Send with
        an empty box is `Generate('normal')`; nothing is fabricated as the person's turn).
        `speaker`: as `send` (the next member of a group round); `claim`: the inbox's pending
        lines are the step's input (a group's line that waited for a member to be asked).

        Raises:
            StepBusy / StepFailed / CancelledError: as `send`.
        """
        generation = Generation() if speaker is None else await asyncio.to_thread(self.forks.spoken_by,
                                                                                  Generation(), speaker)
        async with aclosing(self._step(playthrough_id, None, generation, claim=claim)) as steps:
            async for update in steps:
                yield update

    async def reply(self, playthrough_id: int) -> AsyncGenerator[StepUpdate, None]:
        """Answer the person's last line without new input: SillyTavern's Send with an empty box
        after the person's message (e.g. an impersonated one) is `Generate('normal')`, so world
        info `triggers` and the trace see a normal generation, not a regenerate.

        Raises:
            TavernError: the chat does not end with the person's message.
            StepBusy / StepFailed / CancelledError: as `send`.
        """
        await asyncio.to_thread(self.forks.check_reply, playthrough_id)
        async with aclosing(self._step(playthrough_id, None, Generation())) as steps:
            async for update in steps:
                yield update

    async def continue_reply(self, playthrough_id: int) -> AsyncGenerator[StepUpdate, None]:
        """Extend the last reply (SillyTavern "continue"): the reply is sent as the last
        assistant message with the continue nudge after it, and the result, the original text
        plus the new, becomes a sibling variant of it (the original stays one swipe away).

        Raises:
            TavernError: the chat does not end with a reply.
        """
        generation = await asyncio.to_thread(self.forks.for_continue, playthrough_id)
        async with aclosing(self._step(playthrough_id, None, generation)) as steps:
            async for update in steps:
                yield update

    async def impersonate(self, playthrough_id: int, *,
                          into_composer: bool = False) -> AsyncGenerator[StepUpdate, None]:
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


def _parse_ref(text: object) -> tuple[int, int] | None:
    """"12:7" → (12, 7); None for anything else."""
    session, _, seq = str(text or "").partition(":")
    return (int(session), int(seq)) if session.isdigit() and seq.isdigit() else None
