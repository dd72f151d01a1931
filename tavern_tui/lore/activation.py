"""Provides `activate`: which world-info entries fire this step, and why each did or did not.

Rule: SillyTavern 1.18 `checkWorldInfo` (public/scripts/world-info.js; format-digest §b.5, §b.6),
loop by loop:

1. Timed effects are evaluated (`WorldInfoTimedEffects.checkTimedEffects`).
2. Each loop walks the entries in scan order, skipping active ones and failed probability rolls:
   disabled → triggers → character filter (names, tags) → delay → cooldown (unless sticky) →
   delay-until-recursion level → exclude-recursion → `@@activate` / `@@dont_activate` →
   constant → sticky → no keys → primary keys (any) → secondary keys (selective logic).
3. Matched entries, sticky first then scan order, go through inclusion groups, then one by one
   through probability (rolled once per activation) and the token budget (`tokens(earlier loops'
   recursion text) + tokens(this loop's text) >= budget` drops the entry; its text stays counted;
   after that only `ignoreBudget` entries are accepted; constants are not exempt).
4. Another loop runs for recursion (content of this loop's successful, non-`preventRecursion`
   entries), for min activations (depth + 1, recursion text not scanned), or for the next
   pending delay-until-recursion level; `max_recursion_steps` caps the loops.
5. Content is bucketed by position; sticky/cooldown windows start for the activated entries.

Everything is pure: no I/O, the input timed state is not modified, randomness comes from `rng`.
This module runs the loops (steps 4 and 5); the state of a call is `runstate.RunState`, step 2
is `scan.scan` and step 3 `admission.admit`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from contextlib import nullcontext

from tavern_tui.lore.admission import admit
from tavern_tui.lore.buckets import build_buckets
from tavern_tui.lore.buffer import Segment
from tavern_tui.lore.context import ActivationContext, SourcedBook
from tavern_tui.lore.matching import IndexFactory, ReferenceIndex
from tavern_tui.lore.model import WorldBook
from tavern_tui.lore.prepare import Prepared, build_plan
from tavern_tui.lore.regex_budget import REGEX_STEP_BUDGET, step_budget
from tavern_tui.lore.result import ActivationResult
from tavern_tui.lore.runstate import (
    INITIAL,
    MIN_ACTIVATIONS,
    NONE,
    RECURSION,
    RunState,
    utf8_size,
)
from tavern_tui.lore.scan import scan
from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.text.tokens import estimate_tokens


def activate(
    books: Sequence[WorldBook | SourcedBook],
    ctx: ActivationContext,
    settings: WorldInfoSettings,
    *,
    rng: Callable[[], float] | None = None,
    index_factory: IndexFactory = ReferenceIndex,
    token_counter: Callable[[str], int] = estimate_tokens,
    regex_budget: float = REGEX_STEP_BUDGET,
) -> ActivationResult:
    """Run SillyTavern's world-info activation over `books` for one generation step.

    Args:
        books: the world books, each tagged with its source (`SourcedBook`; a bare `WorldBook`
            is "global"). Order matters only between books of one source (ties in `order`).
        ctx: chat, input, extra sources, character, generation type, timed state.
        settings: global world-info settings (SillyTavern `world_info_settings`).
        rng: the random source, returning a roll in [0, 100) (probability and group picks;
            a group pick uses roll / 100 × total weight). Default `random.random() * 100`.
        index_factory: builds the `KeyIndex` all key matching goes through, once per buffer
            shape per call (wrap it in `matching.IndexCache` to reuse indexes across calls).
        token_counter: tokens of a text, for the budget (default: the app's estimate).
        regex_budget: seconds all regex-key searches of this step may take together
            (`lore.regex_budget`); past it the remaining regex keys are skipped for this step,
            each decision depending on one says so (`Reason.REGEX_TIMEOUT`, key named).

    Returns:
        Decisions for every entry, activated entries, buckets, budget use and the new timed state.
    """
    roll = rng or (lambda: random.random() * 100)
    # One regex time budget for the whole step, across every book (issue 23 item 8).
    # Within the build's whole evaluation budget when there is one.
    named = ctx.deadline.part("world-info keys") if ctx.deadline is not None else nullcontext()
    with step_budget(regex_budget, ctx.deadline) as budget, named:
        plan = build_plan(books, ctx, settings, index_factory)
        result = _loop(RunState(plan, ctx, settings, roll, token_counter))
    result.regex_budget = budget.to_json()
    return result


def recursion_contents(books: Sequence[WorldBook | SourcedBook], ctx: ActivationContext,
                       settings: WorldInfoSettings, *, index_factory: IndexFactory = ReferenceIndex) -> list[str]:
    """Every distinct entry content a recursion loop may add to a scan buffer, in scan order:
    none without recursion (or with one loop at most); entries with `prevent_recursion` never
    add theirs (SillyTavern world-info.js, recursion)."""
    if not settings.recursive or settings.max_recursion_steps == 1:
        return []
    plan = build_plan(books, ctx, settings, index_factory)
    return list(dict.fromkeys(p.content for p in plan.entries if p.content and not p.entry.prevent_recursion))


def prime(books: Sequence[WorldBook | SourcedBook], ctx: ActivationContext, settings: WorldInfoSettings, *,
          index_factory: IndexFactory = ReferenceIndex, contents: Sequence[str] | None = None) -> int:
    """Prepare the key indexes of `books` for the recursion scans of later steps: each index
    that can (`FastIndex.prime`) works out the key facts of the entry contents recursion may
    add to its buffer, so a step does not scan or search a content the first time its entry
    fires. Nothing is decided and nothing changes what an activation decides.

    Args:
        books, ctx, settings: as for `activate` (the plan, and so the indexes, are the same).
        index_factory: as for `activate` (wrap it in `matching.IndexCache` so the steps reuse
            the primed indexes).
        contents: a part of `recursion_contents(...)` to prime (default: all of it; a caller
            that must not hold an index for long primes it in parts).

    Returns:
        How many contents were primed, summed over the indexes (0 without recursion, or with
        indexes that cannot prime).
    """
    if contents is None:
        contents = recursion_contents(books, ctx, settings, index_factory=index_factory)
    if not contents:
        return 0
    primed = 0
    for index in build_plan(books, ctx, settings, index_factory).indexes.values():
        prime_index = getattr(index, "prime", None)
        if prime_index is not None:
            primed += prime_index(contents)
    return primed


def _loop(run: RunState) -> ActivationResult:
    """The loops of one activation (steps 1-5 of the module docstring) and their result."""
    entries = run.plan.entries
    levels = list(run.plan.delay_levels)
    run.level = levels.pop(0) if levels else 0
    state = INITIAL if entries else NONE
    recursion_text = ""  # SillyTavern `allActivatedText` (kept only for a counter other than the estimate)
    recursion_bytes = 0  # its UTF-8 size, for the estimate
    estimate = run.count_tokens is estimate_tokens
    while state:
        if run.settings.max_recursion_steps and run.settings.max_recursion_steps <= run.step:
            break
        run.step += 1
        run.tokens = {}  # depths may widen between loops (min activations)
        candidates = scan(run, state)  # in scan order
        sticky = run.timed.sticky_active
        new = sorted(candidates, key=lambda c: (c[0].key not in sticky, c[0].pos)) if sticky else candidates
        earlier = -(-recursion_bytes // 4) if estimate else run.count_tokens(recursion_text)
        successful = admit(run, new, state, earlier)
        for_recursion = [p for p in successful if not p.entry.prevent_recursion] if run.plan.preventing \
            else successful
        state = _next_state(run, state, for_recursion, levels)
        if state and run.settings.max_recursion_steps and run.settings.max_recursion_steps <= run.step:
            break  # the cap ends the run before another loop would read the recursion text
        if state:
            text = "\n".join(p.content for p in for_recursion)
            if text:
                pieces = [_recursion_segment(p) for p in for_recursion]
                run.buffer.add_recursion(text, pieces)
                if estimate:  # text + "\n": each content's bytes + 1 ("\n" joins them, one ends it)
                    recursion_bytes += sum(p.utf8_size if p.utf8_size >= 0 else utf8_size(p)
                                           for p in for_recursion)
                else:
                    recursion_text = text + "\n" + recursion_text
    return _result(run)


def _next_state(run: RunState, state: int, for_recursion: list[Prepared], levels: list[int]) -> int:
    """The scan state of the next loop (NONE: the run ends); step 4 of the module docstring."""
    settings = run.settings
    following = NONE
    if settings.recursive and not run.overflowed and for_recursion:
        following = RECURSION
    if settings.recursive and not run.overflowed and state == MIN_ACTIVATIONS and run.buffer.recursion:
        following = RECURSION
    if (not following and not run.overflowed and settings.min_activations > 0
            and len(run.activated) < settings.min_activations):
        depth = settings.depth + run.skew
        over_max = (settings.min_activations_depth_max > 0 and depth > settings.min_activations_depth_max) \
            or depth > run.chat_length
        if not over_max:
            following = MIN_ACTIVATIONS
            run.skew += 1
    if following == NONE and levels:
        following = RECURSION
        run.level = levels.pop(0)
    return following


def _result(run: RunState) -> ActivationResult:
    activated = [held[2] for held in run.activated.values()]
    if not activated:
        used = 0
    elif run.count_tokens is estimate_tokens:  # ceil(bytes / 4) of every content + "\n"
        used = -(-run.fired_bytes // 4)
    else:
        used = run.count_tokens("".join(a.content + "\n" for a in activated))
    timing = run.plan.timing_keys  # only entries with a sticky or cooldown length start one
    new_state = run.timed.finish((key, run.activated[key][0].entry) for key in run.activated
                                 if key in timing)
    # Keyed by scan position (the index in plan.entries); the result orders them.
    return ActivationResult(activated=activated, buckets=build_buckets(activated), tokens_used=used,
                            budget=run.budget, overflowed=run.overflowed, steps=run.step,
                            new_timed_state=new_state, held=run.decisions, unmatched=run.unmatched,
                            entry_keys=run.plan.entry_keys)


def _recursion_segment(p: Prepared) -> Segment:
    """The buffer piece of `p`'s content in recursion (immutable: kept with the entry)."""
    segment = p.segment
    if segment is None:
        segment = p.segment = Segment(f"entry:{p.book}/{p.entry.uid}", _entry_label(p), p.content, p.key)
    return segment


def _entry_label(p: Prepared) -> str:
    name = f"'{p.entry.comment}' " if p.entry.comment else ""
    return f"the content of entry {name}({p.book}/{p.entry.uid})"
