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
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import fields as dataclass_fields
from dataclasses import replace
from functools import partial
from itertools import chain
from operator import attrgetter

from tavern_tui.text.tokens import estimate_tokens
from tavern_tui.lore.buckets import build_buckets
from tavern_tui.lore.buffer import ScanBuffer, Segment
from tavern_tui.lore.context import ActivationContext, SourcedBook
from tavern_tui.lore.groups import filter_by_inclusion_groups
from tavern_tui.lore.matching import IndexFactory, KeyHits, ReferenceIndex, regex_key_error
from tavern_tui.lore.model import SelectiveLogic, WorldBook
from tavern_tui.lore.prepare import Plan, Prepared, build_plan
from tavern_tui.lore.result import (
    STAGE,
    ActivatedEntry,
    ActivationResult,
    Decision,
    Reason,
)
from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.lore.timed import EntryKey, evaluate_timed

NONE, INITIAL, RECURSION, MIN_ACTIVATIONS = 0, 1, 2, 3  # SillyTavern `scan_state`

Candidate = tuple[Prepared, Reason, "tuple[str, int] | None", "tuple | None"]
"""A matched entry of a scan loop: (entry, reason, (key text, key id) and buffer token for a
KEY candidate, else None and None)."""


def activate(
    books: Sequence[WorldBook | SourcedBook],
    ctx: ActivationContext,
    settings: WorldInfoSettings,
    *,
    rng: Callable[[], float] | None = None,
    index_factory: IndexFactory = ReferenceIndex,
    token_counter: Callable[[str], int] = estimate_tokens,
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

    Returns:
        Decisions for every entry, activated entries, buckets, budget use and the new timed state.
    """
    roll = rng or (lambda: random.random() * 100)
    plan = build_plan(books, ctx, settings, index_factory)
    return _Run(plan, ctx, settings, roll, token_counter).run()


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


class _Run:
    """The state of one `activate` call (SillyTavern keeps it in `checkWorldInfo`'s locals)."""

    def __init__(self, plan: Plan, ctx: ActivationContext, settings: WorldInfoSettings,
                 roll: Callable[[], float], token_counter: Callable[[str], int]) -> None:
        self.plan, self.ctx, self.settings, self.roll = plan, ctx, settings, roll
        self.count_tokens = token_counter
        self.chat_length = ctx.effective_chat_length
        self.timed = evaluate_timed(ctx.timed_state, plan.by_key, self.chat_length, plan.delaying)
        self.buffer = ScanBuffer(ctx, settings.include_names)
        self.budget = settings.token_budget
        self.decisions: dict[int, Decision] = {}  # by Prepared.pos
        # Plain key misses of simple entries, one group per shape and loop: (positions, templates by
        # position, loop). A decision held in `decisions` overrides a group (see ActivationResult).
        self.unmatched: list[tuple[frozenset[int], dict[int, dict], int]] = []
        self.stages: dict[int, int] = {}  # STAGE of each held decision, by Prepared.pos
        self.settled: set[int] = set()  # positions noted at no-match or further (fired ones: see complex_pos)
        self.open: dict[tuple, frozenset[int]] = {}  # per shape: simple positions neither missed nor settled
        self.tokens: dict[tuple, tuple] = {}  # per shape: this loop's `shape_token`
        self.pending: list[Candidate] = []  # this loop's candidates (`locate`)
        self.located: dict[tuple, dict[int, Segment | None]] = {}  # per buffer: key id -> piece
        # SillyTavern: `${world}.${uid}` -> (entry, its decision, its ActivatedEntry)
        self.activated: dict[EntryKey, tuple[Prepared, Decision, ActivatedEntry]] = {}
        self.failed: set[int] = set()  # failed probability rolls, by Prepared.pos
        # Positions walked one by one in `scan`: complex entries, entries sharing the (book, uid)
        # of an active, timed or failed one, and failed ones; it only grows during a run.
        self.complex_pos: set[int] = set(plan.complex)
        self.done_pos: set[int] = set()  # failed entries and active ones (skipped by `scan`)
        key_pos = plan.key_pos
        for key in self.timed.delayed | self.timed.cooldown_active | self.timed.sticky_active:
            self.complex_pos.update(key_pos.get(key, ()))
        self.fired_bytes = 0  # UTF-8 bytes of the active entries' contents + "\n" each (`fire`)
        self.overflowed = False
        self.skew = 0
        self.step = 0

    # -- decisions ---------------------------------------------------------------------------

    def note(self, p: Prepared, reason: Reason, detail: str | Callable[[], str], *, need: bool = False,
             **fields: object) -> Decision | None:
        """Record a decision for `p` if it goes further than the one held. `detail` may be a
        function, called when the decision's `detail` is first read;
        without `need`, nothing is built (and None returned) for a decision that is not kept."""
        return self._note(p, reason, detail, need, fields)

    def _note(self, p: Prepared, reason: Reason, detail: str | Callable[[], str], need: bool,
              fields: dict[str, object] | None) -> Decision | None:
        """`note` with the extra fields as a dict (or None)."""
        old = self.stages.get(p.pos)
        if old is None and p.simple:
            for group in self.unmatched:  # missed in bulk by an earlier loop (only simple entries are)
                if p.pos in group[0]:
                    old = _NO_MATCH_STAGE
                    break
        stage = _STAGE_BY_ID[id(reason)]  # (by id: `STAGE` keyed by the members themselves would do as well)
        # Keep the furthest stage; on a tie the first explanation (e.g. the group winner), except
        # that a later delay-until-recursion note names the level reached.
        keep = old is None or stage > old or (
            reason is Reason.DELAY_UNTIL_RECURSION and (held := self.decisions.get(p.pos)) is not None
            and held.reason is reason)
        if not keep and not need:
            return None
        # Built without Decision.__init__ (same fields, defaults from the plan's template): an
        # activation makes thousands of these.
        decision = _new_decision()
        values = p.template.copy()
        values["fired"], values["reason"], values["step"] = id(reason) in _FIRED_IDS, reason, self.step
        values["_detail"] = detail  # a formatter is called on first read (result.Decision.detail)
        if fields:
            values.update(fields)
        decision.__dict__ = values
        if keep:
            self.decisions[p.pos] = decision  # overrides a bulk miss of an earlier loop
            self.stages[p.pos] = stage
            if stage >= _NO_MATCH_STAGE:
                self.settled.add(p.pos)
        return decision

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> ActivationResult:
        entries = self.plan.entries
        levels = list(self.plan.delay_levels)
        self.level = levels.pop(0) if levels else 0
        state = INITIAL if entries else NONE
        recursion_text = ""  # SillyTavern `allActivatedText` (kept only for a counter other than the estimate)
        recursion_bytes = 0  # its UTF-8 size, for the estimate
        estimate = self.count_tokens is estimate_tokens
        while state:
            if self.settings.max_recursion_steps and self.settings.max_recursion_steps <= self.step:
                break
            self.step += 1
            self.tokens = {}  # depths may widen between loops (min activations)
            candidates = self.scan(state)  # in scan order
            sticky = self.timed.sticky_active
            new = sorted(candidates, key=lambda c: (c[0].key not in sticky, c[0].pos)) if sticky else candidates
            earlier = -(-recursion_bytes // 4) if estimate else self.count_tokens(recursion_text)
            successful = self.admit(new, state, earlier)
            for_recursion = [p for p in successful if not p.entry.prevent_recursion] if self.plan.preventing \
                else successful
            state = self.next_state(state, for_recursion, levels)
            if state and self.settings.max_recursion_steps and self.settings.max_recursion_steps <= self.step:
                break  # the cap ends the run before another loop would read the recursion text
            if state:
                text = "\n".join(p.content for p in for_recursion)
                if text:
                    pieces = [_recursion_segment(p) for p in for_recursion]
                    self.buffer.add_recursion(text, pieces)
                    if estimate:  # text + "\n": each content's bytes + 1 ("\n" joins them, one ends it)
                        recursion_bytes += sum(p.utf8_size if p.utf8_size >= 0 else _utf8_size(p)
                                               for p in for_recursion)
                    else:
                        recursion_text = text + "\n" + recursion_text
        return self.result()

    def next_state(self, state: int, for_recursion: list[Prepared], levels: list[int]) -> int:
        settings = self.settings
        following = NONE
        if settings.recursive and not self.overflowed and for_recursion:
            following = RECURSION
        if settings.recursive and not self.overflowed and state == MIN_ACTIVATIONS and self.buffer.recursion:
            following = RECURSION
        if (not following and not self.overflowed and settings.min_activations > 0
                and len(self.activated) < settings.min_activations):
            depth = settings.depth + self.skew
            over_max = (settings.min_activations_depth_max > 0 and depth > settings.min_activations_depth_max) \
                or depth > self.chat_length
            if not over_max:
                following = MIN_ACTIVATIONS
                self.skew += 1
        if following == NONE and levels:
            following = RECURSION
            self.level = levels.pop(0)
        return following

    def depth_of(self, p: Prepared) -> int:
        entry_depth, book_depth, _ = p.shape
        if entry_depth is not None:
            return entry_depth  # SillyTavern: entry scanDepth is not widened by min activations
        base = book_depth if book_depth is not None else self.settings.depth
        return base + self.skew

    def scan(self, state: int) -> list[Candidate]:
        """One pass of SillyTavern's per-entry checks; returns the matched candidates in scan order.

        Simple entries (`Prepared.simple`) that are not active, failed or timed can only end in key
        matching, so they are not walked one by one: only those owning a key found (or timed out)
        are; the others get their no-match decision. The rest go through the full filter chain.
        """
        candidates: list[Candidate] = []
        to_match: list[Prepared] = []
        excluded: list[Prepared] = []
        ctx, timed, plan = self.ctx, self.timed, self.plan
        complex_pos = self.complex_pos  # does not change during the scan (entries fire in `admit`)
        # Failed entries and the active entry of each (book, uid) are done with: not walked.
        for p in [plan.entries[pos] for pos in sorted(complex_pos - self.done_pos)]:
            if p.key in self.activated:
                holder = self.activated[p.key][0]
                if holder is not p:  # two entries of one book share a uid: SillyTavern keeps one
                    self.note(p, Reason.DUPLICATE_UID,
                              f"entry {holder.pos + 1} of the scan has the same uid and is active")
                continue
            e = p.entry
            sticky = p.key in timed.sticky_active
            if e.disable:
                self.note(p, Reason.DISABLED, "entry is disabled")
            elif e.triggers and ctx.generation_type not in e.triggers:
                self.note(p, Reason.TRIGGER_FILTERED,
                          f"generation type '{ctx.generation_type}' not in triggers {list(e.triggers)}")
            elif (why := _character_filter(p, ctx)) is not None:
                self.note(p, Reason.CHARACTER_FILTERED, why)
            elif p.key in timed.delayed:
                self.note(p, Reason.DELAYED, f"delay {e.delay}: the chat has {self.chat_length} messages")
            elif p.key in timed.cooldown_active and not sticky:
                end = timed.cooldown[p.key].end
                self.note(p, Reason.COOLDOWN, f"cooling down until the chat has {end} messages")
            elif p.delay_level and not sticky and (state != RECURSION or p.delay_level > self.level):
                where = "outside recursion" if state != RECURSION else f"at recursion level {self.level}"
                self.note(p, Reason.DELAY_UNTIL_RECURSION, f"delayed until recursion level {p.delay_level} ({where})")
            elif state == RECURSION and self.settings.recursive and e.exclude_recursion and not sticky:
                excluded.append(p)  # only worth a decision if its key is in the buffer now
            elif "@@activate" in p.decorators:
                candidates.append((p, Reason.DECORATOR, None, None))
            elif "@@dont_activate" in p.decorators:
                self.note(p, Reason.DECORATOR_SUPPRESSED, "@@dont_activate decorator")
            elif e.constant:
                candidates.append((p, Reason.CONSTANT, None, None))
            elif sticky:
                candidates.append((p, Reason.STICKY, None, None))
            elif not e.key:
                self.note(p, Reason.NO_KEYS, "no primary keys")
            elif all(key_id is None for _, key_id in p.primary):
                self.note(p, Reason.NO_KEYS, "every primary key is blank")
            else:
                to_match.append(p)
        self.hits = self.match(to_match + excluded, state, bulk=True)
        self.asked = {p.pos for p in to_match}
        bulk = []
        decisions, entries = self.decisions, plan.entries
        for shape, group in plan.simple.items():
            token = self.shape_token(group[0], state)
            found = self.hits[token]
            keys = found.matched | found.timed_out if found.timed_out else found.matched
            # Simple entries of this shape owning a key found (or timed out), not walked above:
            # a union of per-key position tuples, in C.
            owners = plan.owner_pos[shape]
            interesting = set(chain.from_iterable(map(owners.__getitem__, keys & owners.keys())))
            interesting -= complex_pos
            bulk.extend(map(entries.__getitem__, sorted(interesting)))
            # The simple entries not looked at before and without a key found miss: one set
            # difference (thousands in the first loop, usually none later). Active, failed and
            # timed entries stay complex, and settled ones stay settled, so only the interesting
            # ones can still be open in the next loop.
            open_pos = self.open.get(shape, plan.simple_pos[shape])
            if len(open_pos) > _LAZY_MISSES:  # the first loop: thousands of misses, read only if asked for
                todo: Collection[int] = _Misses(open_pos, complex_pos | interesting | self.settled)
            else:
                todo = open_pos.difference(complex_pos, interesting, self.settled)
            self.open[shape] = open_pos.intersection(interesting)
            if not todo:
                continue
            if decisions:  # a decision below no-match (none arises today) gives way to the miss
                for pos in [pos for pos in decisions if pos in todo]:
                    del decisions[pos]
                    self.stages[pos] = _NO_MATCH_STAGE
                    self.settled.add(pos)
            depth = self.depth_of(group[0])
            templates = plan.no_match.get((shape, depth))
            if templates is None:  # kept with the (cached) plan: built once per shape and depth
                templates = plan.no_match[(shape, depth)] = {
                    p.pos: {**p.template, "fired": False, "reason": _NO_MATCH,
                            "_detail": partial(_no_match, p.primary, depth)} for p in group}
            # `note` in bulk: one group, no object per entry (Decision objects are built if read).
            self.unmatched.append((todo, templates, self.step))
        self.asked.update(map(_POS, bulk))
        if bulk:  # into scan order, so the key candidates come out in scan order
            # (each part is: the complex entries were walked in order, each shape's bulk sorted)
            to_match = sorted(to_match + bulk, key=_POS) if to_match or len(plan.simple) > 1 else bulk
        for p in excluded:
            found = self.hits[self.shape_token(p, state)]
            key = next((text for text, k in p.primary if k is not None and k in found.matched), None)
            if key is not None:
                self.note(p, Reason.EXCLUDED_FROM_RECURSION,
                          f"key '{key}' found at recursion step {self.step}, but the entry is excluded from recursion")
        # SillyTavern fills one Set in scan order, whatever activated the entry.
        keyed = self.key_candidates(to_match, self.hits, state)  # in scan order
        return sorted(candidates + keyed, key=_candidate_pos) if candidates else keyed

    def match(self, entries: list[Prepared], state: int, bulk: bool = False) -> dict[tuple, KeyHits]:
        """Ask each shape's index once for the keys of the entries that need matching; with
        `bulk`, every shape with simple entries is asked for all its keys (a superset)."""
        wanted: dict[tuple, set[int] | None] = {}
        if bulk:  # None: every key of the shape's index, which is built from exactly those
            for group in self.plan.simple.values():
                wanted[self.shape_token(group[0], state)] = None
        for p in entries:
            token = self.shape_token(p, state)
            if token not in wanted:
                wanted[token] = set(p.key_ids)
            elif (ids := wanted[token]) is not None:
                ids.update(p.key_ids)
        results: dict[tuple, KeyHits] = {}
        for token, ids in wanted.items():
            shape, depth, with_recursion = token
            text = self.buffer.text(depth, shape[2], with_recursion)
            results[token] = self.plan.indexes[shape].hits(text, ids)
        return results

    def shape_token(self, p: Prepared, state: int) -> tuple:
        """(shape, depth, with recursion): which buffer `p` scans in this loop (cached per loop)."""
        token = self.tokens.get(p.shape)
        if token is None:
            token = self.tokens[p.shape] = (p.shape, self.depth_of(p), state != MIN_ACTIVATIONS)
        return token

    def key_candidates(self, entries: list[Prepared], hits: dict[tuple, KeyHits],
                       state: int) -> list[Candidate]:
        """Primary keys (first in key order), then the selective logic over the secondary ones:
        the KEY candidates among `entries`, in their order; the others get their decision."""
        out = []
        shape = token = found = matched = None
        for p in entries:
            if p.shape is not shape:  # entries of one shape share a buffer (`make_plan` shares the tuple)
                shape = p.shape
                token = self.shape_token(p, state)
                found = hits[token]
                matched = found.matched
            for first in p.keyed:
                if first[1] in matched:
                    break
            else:
                timed_out = tuple(text for text, k in p.keyed if k in found.timed_out)
                if timed_out:
                    self.note(p, Reason.REGEX_TIMEOUT, f"regex key {timed_out[0]!r} timed out; no other key matched",
                              timed_out_keys=timed_out)
                else:
                    self.note(p, Reason.NO_MATCH, partial(_no_match, p.keyed, self.depth_of(p)))
                continue
            if p.selective:
                verdict, detail, timed_out = _secondary(p, found)
                if verdict is None:
                    self.note(p, Reason.REGEX_TIMEOUT, detail, timed_out_keys=timed_out)
                    continue
                if not verdict:
                    self.note(p, Reason.SECONDARY_FAILED, detail, matched_key=first[0])
                    continue
            out.append((p, _KEY, first, token))
        return out

    # -- groups, probability, budget ---------------------------------------------------------

    def admit(self, new: list[Candidate], state: int, earlier_tokens: int) -> list[Prepared]:
        """Inclusion groups, probability and budget for this loop's candidates (in place of
        SillyTavern's loop over `newEntries`); returns the entries that did not fail their roll."""
        self.located = {}  # for `locate`
        entries = [c[0] for c in new]
        if self.plan.grouping and any(p.group_names for p in entries):
            info = {c[0].pos: c for c in new}
            losses = filter_by_inclusion_groups(  # drops the losers from `entries`
                entries, [held[0].entry.group for held in self.activated.values()],
                lambda p: p.key in self.timed.sticky_active, lambda p: p.key in self.timed.cooldown_active,
                lambda p: self.score(p, info[p.pos], state), self.settings.use_group_scoring, self.roll)
            for c in new:
                if c[0].pos in losses:
                    self.note(c[0], Reason.GROUP_LOST, losses[c[0].pos].detail)
            new = [info[p.pos] for p in entries]
        ignoring = sum(1 for p in entries if p.ignore_budget) if self.plan.ignoring_budget else 0
        # SillyTavern `newContent`; the default estimate (bytes / 4) is summed from the entries'
        # cached sizes, any other counter re-counts the text (tokenizers are not additive).
        loop_text = None if self.count_tokens is estimate_tokens else _RunningCount(self.count_tokens)
        size = 0
        failed = False
        firing: list[tuple[Candidate, float | None]] = []  # fired after the loop (see below)
        sticky, budget = self.timed.sticky_active, self.budget
        for index, c in enumerate(new):
            p = c[0]
            ignore = p.ignore_budget
            if ignore:
                ignoring -= 1
            if self.overflowed and not ignore:
                self.note(p, Reason.OVER_BUDGET, f"budget of {budget} tokens already used up")
                if ignoring > 0:
                    continue
                for rest in entries[index + 1:]:
                    self.note(rest, Reason.OVER_BUDGET, f"budget of {budget} tokens already used up")
                break
            value = None
            if p.rolls and p.key not in sticky:
                e = p.entry
                value = self.roll()
                if e.probability <= 0 or value > e.probability:
                    failed = True
                    self.failed.add(p.pos)
                    self.complex_pos.add(p.pos)
                    self.done_pos.add(p.pos)
                    why = (f"roll {value:.1f} > probability {e.probability:g}" if e.probability > 0
                           else f"probability {e.probability:g} never fires (roll {value:.1f})")
                    self.note(p, Reason.PROBABILITY_FAILED, why, roll=value, probability=e.probability)
                    continue
            if loop_text is None:
                size += p.utf8_size if p.utf8_size >= 0 else _utf8_size(p)
                used = earlier_tokens + -(-size // 4)  # estimate_tokens: ceil(bytes / 4)
            else:
                used = earlier_tokens + loop_text.add(p.content + "\n")
            if not ignore and used >= budget:
                self.overflowed = True
                self.note(p, Reason.OVER_BUDGET, f"{used} tokens with this entry >= budget {budget}",
                          roll=value, probability=p.entry.probability if value is not None else None)
                continue
            firing.append((c, value))
        # Firing does not change what the loop above decides (budget and rolls), so the entries
        # fire together: `locate` then places only their keys, not those of entries over budget.
        self.fire(firing)
        return [p for p in entries if p.pos not in self.failed] if failed else entries

    def score(self, p: Prepared, candidate: Candidate, state: int) -> int:
        """SillyTavern `getScore`: raw primary hits (+ secondary hits for AND_ANY, or for AND_ALL
        when all found); 0 without primary keys."""
        if not p.entry.key:
            return 0
        token = self.shape_token(p, state)
        # Constant, sticky and decorator candidates skipped matching this loop: ask for their keys.
        found = self.hits[token] if p.pos in self.asked else self.match([p], state)[token]
        primary = sum(1 for k in p.raw_primary if k is None or k in found.matched)
        secondary = sum(1 for k in p.raw_secondary if k is None or k in found.matched)
        if p.entry.keysecondary:
            if p.entry.selective_logic == SelectiveLogic.AND_ANY:
                return primary + secondary
            if p.entry.selective_logic == SelectiveLogic.AND_ALL:
                return primary + secondary if secondary == len(p.entry.keysecondary) else primary
        return primary

    def fire(self, firing: list[tuple[Candidate, float | None]]) -> None:
        """Activate this loop's admitted candidates, in order, each with its probability roll (or
        None): its decision (where its key was found) and the run's bookkeeping."""
        self.pending = [c for c, _ in firing]  # the keys `locate` places
        step = self.step
        decisions, stages, done_pos, complex_pos = self.decisions, self.stages, self.done_pos, self.complex_pos
        activated, located = self.activated, self.located
        fired_bytes = 0
        for c, value in firing:
            p, reason, first, token = c
            # `_note` inlined: a firing always goes further than any decision held (an entry fires
            # at most once: then it is active and never a candidate again). Fields left unset read
            # as the Decision defaults (roll, probability, from_entry: None).
            values = p.template.copy()
            if value is not None:
                values["roll"] = value
                values["probability"] = p.entry.probability
            if reason is _KEY:
                text, key_id = first
                placed = located.get(token)
                segment = placed.get(key_id, _UNPLACED) if placed is not None else _UNPLACED
                if segment is _UNPLACED:
                    segment = self.locate(key_id, *token)
                values["matched_key"] = text
                if segment is None:
                    values["matched_in"] = "buffer"
                    detail = f"key '{text}' matched the scan buffer across pieces"
                else:
                    values["matched_in"] = segment.where
                    source_key = segment.from_entry
                    if source_key is None:
                        detail = f"key '{text}' found in {segment.label}"
                    else:
                        reason = _RECURSION
                        values["from_entry"] = source_key
                        source = activated.get(source_key)  # (fired in an earlier loop)
                        source_step = source[1].step if source is not None else None
                        detail = f"key '{text}' found in {segment.label} (activated at step {source_step})" \
                            if source_step else f"key '{text}' found in {segment.label}"
            elif reason is Reason.STICKY:
                detail = f"sticky until the chat has {self.timed.sticky[p.key].end} messages"
            elif reason is Reason.CONSTANT:
                detail = "constant entry"
            else:
                detail = "@@activate decorator"
            values["fired"] = True
            values["reason"] = reason
            values["step"] = step
            values["_detail"] = detail
            decision = _NEW(Decision)
            decision.__dict__ = values
            pos, key = p.pos, p.key
            decisions[pos] = decision
            stages[pos] = _FIRED_STAGE  # (not `settled`: its positions are `complex_pos` from now on)
            done_pos.add(pos)
            same = p.same_pos  # active from now on: checked one by one
            if len(same) == 1:
                complex_pos.add(pos)
                held = None  # (no other entry has its book and uid)
            else:
                complex_pos.update(same)
                held = activated.get(key)
            if held is not None and held[0] is not p:  # same book and uid: SillyTavern's Map.set replaces it
                gone = held[0]
                done_pos.discard(gone.pos)  # (unless its roll failed: then it never fired)
                stages[gone.pos] = _STAGE_BY_ID[id(Reason.DUPLICATE_UID)]
                self.settled.discard(gone.pos)
                decisions[gone.pos] = replace(held[1], fired=False, reason=Reason.DUPLICATE_UID, detail=(
                    f"replaced by entry {p.pos + 1} of the scan, which has the same uid"))
                fired_bytes -= gone.utf8_size if gone.utf8_size >= 0 else _utf8_size(gone)
            made = p.fired_entries
            entry = made.get((reason, step)) if made is not None else None
            if entry is None:
                entry = _activated_entry(p, reason, step)
            activated[key] = (p, decision, entry)
            fired_bytes += p.utf8_size if p.utf8_size >= 0 else _utf8_size(p)
        self.fired_bytes += fired_bytes

    def locate(self, key_id: int, shape: tuple, depth: int, with_recursion: bool) -> Segment | None:
        """The first piece of the buffer that holds the key on its own (for the decision).

        Found for all of this loop's key candidates of one buffer at once: one `hits` call per
        piece, asking the keys not yet placed (the buffer does not change within a loop), or
        one `first_hits` call for an index that has it (FastIndex)."""
        token = (shape, depth, with_recursion)
        found = self.located.get(token)
        if found is None or key_id not in found:
            wanted = {c[2][1] for c in self.pending if c[3] == token}  # the KEY candidates of this buffer
            wanted.add(key_id)
            found = self.located.setdefault(token, {})
            remaining = wanted - found.keys()
            found.update(dict.fromkeys(remaining))
            index = self.plan.indexes[shape]
            segments = self.buffer.segments(depth, shape[2], with_recursion)
            first_hits = getattr(index, "first_hits", None)
            if first_hits is not None:  # FastIndex: one call for all pieces
                # Keys the last loop's buffer did not hold are looked for in this loop's new pieces.
                base = self.buffer.previous(depth, shape[2]) if with_recursion else None
                texts = [segment.matcher for segment in segments]
                placed = first_hits(texts, remaining, *base) if base else first_hits(texts, remaining)
                for k, at in placed.items():
                    found[k] = segments[at]
            else:
                for segment in segments:
                    if not remaining:
                        break
                    hit = index.hits(segment.matcher, remaining).matched
                    for k in remaining & hit:
                        found[k] = segment
                    remaining -= hit
        return found[key_id]

    # -- output --------------------------------------------------------------------------------

    def result(self) -> ActivationResult:
        activated = [held[2] for held in self.activated.values()]
        if not activated:
            used = 0
        elif self.count_tokens is estimate_tokens:  # ceil(bytes / 4) of every content + "\n"
            used = -(-self.fired_bytes // 4)
        else:
            used = self.count_tokens("".join(a.content + "\n" for a in activated))
        timing = self.plan.timing_keys  # only entries with a sticky or cooldown length start one
        new_state = self.timed.finish((key, self.activated[key][0].entry) for key in self.activated
                                      if key in timing)
        # Keyed by scan position (the index in plan.entries); the result orders them.
        return ActivationResult(activated=activated, buckets=build_buckets(activated), tokens_used=used,
                                budget=self.budget, overflowed=self.overflowed, steps=self.step,
                                new_timed_state=new_state, held=self.decisions, unmatched=self.unmatched)


class _Misses(Collection[int]):
    """The positions of `open_pos` not in `taken` (a snapshot), without building that set: a
    scan's first loop misses nearly every entry of a big book, and a step usually reads only
    the notable decisions (`ActivationResult.notable`), never these."""

    __slots__ = ("open_pos", "taken")

    def __init__(self, open_pos: frozenset[int], taken: set[int]) -> None:
        self.open_pos, self.taken = open_pos, taken

    def __contains__(self, pos: object) -> bool:
        return pos in self.open_pos and pos not in self.taken

    def __iter__(self) -> Iterator[int]:
        return iter(self.open_pos.difference(self.taken))

    def __len__(self) -> int:
        return len(self.open_pos.difference(self.taken))

    def __bool__(self) -> bool:
        return len(self.open_pos) > len(self.taken) or not self.open_pos <= self.taken


_LAZY_MISSES = 256  # `_Misses` for more open positions than this (a plain set is quicker to ask)


class _RunningCount:
    """Tokens of a growing text. The default estimate (bytes / 4) is counted incrementally; any
    other counter re-counts the whole text, as SillyTavern does (tokenizers are not additive)."""

    def __init__(self, counter: Callable[[str], int]) -> None:
        self.counter = counter
        self.text = ""
        self.size = 0

    def add(self, piece: str) -> int:
        if self.counter is estimate_tokens:
            self.size += len(piece.encode("utf-8"))
            return math.ceil(self.size / 4)
        self.text += piece
        return self.counter(self.text)


_STAGE_BY_ID = {id(reason): stage for reason, stage in STAGE.items()}
_FIRED_IDS = frozenset(id(reason) for reason in Reason if reason.fired)
_FIRED_STAGE = STAGE[Reason.KEY]  # `fire` relies on it: a firing goes further than any other stage
assert all(STAGE[reason] == _FIRED_STAGE for reason in Reason if reason.fired)
assert all(STAGE[reason] < _FIRED_STAGE for reason in Reason if not reason.fired)
_NO_MATCH_STAGE = STAGE[Reason.NO_MATCH]
_NO_MATCH = Reason.NO_MATCH
_KEY = Reason.KEY
_RECURSION = Reason.RECURSION
_POS = attrgetter("pos")
_NEW = object.__new__
_UNPLACED = object()  # `_Run.located` holds no answer for a key yet (None: across pieces)


def _candidate_pos(candidate: Candidate) -> int:
    return candidate[0].pos


def _utf8_size(p: Prepared) -> int:
    """UTF-8 bytes of `p.content + "\n"` (what the estimate counts per entry), kept with the entry."""
    p.utf8_size = len(p.content.encode("utf-8")) + 1
    return p.utf8_size


def _new_decision() -> Decision:
    return object.__new__(Decision)


def _activated_entry(p: Prepared, reason: Reason, step: int) -> ActivatedEntry:
    """`ActivatedEntry(...)` for `p`. It is immutable and depends only on the entry, the reason
    and the loop, so one object per (reason, loop) is kept with the entry and shared by results
    (the frozen dataclass's `__init__` would set each field through `object.__setattr__`)."""
    made = p.fired_entries
    if made is None:
        made = p.fired_entries = {}
    entry = made.get((reason, step))
    if entry is None:
        e = p.entry
        entry = object.__new__(ActivatedEntry)
        object.__setattr__(entry, "__dict__", {
            "book": p.book, "uid": e.uid, "comment": e.comment, "content": p.content, "position": e.position,
            "order": e.order, "depth": e.depth, "role": e.role, "outlet_name": e.outlet_name, "reason": reason,
            "step": step, "source": p.source, "ignore_budget": e.ignore_budget})
        made[(reason, step)] = entry
    return entry


_ACTIVATED_FIELDS = {"book", "uid", "comment", "content", "position", "order", "depth", "role", "outlet_name",
                     "reason", "step", "source", "ignore_budget"}
assert _ACTIVATED_FIELDS == {f.name for f in dataclass_fields(ActivatedEntry)}  # `_activated_entry` sets each


def _no_match(primary: list[tuple[str, int | None]], depth: int) -> str:
    scope = f"the last {depth} messages" if depth > 0 else "nothing (scan depth 0)"
    keys = [t for t, k in primary if k is not None]
    broken = [f"{t!r} is not a valid regex ({why}), so it was looked for as plain text"
              for t in keys if (why := regex_key_error(t)) is not None]
    return f"no primary key of {keys} found in {scope}" + "".join(f"; {b}" for b in broken)


def _recursion_segment(p: Prepared) -> Segment:
    """The buffer piece of `p`'s content in recursion (immutable: kept with the entry)."""
    segment = p.segment
    if segment is None:
        segment = p.segment = Segment(f"entry:{p.book}/{p.entry.uid}", _entry_label(p), p.content, p.key)
    return segment


def _entry_label(p: Prepared) -> str:
    name = f"'{p.entry.comment}' " if p.entry.comment else ""
    return f"the content of entry {name}({p.book}/{p.entry.uid})"


def _character_filter(p: Prepared, ctx: ActivationContext) -> str | None:
    """SillyTavern's character filter: file names, then tags; `is_exclude` inverts. None = passes."""
    rule = p.entry.character_filter
    if rule is None:
        return None
    if rule.names:
        included = ctx.character_file in rule.names
        if included if rule.is_exclude else not included:
            verb = "excluded by" if rule.is_exclude else "not in"
            return f"character '{ctx.character_file}' {verb} the filter names {list(rule.names)}"
    if rule.tags and ctx.character_tags is not None:
        has_tag = any(tag in rule.tags for tag in ctx.character_tags)
        if has_tag if rule.is_exclude else not has_tag:
            verb = "has an excluded tag of" if rule.is_exclude else "has none of the tags"
            return f"character {verb} {list(rule.tags)}"
    return None


def _secondary(p: Prepared, found: KeyHits) -> tuple[bool | None, str | Callable[[], str], tuple[str, ...]]:
    """Selective logic over the secondary keys, three-valued: a timed-out key is unknown, and
    the verdict is None when the outcome depends on it. Blank keys never match (SillyTavern: "").

    Returns (verdict, detail, timed-out keys); for a True/False verdict the detail is a formatter
    (called only if the decision's detail is read; most verdicts are never explained)."""
    matched, timed = found.matched, found.timed_out
    states = [(text, None if k is not None and k in timed else (k is not None and k in matched))
              for text, k in p.secondary]
    values = [s for _, s in states]
    logic = SelectiveLogic(p.entry.selective_logic)
    if logic == SelectiveLogic.AND_ANY:
        verdict = True if True in values else (None if None in values else False)
    elif logic == SelectiveLogic.NOT_ALL:
        verdict = True if False in values else (None if None in values else False)
    elif logic == SelectiveLogic.NOT_ANY:
        verdict = False if True in values else (None if None in values else True)
    else:
        verdict = False if False in values else (None if None in values else True)
    if verdict is None:
        timed_out = tuple(t for t, s in states if s is None)
        return None, f"secondary regex key {timed_out[0]!r} timed out ({logic.name})", timed_out
    return verdict, partial(_secondary_detail, states, logic), ()


def _secondary_detail(states: list[tuple[str, bool | None]], logic: SelectiveLogic) -> str:
    found_keys = [t for t, s in states if s is True]
    missing = [t for t, s in states if s is False]
    return f"secondary keys {logic.name}: found {found_keys}, missing {missing}"
