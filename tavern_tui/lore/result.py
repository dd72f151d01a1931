"""Provides what an activation returns: one `Decision` per entry, the activated entries, the
prompt buckets, the budget and the timed state to store.

The decision is the "why" of the trace (seed 000 §4): fired by key K found in message M, constant,
sticky, recursion from entry X at step S; or skipped as disabled, filtered, delayed, cooling
down, without keys, secondary logic failed, lost its group, probability roll R > P, over budget,
regex timed out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from itertools import compress, count, groupby, islice, repeat
from operator import itemgetter, ne, sub
from typing import Any

from tavern_tui.lore.model import Position, Role
from tavern_tui.lore.timed import EntryKey, TimedState


class Reason(str, Enum):
    """Closed set of decision codes. The first five mean the entry fired."""

    KEY = "key"  # a primary key (and the secondary logic) matched the chat, input or an extra source
    CONSTANT = "constant"
    STICKY = "sticky"  # a running sticky window
    RECURSION = "recursion"  # the key was found in an activated entry's content
    DECORATOR = "decorator"  # `@@activate` at the top of the content
    DISABLED = "disabled"
    TRIGGER_FILTERED = "trigger_filtered"  # generation type not in `triggers`
    CHARACTER_FILTERED = "character_filtered"  # character file name or tag filter
    DELAYED = "delayed"  # chat shorter than `delay`
    COOLDOWN = "cooldown"
    DELAY_UNTIL_RECURSION = "delay_until_recursion"
    EXCLUDED_FROM_RECURSION = "excluded_from_recursion"  # its key appeared only in recursion
    DECORATOR_SUPPRESSED = "decorator_suppressed"  # `@@dont_activate`
    NO_KEYS = "no_keys"  # no primary key, or every primary key blank
    NO_MATCH = "no_match"
    REGEX_TIMEOUT = "regex_timeout"  # the outcome depended on a regex key that timed out
    SECONDARY_FAILED = "secondary_failed"
    GROUP_LOST = "group_lost"
    PROBABILITY_FAILED = "probability_failed"
    OVER_BUDGET = "over_budget"
    DUPLICATE_UID = "duplicate_uid"  # another entry of the book with the same uid is active

    @property
    def fired(self) -> bool:
        """True for the reasons an entry fires with."""
        return self in _FIRED


_FIRED = frozenset({Reason.KEY, Reason.CONSTANT, Reason.STICKY, Reason.RECURSION, Reason.DECORATOR})

# How far an entry got; an entry seen in several scan loops keeps its furthest decision.
STAGE: dict[Reason, int] = {
    Reason.DISABLED: 0, Reason.TRIGGER_FILTERED: 0, Reason.CHARACTER_FILTERED: 0, Reason.DUPLICATE_UID: 0,
    Reason.DELAYED: 1, Reason.COOLDOWN: 1,
    Reason.DELAY_UNTIL_RECURSION: 2, Reason.DECORATOR_SUPPRESSED: 2,
    Reason.NO_KEYS: 3, Reason.NO_MATCH: 3, Reason.REGEX_TIMEOUT: 3,
    Reason.SECONDARY_FAILED: 4, Reason.EXCLUDED_FROM_RECURSION: 4, Reason.GROUP_LOST: 5, Reason.PROBABILITY_FAILED: 6,
    Reason.OVER_BUDGET: 7,
    **{reason: 8 for reason in _FIRED},
}


@dataclass
class Decision:
    """What happened to one entry in one activation, and why.

    Attributes:
        book, uid, comment: which entry.
        fired: it is in the prompt (or in its outlet) this step.
        reason: the machine code.
        detail: one human sentence, e.g. "key 'dragon' found in message 3 (Alice)".
        matched_key: the primary key that matched (first in key order), as matched (expanded).
        matched_in: where it was found: the message's `ref`, "input", an extra-source name
            ("scenario", …), "injection", "entry:<book>/<uid>" for recursion, or "buffer" when no
            single piece holds it (a regex spanning messages).
        step: the scan loop (1 = initial scan, 2+ = recursion / min-activation loops).
        from_entry: for recursion, the (book, uid) whose content held the key.
        roll, probability: the probability roll (0 ≤ roll < 100) if one was made.
        position, depth, role, order: placement of the entry.
        timed_out_keys: regex keys whose search timed out in the deciding loop.
    """

    book: str
    uid: int | str
    comment: str
    fired: bool
    reason: Reason
    detail: str
    matched_key: str | None = None
    matched_in: Any = None
    step: int = 1
    from_entry: EntryKey | None = None
    roll: float | None = None
    probability: float | None = None
    position: Position = Position.BEFORE_CHAR
    depth: int | None = None
    role: Role | None = None
    order: int = 100
    timed_out_keys: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (enums as their values, tuples as lists)."""
        return {
            "book": self.book, "uid": self.uid, "comment": self.comment, "fired": self.fired,
            "reason": self.reason.value, "detail": self.detail, "matched_key": self.matched_key,
            "matched_in": _jsonable(self.matched_in), "step": self.step,
            "from_entry": _jsonable(self.from_entry), "roll": self.roll, "probability": self.probability,
            "position": int(self.position), "depth": self.depth,
            "role": None if self.role is None else int(self.role), "order": self.order,
            "timed_out_keys": list(self.timed_out_keys),
        }


def _get_detail(self: Decision) -> str:
    value = self.__dict__["_detail"]
    if not isinstance(value, str):  # a formatter stored by activation: format on first read
        value = self.__dict__["_detail"] = value()
    return value


def _set_detail(self: Decision, value: str) -> None:
    self.__dict__["_detail"] = value


def _getstate(self: Decision) -> dict[str, Any]:
    _get_detail(self)  # never pickle a pending formatter
    return self.__dict__


# `detail` reads as a plain string field; activation may store a formatter instead (most entries'
# no-match sentences are never read, and formatting 5,000 of them dominated a warm activation).
Decision.detail = property(_get_detail, _set_detail, doc="one human sentence (see the class docstring)")  # type: ignore[assignment]
Decision.__getstate__ = _getstate  # type: ignore[method-assign]


_BOOK, _UID = itemgetter(0), itemgetter(1)

RUN_AT_LEAST = 3
"""How many consecutive integer uids `compact_uids` writes as one `[first, last]` run."""


def compact_uids(uids: Collection[int | str]) -> list[int | str | list[int]]:
    """`uids` (one book's) in order, integers first, with each run of at least `RUN_AT_LEAST`
    consecutive integers written as `[first, last]`: a request header lists the entries whose keys
    did not match, and on a 5,000-entry book that list was ~28 kB of every header (stored,
    encoded and decoded with each step), in scan order, which no reader needs (they count them;
    the book's entries give the order). Each run reads back as `range(first, last + 1)`."""
    if set(map(type, uids)) <= {int}:  # the usual book: every uid a number
        numbers, words = sorted(uids), []
    else:
        numbers = sorted(uid for uid in uids if type(uid) is int)
        words = sorted(str(uid) for uid in uids if type(uid) is not int)
    # Where each run starts: after every gap between neighbours (found in C, not a loop per uid).
    starts = [0, *compress(count(1), map(ne, map(sub, islice(numbers, 1, None), numbers), repeat(1))), len(numbers)]
    out: list[int | str | list[int]] = []
    for begin, end in zip(starts, starts[1:]):
        if end - begin >= RUN_AT_LEAST:
            out.append([numbers[begin], numbers[end - 1]])
        else:
            out.extend(numbers[begin:end])
    return out + words  # type: ignore[operator]


def count_uids(items: Sequence[Any]) -> int:
    """How many uids a header's `no_match` list stands for, without expanding its runs."""
    return sum(item[1] - item[0] + 1 if isinstance(item, list) and len(item) == 2 else 1 for item in items)



def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


@dataclass(frozen=True)
class ActivatedEntry:
    """An entry that fired, with its macro-expanded content (decorator lines removed)."""

    book: str
    uid: int | str
    comment: str
    content: str
    position: Position
    order: int
    depth: int
    role: Role
    outlet_name: str
    reason: Reason
    step: int
    source: str
    ignore_budget: bool


@dataclass
class Buckets:
    """Activated content by position (SillyTavern `checkWorldInfo` "BUILDING PROMPT").

    Inside every bucket entries are in ascending `order` (higher order = later = closer to the
    chat); outlets are the exception: highest order first. Entries with empty content are left out.

    Attributes:
        before, after: positions 0/1 joined with "\\n" (`worldInfoBefore` / `worldInfoAfter`).
        an_top, an_bottom: positions 2/3, one string per entry (`ANBeforeEntries` / `ANAfterEntries`).
        at_depth: position 4 grouped by (depth, role), each group joined with "\\n"; groups in the
            order SillyTavern creates them (first seen walking from the highest order down).
        examples_top, examples_bottom: positions 5/6, one example block per entry.
        outlets: position 7 by outlet name, joined with "\\n", highest order first.
    """

    before: str = ""
    after: str = ""
    an_top: list[str] = field(default_factory=list)
    an_bottom: list[str] = field(default_factory=list)
    at_depth: dict[tuple[int, Role], str] = field(default_factory=dict)
    examples_top: list[str] = field(default_factory=list)
    examples_bottom: list[str] = field(default_factory=list)
    outlets: dict[str, str] = field(default_factory=dict)
    entries: dict[str, list[tuple[str, int | str, str, str]]] = field(default_factory=dict, compare=False)
    """Which entries each bucket holds, in its order, as (book, uid, comment, content): keys
    "before", "after", "an_top", "an_bottom", "examples_top", "examples_bottom" and
    "depth:<depth>:<role>" (issue 24: per-prompt attribution); not compared."""


@dataclass
class ActivationResult:
    """Everything one activation produced.

    Attributes:
        decisions: one per entry of the (de-duplicated) books, in scan order (SillyTavern's
            sorted entry list). Built on first read: most entries of a large book simply do
            not match, and a step that records only `notable` and `no_match_uids` never
            builds their objects (benchmarks/wi_activation).
        activated: fired entries in activation order.
        buckets: the content by position.
        tokens_used: tokens of the activated contents, counted as SillyTavern's budget check
            counts them (each content followed by "\\n").
        budget: the token budget (`WorldInfoSettings.token_budget`).
        overflowed: the budget stopped at least one entry.
        steps: scan loops run.
        new_timed_state: the state to store for the branch after this step (the input state is
            never modified; a dry run or preview ignores this).
        held: decisions built during the run, by scan position.
        regex_budget: the step's regex time budget and what it used (issue 23 item 8).
        unmatched: entries whose keys did not match, in groups of (scan positions, decision
            template by position, loop), one group per buffer shape and scan loop: kept as
            templates until `decisions` is read. A position also in `held` takes that decision
            (a later loop decided it further).
    """

    activated: list[ActivatedEntry]
    buckets: Buckets
    tokens_used: int
    budget: int
    overflowed: bool
    steps: int
    new_timed_state: TimedState
    held: dict[int, Decision] = field(default_factory=dict, repr=False)
    unmatched: list[tuple[Collection[int], Mapping[int, dict[str, Any]], int]] = field(default_factory=list,
                                                                                        repr=False)
    regex_budget: dict[str, Any] = field(default_factory=dict)
    """What the step's regex searches used (`lore.regex_budget.StepBudget.to_json`): seconds,
    spent, exhausted, skipped, timeouts; {} when no budget ran."""
    template_failures: list[tuple[str, str]] = field(default_factory=list)
    """`(where, error)` of each fired entry whose restricted template failed or timed out (issue 18), filled by
    a preview that renders them (`StepService.world_info_preview`); [] when none ran."""
    entry_keys: Sequence[EntryKey] = field(default=(), repr=False)
    """(book, uid) of every entry by scan position (`prepare.Plan.entry_keys`), for
    `no_match_uids`."""
    _built: list[Decision] | None = field(default=None, init=False, repr=False)

    @property
    def decisions(self) -> list[Decision]:
        """Every decision in scan order (built once, on first read)."""
        if self._built is None:
            built: dict[int, Decision] = {}
            for positions, templates, loop in self.unmatched:
                for pos in positions:
                    values = templates[pos].copy()
                    values["step"] = loop
                    decision = Decision.__new__(Decision)
                    decision.__dict__ = values
                    built[pos] = decision
            built.update(self.held)
            self._built = [built[pos] for pos in sorted(built)]
        return self._built

    @property
    def notable(self) -> list[Decision]:
        """The decisions other than a plain key miss (fired, or skipped for a reason), in scan
        order, without building the misses."""
        return [self.held[pos] for pos in sorted(self.held) if self.held[pos].reason is not Reason.NO_MATCH]

    def no_match_uids(self) -> dict[str, list[int | str]]:
        """book → uids of the entries whose keys did not match, in scan order."""
        misses: set[int] = set()
        for positions, _templates, _loop in self.unmatched:
            misses.update(positions)
        held = self.held
        if held:  # a held decision overrides a bulk miss; a held miss counts
            misses.difference_update(held)
            misses.update([pos for pos, d in held.items() if d.reason is Reason.NO_MATCH])
        result: dict[str, list[int | str]] = {}
        # Runs of one book in scan order (one run for a single book): each run's uids in C.
        for book, run in groupby(map(self.entry_keys.__getitem__, sorted(misses)), _BOOK):
            uids = list(map(_UID, run))
            if book in result:
                result[book] += uids
            else:
                result[book] = uids
        return result

    def decision(self, book: str, uid: int | str) -> Decision:
        """The decision for one entry.

        Raises:
            KeyError: no such entry in this activation.
        """
        for decision in self.decisions:
            if decision.book == book and decision.uid == uid:
                return decision
        raise KeyError((book, uid))

    def to_json(self) -> dict[str, Any]:
        """The trace record: decisions, activated (book, uid) pairs, budget and overflow."""
        return {
            "decisions": [d.to_json() for d in self.decisions],
            "activated": [[a.book, a.uid] for a in self.activated],
            "tokens_used": self.tokens_used, "budget": self.budget, "overflowed": self.overflowed,
            "steps": self.steps,
        }
