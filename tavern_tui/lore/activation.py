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
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from tavern_tui.assembly.tokens import estimate_tokens
from tavern_tui.lore.buckets import build_buckets
from tavern_tui.lore.buffer import MATCHER, ScanBuffer, Segment
from tavern_tui.lore.context import ActivationContext, SourcedBook
from tavern_tui.lore.groups import filter_by_inclusion_groups
from tavern_tui.lore.matching import IndexFactory, KeyHits, ReferenceIndex
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
        self.unmatched: dict[int, tuple[dict, int]] = {}  # pos → (template, loop): a plain key miss, built lazily
        self.stages: dict[int, int] = {}  # STAGE of each held decision, by Prepared.pos
        self.settled: set[int] = set()  # positions whose decision is no-match or further
        self.pending: list[tuple[Prepared, Reason, dict]] = []  # this loop's candidates (`locate`)
        self.located: dict[tuple, dict[int, Segment | None]] = {}  # per buffer: key id -> piece
        self.activated: dict[EntryKey, tuple[Prepared, Decision]] = {}  # SillyTavern: `${world}.${uid}`
        self.failed: set[int] = set()  # failed probability rolls, by Prepared.pos
        self.overflowed = False
        self.skew = 0
        self.step = 0

    # -- decisions ---------------------------------------------------------------------------

    def note(self, p: Prepared, reason: Reason, detail: str | Callable[[], str], *, need: bool = False,
             **fields: object) -> Decision | None:
        """Record a decision for `p` if it goes further than the one held. `detail` may be a
        function, called when the decision's `detail` is first read;
        without `need`, nothing is built (and None returned) for a decision that is not kept."""
        old = self.stages.get(p.pos)
        stage = _STAGE_BY_ID[id(reason)]  # an id lookup: hashing a str Enum member runs Python code
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
        values["fired"], values["reason"], values["step"] = reason.fired, reason, self.step
        values["_detail"] = detail  # a formatter is called on first read (result.Decision.detail)
        if fields:
            values.update(fields)
        decision.__dict__ = values
        if keep:
            self.decisions[p.pos] = decision
            self.unmatched.pop(p.pos, None)
            self.stages[p.pos] = stage
            if stage >= _NO_MATCH_STAGE:
                self.settled.add(p.pos)
        return decision

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> ActivationResult:
        entries = self.plan.entries
        levels = sorted({p.delay_level for p in entries if p.delay_level})
        self.level = levels.pop(0) if levels else 0
        state = INITIAL if entries else NONE
        recursion_text = ""  # SillyTavern `allActivatedText`
        while state:
            if self.settings.max_recursion_steps and self.settings.max_recursion_steps <= self.step:
                break
            self.step += 1
            candidates = self.scan(state)
            new = sorted(candidates, key=lambda c: (c[0].key not in self.timed.sticky_active, c[0].pos))
            successful = self.admit(new, state, self.count_tokens(recursion_text))
            for_recursion = [p for p in successful if not p.entry.prevent_recursion]
            state = self.next_state(state, for_recursion, levels)
            if state:
                text = "\n".join(p.content for p in for_recursion)
                if text:
                    pieces = [Segment(f"entry:{p.book}/{p.entry.uid}", _entry_label(p), p.content, p.key)
                              for p in for_recursion]
                    self.buffer.add_recursion(text, pieces)
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

    def scan(self, state: int) -> list[tuple[Prepared, Reason, dict]]:
        """One pass of SillyTavern's per-entry checks; returns the matched candidates in scan order.

        Simple entries (`Prepared.simple`) that are not active, failed or timed can only end in key
        matching, so they are not walked one by one: only those owning a key found (or timed out)
        are; the others get their no-match decision. The rest go through the full filter chain.
        """
        candidates: list[tuple[Prepared, Reason, dict]] = []
        to_match: list[Prepared] = []
        excluded: list[Prepared] = []
        ctx, timed, plan = self.ctx, self.timed, self.plan
        touched = set(self.activated).union(timed.delayed, timed.cooldown_active, timed.sticky_active)
        complex_pos = set(self.failed)
        for key in touched:
            complex_pos.update(p.pos for p in plan.same_key.get(key, ()))
        complex_pos.update(plan.complex)
        for p in [plan.entries[pos] for pos in sorted(complex_pos)]:
            if p.pos in self.failed:
                continue
            if p.key in self.activated:
                holder = self.activated[p.key][0]
                if holder is not p:  # two entries of one book share a uid: SillyTavern keeps one
                    self.note(p, Reason.DUPLICATE_UID, f"entry {holder.pos + 1} of the scan has the same uid and is active")
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
                candidates.append((p, Reason.DECORATOR, {}))
            elif "@@dont_activate" in p.decorators:
                self.note(p, Reason.DECORATOR_SUPPRESSED, "@@dont_activate decorator")
            elif e.constant:
                candidates.append((p, Reason.CONSTANT, {}))
            elif sticky:
                candidates.append((p, Reason.STICKY, {}))
            elif not e.key:
                self.note(p, Reason.NO_KEYS, "no primary keys")
            elif all(key_id is None for _, key_id in p.primary):
                self.note(p, Reason.NO_KEYS, "every primary key is blank")
            else:
                to_match.append(p)
        self.hits = self.match(to_match + excluded, state, bulk=True)
        self.asked = {p.pos for p in to_match}
        bulk = []
        for shape, group in plan.simple.items():
            token = self.shape_token(group[0], state)
            found = self.hits[token]
            interesting: dict[int, Prepared] = {}
            for k in found.matched | found.timed_out if found.timed_out else found.matched:
                for p in plan.owners.get(k, ()):
                    if p.shape == shape and p.pos not in complex_pos:
                        interesting[p.pos] = p
            bulk.extend(interesting.values())
            # Entries already holding a no-match (or further) decision need nothing: set arithmetic
            # finds the others (all of them in the first loop, usually none later).
            depth = self.depth_of(group[0])
            todo = plan.simple_pos[shape] - complex_pos - interesting.keys() - self.settled
            # `note` inlined (it would keep every one of these): thousands per first loop.
            templates = plan.no_match.get((shape, depth))
            if templates is None:  # kept with the (cached) plan: built once per shape and depth
                templates = plan.no_match[(shape, depth)] = {
                    p.pos: {**p.template, "fired": False, "reason": _NO_MATCH,
                            "_detail": partial(_no_match, p.primary, depth)} for p in group}
            # Kept as (template, loop) pairs: the Decision objects are built only if read.
            unmatched, step = self.unmatched, self.step
            for pos in todo:
                unmatched[pos] = (templates[pos], step)
            if self.decisions:
                for pos in todo & self.decisions.keys():
                    del self.decisions[pos]
            self.stages.update(dict.fromkeys(todo, _NO_MATCH_STAGE))
            self.settled |= todo
        self.asked.update(p.pos for p in bulk)
        to_match.extend(bulk)
        for p in excluded:
            found = self.hits[self.shape_token(p, state)]
            key = next((text for text, k in p.primary if k is not None and k in found.matched), None)
            if key is not None:
                self.note(p, Reason.EXCLUDED_FROM_RECURSION,
                          f"key '{key}' found at recursion step {self.step}, but the entry is excluded from recursion")
        # SillyTavern fills one Set in scan order, whatever activated the entry.
        merged = candidates + list(self.key_candidates(to_match, self.hits, state))
        merged.sort(key=lambda c: c[0].pos)
        return merged

    def match(self, entries: list[Prepared], state: int, bulk: bool = False) -> dict[tuple, KeyHits]:
        """Ask each shape's index once for the keys of the entries that need matching; with
        `bulk`, every shape with simple entries is asked for all its keys (a superset)."""
        wanted: dict[tuple, set[int] | frozenset[int]] = {}
        if bulk:
            for shape, group in self.plan.simple.items():
                wanted[self.shape_token(group[0], state)] = self.plan.shape_ids[shape]
        for p in entries:
            ids = wanted.get(token := self.shape_token(p, state))
            if ids is None:
                ids = wanted[token] = set()
            if isinstance(ids, set):
                ids.update(p.key_ids)
        results: dict[tuple, KeyHits] = {}
        for token, ids in wanted.items():
            shape, depth, with_recursion = token
            text = self.buffer.text(depth, shape[2], with_recursion)
            results[token] = self.plan.indexes[shape].hits(text, ids)
        return results

    def shape_token(self, p: Prepared, state: int) -> tuple:
        return (p.shape, self.depth_of(p), state != MIN_ACTIVATIONS)

    def key_candidates(self, entries: list[Prepared], hits: dict[tuple, KeyHits], state: int):
        for p in entries:
            found = hits[self.shape_token(p, state)]
            primary = [(text, k) for text, k in p.primary if k is not None]
            first = next(((text, k) for text, k in primary if k in found.matched), None)
            if first is None:
                timed_out = tuple(text for text, k in primary if k in found.timed_out)
                if timed_out:
                    self.note(p, Reason.REGEX_TIMEOUT, f"regex key {timed_out[0]!r} timed out; no other key matched",
                              timed_out_keys=timed_out)
                else:
                    self.note(p, Reason.NO_MATCH, partial(_no_match, primary, self.depth_of(p)))
                continue
            if p.entry.selective and p.secondary:
                verdict, detail, timed_out = _secondary(p, found)
                if verdict is None:
                    self.note(p, Reason.REGEX_TIMEOUT, detail, timed_out_keys=timed_out)
                    continue
                if not verdict:
                    self.note(p, Reason.SECONDARY_FAILED, detail, matched_key=first[0])
                    continue
            yield (p, Reason.KEY, {"key": first, "token": self.shape_token(p, state)})

    # -- groups, probability, budget ---------------------------------------------------------

    def admit(self, new: list[tuple[Prepared, Reason, dict]], state: int, earlier_tokens: int) -> list[Prepared]:
        """Inclusion groups, probability and budget for this loop's candidates (in place of
        SillyTavern's loop over `newEntries`); returns the entries that did not fail their roll."""
        info = {c[0].pos: c for c in new}
        self.pending, self.located = new, {}  # for `locate`
        entries = [c[0] for c in new]
        losses = filter_by_inclusion_groups(
            entries, [p.entry.group for p, _ in self.activated.values()],
            lambda p: p.key in self.timed.sticky_active, lambda p: p.key in self.timed.cooldown_active,
            lambda p: self.score(p, info[p.pos], state), self.settings.use_group_scoring, self.roll)
        for c in new:
            if c[0].pos in losses:
                self.note(c[0], Reason.GROUP_LOST, losses[c[0].pos].detail)
        ignoring = sum(1 for p in entries if p.entry.ignore_budget)
        loop_text = _RunningCount(self.count_tokens)  # SillyTavern `newContent`
        for index, p in enumerate(entries):
            e = p.entry
            ignoring -= 1 if e.ignore_budget else 0
            if self.overflowed and not e.ignore_budget:
                self.note(p, Reason.OVER_BUDGET, f"budget of {self.budget} tokens already used up")
                if ignoring > 0:
                    continue
                for rest in entries[index + 1:]:
                    self.note(rest, Reason.OVER_BUDGET, f"budget of {self.budget} tokens already used up")
                break
            value = None
            if e.use_probability and e.probability != 100 and p.key not in self.timed.sticky_active:
                value = self.roll()
                if e.probability <= 0 or value > e.probability:
                    self.failed.add(p.pos)
                    why = (f"roll {value:.1f} > probability {e.probability:g}" if e.probability > 0
                           else f"probability {e.probability:g} never fires (roll {value:.1f})")
                    self.note(p, Reason.PROBABILITY_FAILED, why, roll=value, probability=e.probability)
                    continue
            used = earlier_tokens + loop_text.add(p.content + "\n")
            if not e.ignore_budget and used >= self.budget:
                self.overflowed = True
                self.note(p, Reason.OVER_BUDGET, f"{used} tokens with this entry >= budget {self.budget}",
                          roll=value, probability=e.probability if value is not None else None)
                continue
            self.fire(p, info[p.pos], value)
        return [p for p in entries if p.pos not in self.failed]

    def score(self, p: Prepared, candidate: tuple[Prepared, Reason, dict], state: int) -> int:
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

    def fire(self, p: Prepared, candidate: tuple[Prepared, Reason, dict], value: float | None) -> None:
        _, reason, data = candidate
        fields: dict[str, object] = {"roll": value, "probability": p.entry.probability if value is not None else None}
        if reason == Reason.KEY:
            text, key_id = data["key"]
            shape, depth, with_recursion = data["token"]
            segment = self.locate(key_id, shape, depth, with_recursion)
            fields.update(matched_key=text, matched_in=segment.where if segment else "buffer")
            if segment is not None and segment.from_entry is not None:
                reason = Reason.RECURSION
                fields["from_entry"] = segment.from_entry
                source_step = self.activated[segment.from_entry][1].step if segment.from_entry in self.activated else None
                detail = f"key '{text}' found in {segment.label}" + (
                    f" (activated at step {source_step})" if source_step else "")
            elif segment is not None:
                detail = f"key '{text}' found in {segment.label}"
            else:
                detail = f"key '{text}' matched the scan buffer across pieces"
        elif reason == Reason.STICKY:
            detail = f"sticky until the chat has {self.timed.sticky[p.key].end} messages"
        elif reason == Reason.CONSTANT:
            detail = "constant entry"
        else:
            detail = "@@activate decorator"
        decision = self.note(p, reason, detail, need=True, **fields)
        assert decision is not None
        held = self.activated.get(p.key)
        if held is not None and held[0] is not p:  # same book and uid: SillyTavern's Map.set replaces it
            self.stages[held[0].pos] = _STAGE_BY_ID[id(Reason.DUPLICATE_UID)]
            self.settled.discard(held[0].pos)
            self.decisions[held[0].pos] = replace(held[1], fired=False, reason=Reason.DUPLICATE_UID, detail=(
                f"replaced by entry {p.pos + 1} of the scan, which has the same uid"))
        self.activated[p.key] = (p, decision)

    def locate(self, key_id: int, shape: tuple, depth: int, with_recursion: bool) -> Segment | None:
        """The first piece of the buffer that holds the key on its own (for the decision).

        Found for all of this loop's key candidates of one buffer at once: one `hits` call per
        piece, asking the keys not yet placed (the buffer does not change within a loop)."""
        token = (shape, depth, with_recursion)
        found = self.located.get(token)
        if found is None or key_id not in found:
            wanted = {c[2]["key"][1] for c in self.pending if c[1] == Reason.KEY and c[2]["token"] == token}
            wanted.add(key_id)
            found = self.located.setdefault(token, {})
            remaining = wanted - found.keys()
            found.update(dict.fromkeys(remaining))
            index = self.plan.indexes[shape]
            for segment in self.buffer.segments(depth, shape[2], with_recursion):
                if not remaining:
                    break
                hit = index.hits(MATCHER + segment.text, remaining).matched
                for k in remaining & hit:
                    found[k] = segment
                remaining -= hit
        return found[key_id]

    # -- output --------------------------------------------------------------------------------

    def result(self) -> ActivationResult:
        activated = [
            ActivatedEntry(book=p.book, uid=p.entry.uid, comment=p.entry.comment, content=p.content,
                           position=p.entry.position, order=p.entry.order, depth=p.entry.depth, role=p.entry.role,
                           outlet_name=p.entry.outlet_name, reason=d.reason, step=d.step, source=p.source,
                           ignore_budget=p.entry.ignore_budget)
            for p, d in self.activated.values()
        ]
        used = self.count_tokens("".join(a.content + "\n" for a in activated)) if activated else 0
        new_state = self.timed.finish((p.key, p.entry) for p, _ in self.activated.values())
        # Keyed by scan position (the index in plan.entries); the result orders them.
        return ActivationResult(activated=activated, buckets=build_buckets(activated), tokens_used=used,
                                budget=self.budget, overflowed=self.overflowed, steps=self.step,
                                new_timed_state=new_state, held=self.decisions, unmatched=self.unmatched)


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
_NO_MATCH_STAGE = STAGE[Reason.NO_MATCH]
_NO_MATCH = Reason.NO_MATCH


def _new_decision() -> Decision:
    return object.__new__(Decision)


def _no_match(primary: list[tuple[str, int | None]], depth: int) -> str:
    scope = f"the last {depth} messages" if depth > 0 else "nothing (scan depth 0)"
    return f"no primary key of {[t for t, k in primary if k is not None]} found in {scope}"


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


def _secondary(p: Prepared, found: KeyHits) -> tuple[bool | None, str, tuple[str, ...]]:
    """Selective logic over the secondary keys, three-valued: a timed-out key is unknown, and
    the verdict is None when the outcome depends on it. Blank keys never match (SillyTavern: "")."""
    states = [(text, None if k is not None and k in found.timed_out else (k is not None and k in found.matched))
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
    found_keys = [t for t, s in states if s is True]
    missing = [t for t, s in states if s is False]
    timed_out = tuple(t for t, s in states if s is None)
    if verdict is None:
        return None, f"secondary regex key {timed_out[0]!r} timed out ({logic.name})", timed_out
    return verdict, f"secondary keys {logic.name}: found {found_keys}, missing {missing}", timed_out
