"""Provides `OpeningService`: opening drafts, the playthroughs not yet begun (issue 20 item 1).

Rule (seed 000 §7): starting a new playthrough first persists an independent opening draft with
its resource and strategy selections; it creates no session and makes no provider call. A draft
preview holds neither history nor unsent input (here: the request the first send would make,
with the chosen greeting as the opening reference and no input). The first send turns the draft
into a playthrough once it is admitted.

What a first send leaves (chosen, issue 20 "How it is checked"):
- a refusal before anything is stored (empty text, a secret, a request that cannot fit the
  context, a persona over its cap, an unknown preset or book, a call the provider cannot prepare:
  no usable endpoint URL, a config setting a field the request owns) leaves the draft as it was
  and creates nothing (the step's prepare stage runs before the draft becomes a playthrough);
- otherwise the first send prepares the draft's playthrough in one transaction (root session, the
  greeting as an engine-origin opening reference, the playthrough with the draft's strategy
  snapshot, preset, chat lore and persona name): either all of it is stored or none. It is the
  draft's until the send's input is admitted (seed 000 §7: a first send prepares a real session
  and associates it only after admission): not listed, the draft kept with the line;
- the step admits the input as any send's is, and at that admission the playthrough becomes its
  own (listed) and the draft goes (`PlaythroughService.associate_opening`). A stage before admission that fails
  (a pre-step hook rejecting the line, say) admits nothing: the draft is still listed with the
  line, and sending it again gives the prepared playthrough up (archived, never listed; the log
  is append-only) and prepares a new one. A provider error after admission leaves the playthrough
  with the input kept and the failed attempt shown (Enter or ctrl+r retries), as in any chat.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Iterable
from contextlib import aclosing
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tavern_tui.engine.events import Event, EventKind, NewEvent, Origin, body_hash, canonical_json
from tavern_tui.engine.step import OPENING_SOURCE, StepUpdate
from tavern_tui.engine.stream import prepare_call
from tavern_tui.errors import CallConfigError, NotFound, TavernError
from tavern_tui.formats.cards import ParsedCard
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.service.lore import WorldInfoService
from tavern_tui.service.persona import PersonaService
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.presets import STRATEGY_APPLIED, PresetService
from tavern_tui.service.strategies import StrategyService
from tavern_tui.store.openings import OpeningRecord
from tavern_tui.store.records import PlaythroughRecord
from tavern_tui.text.names import substitute_names
from tavern_tui.views import OpeningView, PlaythroughView

if TYPE_CHECKING:
    from tavern_tui.service.steps import StepRunner
    from tavern_tui.service.templates import TemplateService


def opening_event(text: str, index: int, count: int) -> NewEvent:
    """The opening reference for greeting `index` of `count`: role assistant, origin engine,
    source "opening" (seed 000 §3: a greeting is an opening reference, never an agent reply),
    the same event `engine.step.admit_opening` appends."""
    return NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant",
                    {"content": text, "greeting_index": index, "greetings": count}, Origin.ENGINE, OPENING_SOURCE)


def draft_playthrough(draft: OpeningRecord, character_name: str, user_name: str) -> tuple[PlaythroughView,
                                                                                           PlaythroughRecord]:
    """A draft as the (view, record) pair a step's assembler reads: id 0 and session 0 (it has
    neither), its preset, and its strategy snapshot pinned in `meta` as `apply_strategy` pins it."""
    now = draft.updated_at
    name = str(draft.strategy.get("name") or "") or None
    record = PlaythroughRecord(0, draft.character_id, "", user_name, 0, 0, draft.created_at, now,
                               json.dumps(_draft_meta(draft)),
                               draft.preset_id, name)
    view = PlaythroughView(0, draft.character_id, character_name, user_name, 0, draft.created_at, now, 0,
                           name or "compat", draft.preset_id)
    return view, record


def opening_history(event: NewEvent | None) -> list[Event]:
    """The draft's opening reference as the one stored-looking event a dry run reads (session
    0, seq 1; never written)."""
    if event is None:
        return []
    text = canonical_json(event.body)
    return [Event(0, 1, str(event.kind), event.role, event.origin, event.source, text, body_hash(text),
                  datetime.now(UTC), event.body)]


def draft_user_name(draft: OpeningRecord, persona: PersonaService, default: str) -> str:
    """The name `{{user}}` stands for in a draft: its persona document's name now (the one
    `--persona` picked, else the default persona's), else the name it was given, else `default`."""
    try:
        name = persona.persona(draft.persona_id).name
    except NotFound:  # (its persona cannot go away; an old draft names none)
        name = ""
    return name or draft.user_name or default


def _draft_meta(draft: OpeningRecord) -> dict[str, Any]:
    """The playthrough meta a draft starts with: its strategy snapshot and its persona lock."""
    meta: dict[str, Any] = {"strategy": draft.strategy} if draft.strategy else {}
    if draft.persona_id is not None:
        meta["persona"] = {"lock": draft.persona_id}
    return meta


def draft_opening(draft: OpeningRecord, card: ParsedCard, user: str) -> NewEvent | None:
    """A draft's opening reference (None when the card has no greeting or the chosen one is empty)."""
    greetings = card.greetings
    if not greetings:
        return None
    index = min(draft.greeting_index, len(greetings) - 1)
    if not greetings[index].strip():
        return None
    return opening_event(substitute_names(greetings[index], card.name, user), index, len(greetings))


class OpeningService:
    """Opening drafts (`tavern.openings`): new, list, edit, swipe the greeting, discard, and the
    first send that turns one into a playthrough.

    Args:
        ctx: the shared settings and store.
        library, persona, presets, lore, strategies: what a draft's selections name.
        playthroughs: the message check a first send passes, and the playthrough it becomes.
        steps: the dry run (`preview_draft`) and the send of the first step.
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService, persona: PersonaService,
                 presets: PresetService, lore: WorldInfoService, strategies: StrategyService,
                 playthroughs: PlaythroughService, steps: StepRunner, templates: TemplateService | None = None) -> None:
        self.ctx = ctx
        self.templates = templates
        self.library = library
        self.persona = persona
        self.presets = presets
        self.lore = lore
        self.strategies = strategies
        self.playthroughs = playthroughs
        self.steps = steps

    # -- reading ---------------------------------------------------------------------------

    def _view(self, draft: OpeningRecord) -> OpeningView:
        with self.ctx.store.unit_of_work(write=False) as uow:
            character = uow.characters.get(draft.character_id)
            books = uow.world_books.get_many(list(draft.lore))
            preset = uow.presets.get(draft.preset_id) if draft.preset_id is not None else None
        card = self.library.card(character)
        user = self.user_name(draft)
        greetings = card.greetings
        index = min(draft.greeting_index, max(0, len(greetings) - 1))
        text = substitute_names(greetings[index], card.name, user) if greetings else ""
        return OpeningView(draft.id, draft.character_id, card.name, user, index, max(1, len(greetings)) if
                           greetings else 0, text, str(draft.strategy.get("name") or "compat"),
                           int(draft.strategy.get("version") or 0), draft.preset_id,
                           preset.name if preset is not None else "", list(draft.lore),
                           [books[b].name for b in draft.lore if b in books], draft.created_at, draft.updated_at,
                           draft.line)

    def user_name(self, draft: OpeningRecord) -> str:
        """The name `{{user}}` stands for in this draft (`draft_user_name`)."""
        return draft_user_name(draft, self.persona, self.ctx.settings.user_name)

    def drafts(self, character_id: int | None = None) -> list[OpeningView]:
        """Opening drafts, most recently changed first (all, or one character's)."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            found = uow.openings.list(character_id)
        return [self._view(d) for d in found]

    def draft(self, draft_id: int) -> OpeningView:
        """One draft. Raises NotFound (discarded, or already played)."""
        return self._view(self._record(draft_id))

    def _record(self, draft_id: int) -> OpeningRecord:
        with self.ctx.store.unit_of_work(write=False) as uow:
            return uow.openings.get(draft_id)

    # -- writing ---------------------------------------------------------------------------

    def _selections(self, *, preset: str | None, lore: Iterable[str], strategy: str | None,
                    greeting: int | None, greetings: int) -> tuple[int | None | bool, list[int] | None,
                                                                   dict[str, Any] | None]:
        """Look every name up before anything is written (an unknown one changes nothing)."""
        if greeting is not None and not 0 <= greeting < max(1, greetings):
            raise TavernError(f"greeting {greeting + 1} is out of range: the card has {greetings} greeting(s), "
                              f"numbered 1 to {max(1, greetings)}")
        preset_id: int | None | bool = self.presets.find_preset(preset).id if preset else False
        lore = list(lore)
        books = [self.lore.find_world_book(b).id for b in lore] if lore else None
        spec = self.strategies.strategy_spec(strategy).snapshot() if strategy else None
        return preset_id, books, spec

    def new_draft(self, character: int | str, *, greeting: int | None = None, preset: str | None = None,
                  lore: Iterable[str] = (), strategy: str | None = None, persona: str | None = None,
                  template: str | None = None) -> OpeningView:
        """Make an opening draft of a character: the chosen greeting (default the first), the
        selections (default strategy `settings.default_strategy`, as a new opening applies it,
        seed 000 §2.1), no session, no provider call.

        Args:
            character: a character id or a query as `LibraryService.find_character` takes it.
            greeting: 0 = first_mes, 1… = alternate_greetings in order.
            preset, lore, strategy: names or ids; persona: the persona document to play as (its
                name or id; the playthrough is locked to it at the first send; default: the
                default persona).
            template: a configuration template whose selections fill what is not given here.

        Raises:
            NotFound: an unknown character, preset, book, strategy or template, or one the template
                names that is gone (nothing is stored).
            TavernError: a greeting number out of range.
        """
        snapshot: dict[str, Any] = {}
        if template is not None:
            preset, lore, strategy, persona, snapshot = self._from_template(template, preset, lore, strategy, persona)
        found = self.library.find_character(str(character))
        chosen = self.persona.find_persona(persona) if persona is not None and persona.strip() else None
        with self.ctx.store.unit_of_work(write=False) as uow:
            card = self.library.card(uow.characters.get(found.id))
        preset_id, books, spec = self._selections(preset=preset, lore=lore, strategy=strategy, greeting=greeting,
                                                  greetings=len(card.greetings))
        if spec is None and snapshot:
            spec = snapshot  # the template's own snapshot, as it was saved
        if spec is None:
            spec = self.strategies.strategy_spec(self.ctx.settings.default_strategy).snapshot()
        with self.ctx.store.unit_of_work() as uow:
            created = uow.openings.add(character_id=found.id, greeting_index=greeting or 0,
                                       preset_id=None if preset_id is False else preset_id,
                                       strategy=spec, lore=books or [], user_name=chosen.name if chosen else "",
                                       persona_id=chosen.id if chosen else None)
        return self._view(created)

    def _from_template(self, name: str, preset: str | None, lore: Iterable[str], strategy: str | None,
                       persona: str | None) -> tuple[str | None, list[str], str | None, str | None, dict[str, Any]]:
        """(preset, lore, strategy, persona, strategy snapshot) with what `new_draft` was not given
        taken from template `name`, as ids the look-ups take (they refuse one that is gone)."""
        assert self.templates is not None, "templates need the template service"
        view, snapshot = self.templates.template(name)
        lore = list(lore)
        return (preset if preset else (str(view.preset_id) if view.preset_id is not None else None),
                lore or [str(b) for b in view.lore], strategy,
                persona if persona else (str(view.persona_id) if view.persona_id is not None else None),
                {} if strategy else snapshot)

    def edit_draft(self, draft_id: int, *, greeting: int | None = None, preset: str | None = None,
                   default_preset: bool = False, lore: Iterable[str] | None = None, strategy: str | None = None,
                   persona: str | None = None) -> OpeningView:
        """Change a draft's selections; what is not given stays. `lore` replaces the chat books
        (an empty list: none); `default_preset`: back to the built-in default preset.

        Raises:
            NotFound: no such draft, or an unknown name (nothing is changed). TavernError: as `new_draft`.
        """
        draft = self._record(draft_id)
        chosen = self.persona.find_persona(persona) if persona is not None and persona.strip() else None
        with self.ctx.store.unit_of_work(write=False) as uow:
            card = self.library.card(uow.characters.get(draft.character_id))
        preset_id, books, spec = self._selections(preset=preset, lore=lore or (), strategy=strategy,
                                                  greeting=greeting, greetings=len(card.greetings))
        if default_preset:
            preset_id = None
        with self.ctx.store.unit_of_work() as uow:
            changed = uow.openings.update(draft_id, greeting_index=greeting, preset_id=preset_id, strategy=spec,
                                          lore=books if lore is not None else None,
                                          user_name=(chosen.name if chosen else "") if persona is not None else None,
                                          persona_id=(chosen.id if chosen else None) if persona is not None else False)
        return self._view(changed)

    def swipe_greeting(self, draft_id: int, direction: int) -> OpeningView:
        """Show the next (`direction` 1) or previous (-1) of the card's greetings, wrapping
        around as SillyTavern's swipes on the greeting do. Raises NotFound."""
        view = self.draft(draft_id)
        if view.greeting_count <= 1:
            return view
        index = (view.greeting_index + (1 if direction > 0 else -1)) % view.greeting_count
        with self.ctx.store.unit_of_work() as uow:
            uow.openings.update(draft_id, greeting_index=index)
        return self.draft(draft_id)

    def save_line(self, draft_id: int, text: str) -> bool:
        """Keep the first line typed into a draft and not sent ("" removes it), as a chat keeps
        its unsent text (`InboxService.save_draft`): a text that holds a secret or the configured
        API key is never written (the stored line is removed instead and False returned).

        Raises:
            NotFound: no such draft (discarded, or already played).
        """
        text, saved = self.playthroughs.keepable(text)
        with self.ctx.store.unit_of_work() as uow:
            uow.openings.set_line(draft_id, text)
        return saved

    def discard(self, draft_id: int) -> None:
        """Remove a draft; nothing else was ever stored for it. Raises NotFound."""
        with self.ctx.store.unit_of_work() as uow:
            uow.openings.delete(draft_id)

    # -- the first send --------------------------------------------------------------------

    def opening(self, draft: OpeningRecord) -> NewEvent | None:
        """The draft's opening reference (`draft_opening`)."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            card = self.library.card(uow.characters.get(draft.character_id))
        return draft_opening(draft, card, self.user_name(draft))

    def begin(self, draft_id: int, text: str, *, allow_secrets: bool = False) -> PlaythroughView:
        """The first send's prelude: check `text`, fit the request the draft would make with it,
        then prepare the draft's playthrough in one transaction (see the module text); it is
        listed once the caller's send of `text` in it is admitted (`send_first` does both). A
        playthrough an earlier first send of this draft prepared and never admitted is given up.

        Raises:
            TavernError: empty text; or the draft's earlier first send was admitted after all
                (a crash before its playthrough was listed): that playthrough is listed now and the
                message names it. SecretRefused: as `PlaythroughService.check_message`.
            ContextOverflow / PromptTooLarge: the request cannot fit. PersonaCapExceeded.
            TavernError: the provider cannot prepare the call (`_prepare_call`).
            NotFound: no such draft (discarded, or already played). In each case nothing is stored.
        """
        if not text.strip():
            raise TavernError("nothing to send: the message is empty")
        self.playthroughs.check_message(text, allow_secrets=allow_secrets)
        self._admitted_before(draft_id)
        shown = self.steps.preview_draft(draft_id, text)  # refuses what cannot fit, before anything is stored
        self._prepare_call(shown.get("config") or {})
        draft = self._record(draft_id)
        user = self.user_name(draft)
        events = [e for e in (self.opening(draft),) if e is not None]
        if draft.strategy:  # the apply is recorded in the session log as `apply_strategy` records it
            events.append(NewEvent(STRATEGY_APPLIED, None, {"strategy": draft.strategy.get("name"),
                                                            "snapshot": draft.strategy,
                                                            "preset": self.presets.preset_of(draft.preset_id)[1]}))
        with self.ctx.store.unit_of_work() as uow:
            uow.openings.give_up(draft_id)
            created = uow.openings.root(draft_id, title="", user_name=user,
                                        meta=json.dumps(_draft_meta(draft), ensure_ascii=False),
                                        strategy=str(draft.strategy.get("name") or "") or None, events=events,
                                        line=text)
        self.persona.pin_persona(created.id)
        return self.playthroughs.playthrough(created.id)

    def _admitted_before(self, draft_id: int) -> None:
        """The playthrough an earlier first send of the draft prepared, when its input was admitted
        but the process stopped before it was listed: list it now and say so.

        Raises:
            TavernError: there was one (it is listed now, the draft gone).
        """
        with self.ctx.store.unit_of_work(write=False) as uow:
            prepared = uow.openings.prepared(draft_id)
        if prepared is None or not self.ctx.store.events.own_events(prepared.head_session_id,
                                                                    kinds=[EventKind.USER_MESSAGE]):
            return
        with self.ctx.store.unit_of_work() as uow:
            uow.openings.associate(prepared.id)
        raise TavernError(f"this draft's first line was already sent: it is playthrough #{prepared.id}, "
                          "listed now")

    def _prepare_call(self, config: dict[str, Any]) -> None:
        """The step's prepare stage for the first send, before the draft becomes a playthrough
        (seed 000 §7: the session is associated only after admission; §1: a call that cannot be
        prepared admits nothing): the provider validates the endpoint and the draft's call
        config and binds its adapter, without the network.

        Raises:
            TavernError: the call cannot be made as configured (what to fix; the draft is kept).
        """
        from tavern_tui.service.steps.failures import not_sent  # (the steps package imports this module)

        try:
            prepare_call(self.ctx.provider, self.ctx.provider.model, config)
        except CallConfigError as exc:
            raise TavernError(f"{not_sent(str(exc), kept=False)}; the draft and your line are kept") from exc

    async def send_first(self, draft_id: int, text: str, *, allow_secrets: bool = False,
                         started: Any = None) -> AsyncGenerator[StepUpdate, None]:
        """`begin`, then send `text` in the new playthrough (one step) and stream the reply.
        `started(view)` is told the playthrough as soon as it is prepared (it is listed once the
        send is admitted).

        Raises:
            as `begin` (nothing stored), then as `StepRunner.send` (the playthrough stays).
        """
        view = await asyncio.to_thread(self.begin, draft_id, text, allow_secrets=allow_secrets)
        if started is not None:
            started(view)
        async with aclosing(self.steps.send(view.id, text, allow_secrets=True)) as steps:
            async for update in steps:
                yield update
