"""Provides `scan`: one loop's per-entry checks of a world-info activation, up to key matching.

Rule: SillyTavern 1.18 `checkWorldInfo` (public/scripts/world-info.js; format-digest §b.5), the
walk over the entries in scan order: disabled → triggers → character filter (names, tags) →
delay → cooldown (unless sticky) → delay-until-recursion level → exclude-recursion →
`@@activate` / `@@dont_activate` → constant → sticky → no keys → primary keys (any) → secondary
keys (selective logic). Pure: a function over the run's state (`runstate.RunState`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from functools import partial
from itertools import chain
from operator import attrgetter

from tavern_tui.lore.context import ActivationContext
from tavern_tui.lore.matching import KeyHits, refused_regex_key, regex_key_error
from tavern_tui.lore.model import SelectiveLogic
from tavern_tui.lore.prepare import Prepared, Shape
from tavern_tui.lore.regex_budget import budget_skipping
from tavern_tui.lore.result import Reason
from tavern_tui.lore.runstate import NO_MATCH_STAGE, RECURSION, Candidate, RunState


def scan(run: RunState, state: int) -> list[Candidate]:
    """One pass of SillyTavern's per-entry checks; returns the matched candidates in scan order.

    Simple entries (`Prepared.simple`) that are not active, failed or timed can only end in key
    matching, so they are not walked one by one: only those owning a key found (or timed out)
    are; the others get their no-match decision. The rest go through the full filter chain.
    """
    candidates, to_match, excluded = _walk_complex(run, state)
    run.hits = run.match(to_match + excluded, state, bulk=True)
    run.asked = {p.pos for p in to_match}
    bulk = _bulk_simple(run, state)
    run.asked.update(map(_POS, bulk))
    if bulk:  # into scan order, so the key candidates come out in scan order
        # (each part is: the complex entries were walked in order, each shape's bulk sorted)
        to_match = sorted(to_match + bulk, key=_POS) if to_match or len(run.plan.simple) > 1 else bulk
    for p in excluded:
        found = run.hits[run.shape_token(p, state)]
        key = next((text for text, k in p.primary if k is not None and k in found.matched), None)
        if key is not None:
            run.note(p, Reason.EXCLUDED_FROM_RECURSION,
                     f"key '{key}' found at recursion step {run.step}, but the entry is excluded from recursion")
    # SillyTavern fills one Set in scan order, whatever activated the entry.
    keyed = _key_candidates(run, to_match, run.hits, state)  # in scan order
    return sorted(candidates + keyed, key=_candidate_pos) if candidates else keyed


def _walk_complex(run: RunState, state: int) -> tuple[list[Candidate], list[Prepared], list[Prepared]]:
    """The filter chain over the complex entries, in scan order: (candidates that need no key,
    entries left to key matching, entries excluded from recursion); the others get their decision."""
    candidates: list[Candidate] = []
    to_match: list[Prepared] = []
    excluded: list[Prepared] = []
    ctx, timed = run.ctx, run.timed
    entries = run.plan.entries
    # Failed entries and the active entry of each (book, uid) are done with: not walked.
    for p in [entries[pos] for pos in sorted(run.complex_pos - run.done_pos)]:
        if p.key in run.activated:
            holder = run.activated[p.key][0]
            if holder is not p:  # two entries of one book share a uid: SillyTavern keeps one
                run.note(p, Reason.DUPLICATE_UID,
                         f"entry {holder.pos + 1} of the scan has the same uid and is active")
            continue
        e = p.entry
        sticky = p.key in timed.sticky_active
        if e.disable:
            run.note(p, Reason.DISABLED, "entry is disabled")
        elif e.triggers and ctx.generation_type not in e.triggers:
            run.note(p, Reason.TRIGGER_FILTERED,
                     f"generation type '{ctx.generation_type}' not in triggers {list(e.triggers)}")
        elif (why := _character_filter(p, ctx)) is not None:
            run.note(p, Reason.CHARACTER_FILTERED, why)
        elif p.key in timed.delayed:
            run.note(p, Reason.DELAYED, f"delay {e.delay}: the chat has {run.chat_length} messages")
        elif p.key in timed.cooldown_active and not sticky:
            end = timed.cooldown[p.key].end
            run.note(p, Reason.COOLDOWN, f"cooling down until the chat has {end} messages")
        elif p.delay_level and not sticky and (state != RECURSION or p.delay_level > run.level):
            where = "outside recursion" if state != RECURSION else f"at recursion level {run.level}"
            run.note(p, Reason.DELAY_UNTIL_RECURSION, f"delayed until recursion level {p.delay_level} ({where})")
        elif state == RECURSION and run.settings.recursive and e.exclude_recursion and not sticky:
            excluded.append(p)  # only worth a decision if its key is in the buffer now
        elif "@@activate" in p.decorators:
            candidates.append((p, Reason.DECORATOR, None, None))
        elif "@@dont_activate" in p.decorators:
            run.note(p, Reason.DECORATOR_SUPPRESSED, "@@dont_activate decorator")
        elif e.constant:
            candidates.append((p, Reason.CONSTANT, None, None))
        elif sticky:
            candidates.append((p, Reason.STICKY, None, None))
        elif not e.key:
            run.note(p, Reason.NO_KEYS, "no primary keys")
        elif all(key_id is None for _, key_id in p.primary):
            run.note(p, Reason.NO_KEYS, "every primary key is blank")
        else:
            to_match.append(p)
    return candidates, to_match, excluded


def _bulk_simple(run: RunState, state: int) -> list[Prepared]:
    """The simple entries owning a key found (or timed out) in `run.hits`, each shape's sorted,
    to go through key matching; the rest of the open ones get their no-match decision in bulk."""
    bulk: list[Prepared] = []
    plan = run.plan
    entries = plan.entries
    complex_pos = run.complex_pos  # does not change during the scan (entries fire in `admission.admit`)
    for shape, group in plan.simple.items():
        token = run.shape_token(group[0], state)
        found = run.hits[token]
        keys = found.matched | found.timed_out if found.timed_out else found.matched
        # Simple entries of this shape owning a key found (or timed out), not walked above: the
        # owner of each key one entry owns, and the position tuples of shared keys, in C.
        one, many = plan.owner_pos[shape]
        interesting = set(map(one.__getitem__, keys & one.keys()))
        if many:
            interesting.update(chain.from_iterable(map(many.__getitem__, keys & many.keys())))
        interesting -= complex_pos
        bulk.extend(map(entries.__getitem__, sorted(interesting)))
        # The simple entries not looked at before and without a key found miss: one set
        # difference (thousands in the first loop, usually none later). Active, failed and
        # timed entries stay complex, and settled ones stay settled, so only the interesting
        # ones can still be open in the next loop.
        open_pos = run.open.get(shape, plan.simple_pos[shape])
        if len(open_pos) > _LAZY_MISSES:  # the first loop: thousands of misses, read only if asked for
            todo: Collection[int] = _Misses(open_pos, complex_pos | interesting | run.settled)
        else:
            todo = open_pos.difference(complex_pos, interesting, run.settled)
        run.open[shape] = open_pos.intersection(interesting)
        if todo:
            _note_misses(run, shape, group, todo)
    return bulk


def _note_misses(run: RunState, shape: Shape, group: list[Prepared], todo: Collection[int]) -> None:
    """`note` in bulk for one shape's misses: one group, no object per entry (Decision objects
    are built if read)."""
    decisions, plan = run.decisions, run.plan
    if decisions:  # a decision below no-match (none arises today) gives way to the miss
        for pos in [pos for pos in decisions if pos in todo]:
            del decisions[pos]
            run.stages[pos] = NO_MATCH_STAGE
            run.settled.add(pos)
    depth = run.depth_of(group[0])
    templates = plan.no_match.get((shape, depth))
    if templates is None:  # kept with the (cached) plan, one per shape and depth
        templates = plan.no_match[(shape, depth)] = NoMatchTemplates(plan.entries, group, depth)
    run.unmatched.append((todo, templates, run.step))


class NoMatchTemplates(Mapping[int, dict]):
    """Scan position -> the fields of that simple entry's no-match `Decision` (with a detail
    formatter), for one shape's entries at one depth. Each is made when read (a new dict each
    time): a step reads them only if it builds every decision, so a cold step does not make
    thousands of them."""

    __slots__ = ("depth", "entries", "group")

    def __init__(self, entries: list[Prepared], group: list[Prepared], depth: int) -> None:
        self.entries, self.group, self.depth = entries, group, depth

    def __getitem__(self, pos: int) -> dict:
        p = self.entries[pos]
        return {**p.template, "fired": False, "reason": _NO_MATCH, "_detail": partial(_no_match, p.primary, self.depth)}

    def __iter__(self) -> Iterator[int]:
        return map(_POS, self.group)

    def __len__(self) -> int:
        return len(self.group)

def _key_candidates(run: RunState, entries: list[Prepared], hits: dict[tuple, KeyHits],
                    state: int) -> list[Candidate]:
    """Primary keys (first in key order), then the selective logic over the secondary ones:
    the KEY candidates among `entries`, in their order; the others get their decision."""
    out = []
    shape = token = found = matched = None
    for p in entries:
        if p.shape is not shape:  # entries of one shape share a buffer (`make_plan` shares the tuple)
            shape = p.shape
            token = run.shape_token(p, state)
            found = hits[token]
            matched = found.matched
        for first in p.keyed:
            if first[1] in matched:
                break
        else:
            timed_out = tuple(text for text, k in p.keyed if k in found.timed_out)
            if timed_out:
                why = ("was skipped: the step's regex time budget was used up" if budget_skipping()
                       else "timed out")
                run.note(p, Reason.REGEX_TIMEOUT, f"regex key {timed_out[0]!r} {why}; no other key matched",
                         timed_out_keys=timed_out)
            else:
                run.note(p, Reason.NO_MATCH, partial(_no_match, p.keyed, run.depth_of(p)))
            continue
        if p.selective:
            verdict, detail, timed_out = _secondary(p, found)
            if verdict is None:
                run.note(p, Reason.REGEX_TIMEOUT, detail, timed_out_keys=timed_out)
                continue
            if not verdict:
                run.note(p, Reason.SECONDARY_FAILED, detail, matched_key=first[0])
                continue
        out.append((p, _KEY, first, token))
    return out


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


_NO_MATCH = Reason.NO_MATCH
_KEY = Reason.KEY
_POS = attrgetter("pos")


def _candidate_pos(candidate: Candidate) -> int:
    return candidate[0].pos


def _no_match(primary: Sequence[tuple[str, int | None]], depth: int) -> str:
    scope = f"the last {depth} messages" if depth > 0 else "nothing (scan depth 0)"
    keys = [t for t, k in primary if k is not None]
    broken = [f"{t!r} is not a valid regex ({why}), so it was looked for as plain text"
              for t in keys if (why := regex_key_error(t)) is not None]
    broken += [f"{t[:80]!r} was refused as a regex ({why}), so it never matches"
               for t in keys if (why := refused_regex_key(t)) is not None]
    return f"no primary key of {keys} found in {scope}" + "".join(f"; {b}" for b in broken)


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
        why = "was skipped: the step's regex time budget was used up" if budget_skipping() else "timed out"
        return None, f"secondary regex key {timed_out[0]!r} {why} ({logic.name})", timed_out
    return verdict, partial(_secondary_detail, states, logic), ()


def _secondary_detail(states: list[tuple[str, bool | None]], logic: SelectiveLogic) -> str:
    found_keys = [t for t, s in states if s is True]
    missing = [t for t, s in states if s is False]
    return f"secondary keys {logic.name}: found {found_keys}, missing {missing}"
