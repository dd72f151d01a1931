"""Provides `RunState`: the state of one `activation.activate` call, and its decision bookkeeping.

SillyTavern keeps this state in `checkWorldInfo`'s locals (public/scripts/world-info.js). The
loop (`activation`), the per-entry checks (`scan`) and the groups, probability and budget phase
(`admission`) are functions over it; what they share lives here: the scan states, the
`Candidate` shape, the decision stages, `RunState.note` and the per-loop key matching
(`RunState.match`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from tavern_tui.lore.buffer import ScanBuffer, Segment
from tavern_tui.lore.context import ActivationContext
from tavern_tui.lore.matching import KeyHits
from tavern_tui.lore.prepare import Plan, Prepared
from tavern_tui.lore.result import STAGE, ActivatedEntry, Decision, Reason
from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.lore.timed import EntryKey, evaluate_timed

NONE, INITIAL, RECURSION, MIN_ACTIVATIONS = 0, 1, 2, 3  # SillyTavern `scan_state`

Candidate = tuple[Prepared, Reason, "tuple[str, int] | None", "tuple | None"]
"""A matched entry of a scan loop: (entry, reason, (key text, key id) and buffer token for a
KEY candidate, else None and None)."""


class RunState:
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
        self.unmatched: list[tuple[Collection[int], Mapping[int, dict], int]] = []
        self.stages: dict[int, int] = {}  # STAGE of each held decision, by Prepared.pos
        self.settled: set[int] = set()  # positions noted at no-match or further (fired ones: see complex_pos)
        self.open: dict[tuple, frozenset[int]] = {}  # per shape: simple positions neither missed nor settled
        self.tokens: dict[tuple, tuple] = {}  # per shape: this loop's `shape_token`
        self.pending: list[Candidate] = []  # this loop's candidates (`admission._locate`)
        self.located: dict[tuple, dict[int, Segment | None]] = {}  # per buffer: key id -> piece
        # SillyTavern: `${world}.${uid}` -> (entry, its decision, its ActivatedEntry)
        self.activated: dict[EntryKey, tuple[Prepared, Decision, ActivatedEntry]] = {}
        self.failed: set[int] = set()  # failed probability rolls, by Prepared.pos
        # Positions walked one by one in `scan`: complex entries, entries sharing the (book, uid)
        # of an active, timed or failed one, and failed ones; it only grows during a run.
        self.complex_pos: set[int] = set(plan.complex)
        self.done_pos: set[int] = set()  # failed entries and active ones (skipped by `scan`)
        for key in self.timed.delayed | self.timed.cooldown_active | self.timed.sticky_active:
            self.complex_pos.update(plan.key_pos.get(key, ()))
        self.fired_bytes = 0  # UTF-8 bytes of the active entries' contents + "\n" each (`admission`)
        self.overflowed = False
        self.skew = 0
        self.step = 0
        self.level = 0  # the delay-until-recursion level reached (set by the loop)
        self.hits: dict[tuple, KeyHits] = {}  # this loop's key hits per buffer (`scan.scan`)
        self.asked: set[int] = set()  # positions whose keys `hits` answers for (`scan.scan`)

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
                    old = NO_MATCH_STAGE
                    break
        stage = STAGE_BY_ID[id(reason)]  # (by id: `STAGE` keyed by the members themselves would do as well)
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
            if stage >= NO_MATCH_STAGE:
                self.settled.add(p.pos)
        return decision

    # -- key matching -------------------------------------------------------------------------

    def depth_of(self, p: Prepared) -> int:
        """The scan depth of `p` in this loop (messages)."""
        entry_depth, book_depth, _ = p.shape
        if entry_depth is not None:
            return entry_depth  # SillyTavern: entry scanDepth is not widened by min activations
        base = book_depth if book_depth is not None else self.settings.depth
        return base + self.skew

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


STAGE_BY_ID = {id(reason): stage for reason, stage in STAGE.items()}
_FIRED_IDS = frozenset(id(reason) for reason in Reason if reason.fired)
FIRED_STAGE = STAGE[Reason.KEY]  # `admission` relies on it: a firing goes further than any other stage
assert all(STAGE[reason] == FIRED_STAGE for reason in Reason if reason.fired)
assert all(STAGE[reason] < FIRED_STAGE for reason in Reason if not reason.fired)
NO_MATCH_STAGE = STAGE[Reason.NO_MATCH]


def utf8_size(p: Prepared) -> int:
    """UTF-8 bytes of `p.content + "\n"` (what the estimate counts per entry), kept with the entry."""
    p.utf8_size = len(p.content.encode("utf-8")) + 1
    return p.utf8_size


def _new_decision() -> Decision:
    return object.__new__(Decision)
