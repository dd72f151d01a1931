"""Provides world info for one step: the scan context from the chat, activation, and what the
request header records (decisions) and the session keeps (timed effects per branch).

Rules: SillyTavern `Generate` builds the scan from the visible chat plus the message being sent
(world-info.js `checkWorldInfo`); timed effects live per chat and branches inherit them
(format-digest §b.6), which here falls out of the session log: the newest `lore/state` event on
the fork's surface is its state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tavern_tui.assembly.memo import SKIP, per_prefix
from tavern_tui.engine.events import Event, NewEvent
from tavern_tui.engine.log import PLACEHOLDER_SOURCE, SYSTEM_PROMPT_SOURCE, SurfaceMessage
from tavern_tui.lore.activation import activate, prime, recursion_contents
from tavern_tui.lore.buckets import build_buckets
from tavern_tui.lore.context import ActivationContext, ScanMessage, SourcedBook
from tavern_tui.lore.eval_budget import EvalBudget
from tavern_tui.lore.matching import IndexCache
from tavern_tui.lore.model import Position
from tavern_tui.lore.result import ActivatedEntry, ActivationResult, Decision, compact_uids
from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.lore.timed import LORE_STATE_KIND, TimedState

PRIME_CHUNK = 500
"""Entry contents primed per hold of the index (`WorldInfoStep.prime`)."""
PRIME_PAUSE = 0.005
"""Seconds `WorldInfoStep.prime` lets go of the index between parts (time for a waiting step's
event loop to take it)."""


def timed_state_of(events: Sequence[Event]) -> TimedState:
    """The newest timed state on a surface (ancestors included, so a fork inherits its parent's)."""
    for event in reversed(events):
        if event.kind == LORE_STATE_KIND:
            return TimedState.from_json(event.body)
    return TimedState()


@dataclass(frozen=True)
class CardFacts:
    """What of the character world info reads: names, extra scan sources, filter facts."""

    char_name: str
    user_name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    depth_prompt: str = ""
    creator_notes: str = ""
    character_file: str = ""
    tags: tuple[str, ...] = ()

    @classmethod
    def from_card(cls, data: dict[str, Any], char_name: str, user_name: str, character_file: str) -> CardFacts:
        """From a normalised card `data` (`extensions.depth_prompt.prompt` is the character's note)."""
        depth = (data.get("extensions") or {}).get("depth_prompt") or {}
        return cls(char_name, user_name, str(data.get("description") or ""), str(data.get("personality") or ""),
                   str(data.get("scenario") or ""), str(depth.get("prompt") or "") if isinstance(depth, dict) else "",
                   str(data.get("creator_notes") or ""), character_file,
                   tuple(str(t) for t in data.get("tags") or ()))


_scanned: tuple[Sequence[SurfaceMessage], tuple[str, str], tuple[ScanMessage, ...]] | None = None


def scan_context(history: Sequence[SurfaceMessage], claimed: Sequence[str], facts: CardFacts,
                 timed_state: TimedState, generation_type: str = "normal",
                 expand_key: Callable[[str], str] | None = None,
                 deadline: EvalBudget | None = None) -> ActivationContext:
    """The activation context of a step: visible history (no system section, no placeholder
    replies, no failed empty attempts) plus the claimed input as the newest message;
    `expand_key` expands macros in keys (`ActivationContext.expand_key`); `deadline` is the
    build's evaluation budget (`ActivationContext.deadline`).

    The scan messages of the last history list seen are kept (the same list object, as the
    service hands out while the log is unchanged: a preview, the gauge and a step's preflight
    in turn), so a 5,000-message chat is not walked again for each."""
    global _scanned
    last = _scanned
    if last is not None and last[0] is history and last[1] == (facts.user_name, facts.char_name):
        messages = last[2]
    else:
        user, char = facts.user_name, facts.char_name
        messages = per_prefix(  # only a grown history's new messages convert
            history, "worldinfo.scan",
            lambda m: ScanMessage(user if m.role == "user" else char, m.content, m.ref)
            if m.source not in (SYSTEM_PROMPT_SOURCE, PLACEHOLDER_SOURCE) and m.role in ("user", "assistant")
            and m.content else SKIP, key=(user, char))
        _scanned = (history, (facts.user_name, facts.char_name), messages)
    text = "\n".join(claimed) if claimed else None
    return ActivationContext(
        messages=messages, input=text, char_name=facts.char_name, user_name=facts.user_name,
        character_description=facts.description, character_personality=facts.personality,
        character_depth_prompt=facts.depth_prompt, scenario=facts.scenario, creator_notes=facts.creator_notes,
        character_file=facts.character_file, character_tags=facts.tags, generation_type=generation_type,
        timed_state=timed_state, expand_key=expand_key, deadline=deadline)


def decisions_record(result: ActivationResult) -> dict[str, Any]:
    """The request header's world-info record: every decision, compactly.

    Entries that fired, and entries skipped for a specific reason, get their whole decision;
    the (usually many) entries whose keys simply did not match are listed by book and uid, in
    uid order with runs of consecutive uids as `[first, last]` (`lore.result.compact_uids`).
    """
    no_match = {book: compact_uids(uids) for book, uids in result.no_match_uids().items()}
    record: dict[str, Any] = {"fired": [], "skipped": [], "no_match": no_match,
                              "tokens_used": result.tokens_used, "budget": result.budget,
                              "overflowed": result.overflowed}
    if result.regex_budget:  # issue 23 item 8: the regex time budget and what it used
        record["regex_budget"] = result.regex_budget
    for decision in result.notable:  # the misses are never built as objects here
        record["fired" if decision.fired else "skipped"].append(decision.to_json())
    return record


@dataclass
class WorldInfoStep:
    """World info for the steps of one playthrough: books, settings and a reusable key index.

    Attributes:
        books: the effective books with their sources (chat, persona, global, character).
        settings: SillyTavern world-info settings.
        rng: a roll source in [0, 100) (None = random).
        cache: compiled key indexes reused across steps while the books do not change.
        content_hook: rewrites each fired entry's content after activation and the budget, before
            the buckets are built (SillyTavern runs its WORLD_INFO regex scripts there; templates
            run per entry too, so one broken entry cannot blank its neighbours); None = as fired.
    """

    books: Sequence[SourcedBook]
    settings: WorldInfoSettings = field(default_factory=WorldInfoSettings)
    rng: Callable[[], float] | None = None
    cache: IndexCache = field(default_factory=IndexCache)
    content_hook: Callable[[ActivatedEntry], str] | None = None

    def run(self, ctx: ActivationContext) -> ActivationResult:
        """Activate the books for `ctx` (pure: the caller stores `new_timed_state`). One
        activation at a time per cache (`IndexCache.in_use`)."""
        with self.cache.in_use:
            result = activate(self.books, ctx, self.settings, rng=self.rng, index_factory=self.cache)
        if self.content_hook is not None and result.activated:
            hook = self.content_hook
            rewritten = [replace(e, content=hook(e)) for e in result.activated]
            if any(a.content != b.content for a, b in zip(rewritten, result.activated)):
                result.activated = rewritten
                result.buckets = build_buckets(rewritten)
        return result

    def prime(self, ctx: ActivationContext, chunk: int = PRIME_CHUNK) -> int:
        """Prepare the books' key indexes for later steps (`lore.activation.prime`: every entry
        content's key facts, for recursion); returns how many contents were primed.

        Primed `chunk` contents at a time, each part holding the index (`IndexCache.in_use`) and
        then letting go of the interpreter: a step that waits for the index (the warm-up runs
        in a worker; a 5,000-entry book takes ~0.3-1 s) waits for one part, not all of it."""
        with self.cache.in_use:
            contents = recursion_contents(self.books, ctx, self.settings, index_factory=self.cache)
        primed = 0
        for start in range(0, len(contents), chunk):
            with self.cache.in_use:
                primed += prime(self.books, ctx, self.settings, index_factory=self.cache,
                                contents=contents[start:start + chunk])
            time.sleep(PRIME_PAUSE)  # a step waiting for the index (`IndexCache.wait_free`) takes it now
        return primed

    @staticmethod
    def state_event(result: ActivationResult) -> NewEvent:
        """The `lore/state` event that keeps this step's timed effects on the branch."""
        return NewEvent(LORE_STATE_KIND, None, result.new_timed_state.to_json())


_PROMPT_RANK = {Position.BEFORE_CHAR: 0, Position.AFTER_CHAR: 1, Position.EM_TOP: 2, Position.EM_BOTTOM: 3,
                Position.AN_TOP: 4, Position.AN_BOTTOM: 5, Position.AT_DEPTH: 6, Position.OUTLET: 7}


def insertion_order(result: ActivationResult) -> list[Decision]:
    """Decisions with the fired ones first, in the order their content enters the prompt:
    world info before the character, after it, example blocks (top, bottom), author's-note
    top/bottom, @depth (deepest first), outlets; ascending `order` inside each place (outlets:
    highest first), as SillyTavern builds its buckets (format-digest §b.5.8). Entries that did
    not fire follow in the order they were considered."""
    def key(decision: Decision) -> tuple[int, int, float]:
        position = Position(decision.position)
        depth = -(decision.depth or 0) if position is Position.AT_DEPTH else 0
        order = -decision.order if position is Position.OUTLET else decision.order
        return (_PROMPT_RANK[position], depth, order)

    fired = sorted((d for d in result.decisions if d.fired), key=key)
    return fired + [d for d in result.decisions if not d.fired]
