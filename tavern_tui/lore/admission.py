"""Provides `admit`: inclusion groups, probability and the token budget for one loop's candidates.

Rule: SillyTavern 1.18 `checkWorldInfo` (public/scripts/world-info.js; format-digest §b.5, §b.6),
the loop over `newEntries`: matched entries, sticky first then scan order, go through inclusion
groups, then one by one through probability (rolled once per activation) and the token budget
(`tokens(earlier loops' recursion text) + tokens(this loop's text) >= budget` drops the entry;
its text stays counted; after that only `ignoreBudget` entries are accepted; constants are not
exempt). The admitted entries fire: their decisions say where their key was found. Pure: a
function over the run's state (`runstate.RunState`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import fields as dataclass_fields
from dataclasses import replace

from tavern_tui.lore.buffer import Segment
from tavern_tui.lore.groups import filter_by_inclusion_groups
from tavern_tui.lore.model import SelectiveLogic
from tavern_tui.lore.prepare import Prepared
from tavern_tui.lore.result import ActivatedEntry, Decision, Reason
from tavern_tui.lore.runstate import (
    FIRED_STAGE,
    STAGE_BY_ID,
    Candidate,
    RunState,
    utf8_size,
)
from tavern_tui.text.tokens import estimate_tokens


def admit(run: RunState, new: list[Candidate], state: int, earlier_tokens: int) -> list[Prepared]:
    """Inclusion groups, probability and budget for this loop's candidates (in place of
    SillyTavern's loop over `newEntries`); returns the entries that did not fail their roll."""
    run.located = {}  # for `_locate`
    entries = [c[0] for c in new]
    if run.plan.grouping and any(p.group_names for p in entries):
        new = _apply_groups(run, new, entries, state)
    ignoring = sum(1 for p in entries if p.ignore_budget) if run.plan.ignoring_budget else 0
    # SillyTavern `newContent`; the default estimate (bytes / 4) is summed from the entries'
    # cached sizes, any other counter re-counts the text (tokenizers are not additive).
    loop_text = None if run.count_tokens is estimate_tokens else _RunningCount(run.count_tokens)
    size = 0
    failed = False
    firing: list[tuple[Candidate, float | None]] = []  # fired after the loop (see below)
    sticky, budget = run.timed.sticky_active, run.budget
    for index, c in enumerate(new):
        p = c[0]
        ignore = p.ignore_budget
        if ignore:
            ignoring -= 1
        if run.overflowed and not ignore:
            run.note(p, Reason.OVER_BUDGET, f"budget of {budget} tokens already used up")
            if ignoring > 0:
                continue
            for rest in entries[index + 1:]:
                run.note(rest, Reason.OVER_BUDGET, f"budget of {budget} tokens already used up")
            break
        value = None
        if p.rolls and p.key not in sticky:
            e = p.entry
            value = run.roll()
            if e.probability <= 0 or value > e.probability:
                failed = True
                run.failed.add(p.pos)
                run.complex_pos.add(p.pos)
                run.done_pos.add(p.pos)
                why = (f"roll {value:.1f} > probability {e.probability:g}" if e.probability > 0
                       else f"probability {e.probability:g} never fires (roll {value:.1f})")
                run.note(p, Reason.PROBABILITY_FAILED, why, roll=value, probability=e.probability)
                continue
        if loop_text is None:
            size += p.utf8_size if p.utf8_size >= 0 else utf8_size(p)
            used = earlier_tokens + -(-size // 4)  # estimate_tokens: ceil(bytes / 4)
        else:
            used = earlier_tokens + loop_text.add(p.content + "\n")
        if not ignore and used >= budget:
            run.overflowed = True
            run.note(p, Reason.OVER_BUDGET, f"{used} tokens with this entry >= budget {budget}",
                     roll=value, probability=p.entry.probability if value is not None else None)
            continue
        firing.append((c, value))
    # Firing does not change what the loop above decides (budget and rolls), so the entries
    # fire together: `_locate` then places only their keys, not those of entries over budget.
    _fire(run, firing)
    return [p for p in entries if p.pos not in run.failed] if failed else entries


def _apply_groups(run: RunState, new: list[Candidate], entries: list[Prepared], state: int) -> list[Candidate]:
    """Inclusion groups over the loop's candidates: the losers leave `entries` (in place) with
    their decision; returns the candidates left, in order."""
    info = {c[0].pos: c for c in new}
    losses = filter_by_inclusion_groups(  # drops the losers from `entries`
        entries, [held[0].entry.group for held in run.activated.values()],
        lambda p: p.key in run.timed.sticky_active, lambda p: p.key in run.timed.cooldown_active,
        lambda p: _score(run, p, info[p.pos], state), run.settings.use_group_scoring, run.roll)
    for c in new:
        if c[0].pos in losses:
            run.note(c[0], Reason.GROUP_LOST, losses[c[0].pos].detail)
    return [info[p.pos] for p in entries]


def _score(run: RunState, p: Prepared, candidate: Candidate, state: int) -> int:
    """SillyTavern `getScore`: raw primary hits (+ secondary hits for AND_ANY, or for AND_ALL
    when all found); 0 without primary keys."""
    if not p.entry.key:
        return 0
    token = run.shape_token(p, state)
    # Constant, sticky and decorator candidates skipped matching this loop: ask for their keys.
    found = run.hits[token] if p.pos in run.asked else run.match([p], state)[token]
    primary = sum(1 for k in p.raw_primary if k is None or k in found.matched)
    secondary = sum(1 for k in p.raw_secondary if k is None or k in found.matched)
    if p.entry.keysecondary:
        if p.entry.selective_logic == SelectiveLogic.AND_ANY:
            return primary + secondary
        if p.entry.selective_logic == SelectiveLogic.AND_ALL:
            return primary + secondary if secondary == len(p.entry.keysecondary) else primary
    return primary


def _fire(run: RunState, firing: list[tuple[Candidate, float | None]]) -> None:
    """Activate this loop's admitted candidates, in order, each with its probability roll (or
    None): its decision (where its key was found) and the run's bookkeeping."""
    run.pending = [c for c, _ in firing]  # the keys `_locate` places
    # Two passes: the decisions read only the buffer and earlier loops' entries, never what
    # the bookkeeping of this loop changes.
    _activate(run, _decide(run, firing))


def _decide(run: RunState, firing: list[tuple[Candidate, float | None]]) -> list[tuple[Prepared, Decision]]:
    """The fired decision of each admitted candidate, in order: its reason and detail, where
    its key was found, its roll."""
    step, activated, located = run.step, run.activated, run.located
    out = []
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
                segment = _locate(run, key_id, *token)
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
            detail = f"sticky until the chat has {run.timed.sticky[p.key].end} messages"
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
        out.append((p, decision))
    return out


def _activate(run: RunState, fired: list[tuple[Prepared, Decision]]) -> None:
    """The run's bookkeeping for the fired entries, in order: decisions, stages, positions now
    walked one by one, the active entry of each (book, uid), the fired bytes."""
    step = run.step
    decisions, stages, done_pos, complex_pos = run.decisions, run.stages, run.done_pos, run.complex_pos
    activated = run.activated
    fired_bytes = 0
    for p, decision in fired:
        pos, key, reason = p.pos, p.key, decision.reason
        decisions[pos] = decision
        stages[pos] = FIRED_STAGE  # (not `settled`: its positions are `complex_pos` from now on)
        done_pos.add(pos)
        same = p.shared_pos  # active from now on: checked one by one
        if same is None:
            complex_pos.add(pos)
            held = None  # (no other entry has its book and uid)
        else:
            complex_pos.update(same)
            held = activated.get(key)
        if held is not None and held[0] is not p:  # same book and uid: SillyTavern's Map.set replaces it
            gone = held[0]
            done_pos.discard(gone.pos)  # (unless its roll failed: then it never fired)
            stages[gone.pos] = STAGE_BY_ID[id(Reason.DUPLICATE_UID)]
            run.settled.discard(gone.pos)
            decisions[gone.pos] = replace(held[1], fired=False, reason=Reason.DUPLICATE_UID, detail=(
                f"replaced by entry {p.pos + 1} of the scan, which has the same uid"))
            fired_bytes -= gone.utf8_size if gone.utf8_size >= 0 else utf8_size(gone)
        made = p.fired_entries
        entry = made.get((reason, step)) if made is not None else None
        if entry is None:
            entry = _activated_entry(p, reason, step)
        activated[key] = (p, decision, entry)
        fired_bytes += p.utf8_size if p.utf8_size >= 0 else utf8_size(p)
    run.fired_bytes += fired_bytes


def _locate(run: RunState, key_id: int, shape: tuple, depth: int, with_recursion: bool) -> Segment | None:
    """The first piece of the buffer that holds the key on its own (for the decision).

    Found for all of this loop's key candidates of one buffer at once: one `hits` call per
    piece, asking the keys not yet placed (the buffer does not change within a loop), or
    one `first_hits` call for an index that has it (FastIndex)."""
    token = (shape, depth, with_recursion)
    found = run.located.get(token)
    if found is None or key_id not in found:
        wanted = {c[2][1] for c in run.pending if c[3] == token}  # the KEY candidates of this buffer
        wanted.add(key_id)
        found = run.located.setdefault(token, {})
        remaining = wanted - found.keys()
        found.update(dict.fromkeys(remaining))
        index = run.plan.indexes[shape]
        segments = run.buffer.segments(depth, shape[2], with_recursion)
        first_hits = getattr(index, "first_hits", None)
        if first_hits is not None:  # FastIndex: one call for all pieces
            # Keys the last loop's buffer did not hold are looked for in this loop's new pieces.
            base = run.buffer.previous(depth, shape[2]) if with_recursion else None
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


_KEY = Reason.KEY
_RECURSION = Reason.RECURSION
_NEW = object.__new__
_UNPLACED = object()  # `RunState.located` holds no answer for a key yet (None: across pieces)


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
