"""Provides the per-step time budget for regex keys across a book (issue 23 item 8).

Each regex key's search already has a time limit (`matching.DEFAULT_REGEX_TIMEOUT`, 50 ms), but
200 hostile keys each taking it made every step take 11-12 s. `step_budget` bounds the sum:
while a step's world info runs, every regex search (key or prefilter) is charged its elapsed
time and given at most what is left; once the budget is spent, the remaining regex searches of
that step are skipped at once, reported as timed out (`Reason.REGEX_TIMEOUT`, the key named),
and the result says the budget ran out. The next step starts with a full budget.

The budget and the limits measure work, not a busy machine: a search is charged the CPU time
of its thread, and `bounded` runs again a search that ran out of (wall-clock) time while its
thread got less than half of it on the CPU. Otherwise a loaded machine would change which
entries fire and leave a display script's raw text on screen.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TypeVar

from tavern_tui.lore.eval_budget import EvalBudget

T = TypeVar("T")

REGEX_STEP_BUDGET = 1.0
"""Seconds (of CPU time) all regex searches of one step may take together."""

DESCHEDULED_RETRIES = 2
"""How many times `bounded` runs again a search that timed out while mostly off the CPU."""


class BudgetSpent(TimeoutError):
    """The step's regex budget is used up: the search is skipped (handled as a timeout)."""


@dataclass
class StepBudget:
    """What one step's regex searches used.

    Attributes:
        seconds: the budget. spent: seconds charged so far.
        skipped: searches refused because the budget was spent.
        timeouts: searches that ran out of time (their own limit or the budget's rest).
        deadline: the build's whole evaluation budget (`lore.eval_budget`), or None: a search is
            also given at most what is left of it, and skipped once it is used up.
    """

    seconds: float
    spent: float = 0.0
    skipped: int = 0
    timeouts: int = 0
    deadline: EvalBudget | None = field(default=None, repr=False)
    _started: list[float] = field(default_factory=list, repr=False)

    @property
    def exhausted(self) -> bool:
        """Whether the budget ran out in this step."""
        return self.spent >= self.seconds

    def to_json(self) -> dict[str, object]:
        """`{"seconds", "spent", "exhausted", "skipped", "timeouts"}` for the trace's world-info record."""
        return {"seconds": self.seconds, "spent": round(self.spent, 4), "exhausted": self.exhausted,
                "skipped": self.skipped, "timeouts": self.timeouts}


_CURRENT: ContextVar[StepBudget | None] = ContextVar("tavern_regex_budget", default=None)


@contextmanager
def step_budget(seconds: float = REGEX_STEP_BUDGET, deadline: EvalBudget | None = None) -> Iterator[StepBudget]:
    """Run one step's regex searches (world info, regex scripts) with a budget of `seconds`, and
    within the build's `deadline` when given (nested calls share the outer one; an outer budget
    without a deadline takes this one's)."""
    outer = _CURRENT.get()
    if outer is not None:
        if outer.deadline is None:
            outer.deadline = deadline
        yield outer
        return
    budget = StepBudget(seconds, deadline=deadline)
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)


def budget_skipping() -> bool:
    """Whether the current step's budget is spent (searches are being skipped)."""
    budget = _CURRENT.get()
    return budget is not None and (budget.exhausted or (budget.deadline is not None and budget.deadline.over))


@contextmanager
def charged(limit: float) -> Iterator[float]:
    """One regex search: yields the timeout to pass it (`limit`, or less when the budget has
    less left) and charges the CPU time its thread used to the step.

    Raises:
        BudgetSpent: the budget is used up; the search must not run (a TimeoutError, so the
            callers' timeout handling applies).
    """
    budget = _CURRENT.get()
    if budget is None:
        yield limit
        return
    left = budget.seconds - budget.spent
    deadline = budget.deadline
    if deadline is not None:
        left = min(left, deadline.left())
    if left <= 0:
        budget.skipped += 1
        if deadline is not None and deadline.exhausted():
            deadline.refuse("regex searches skipped")
        raise BudgetSpent("the step's regex time budget is used up")
    start = time.thread_time()
    try:
        yield min(limit, left)
    except TimeoutError:
        budget.timeouts += 1
        raise
    finally:
        budget.spent += time.thread_time() - start


def bounded(limit: float, call: Callable[..., T]) -> T:
    """`call(timeout=…)`, one regex search (or substitution) given `timeout` seconds, charged to the
    step's budget (`charged`). The `regex` module's timeout is wall-clock time: a search that
    raised TimeoutError after its thread used less than half the timeout on the CPU was waiting
    for a core, not backtracking, and runs again (at most `DESCHEDULED_RETRIES` times).

    Raises:
        TimeoutError: the search ran out of time while working, or kept being descheduled.
        BudgetSpent: the step's budget is used up (the search did not run).
    """
    with charged(limit) as allowed:
        for attempt in range(DESCHEDULED_RETRIES + 1):
            cpu = time.thread_time()
            try:
                return call(timeout=allowed)
            except BudgetSpent:
                raise
            except TimeoutError:
                if attempt == DESCHEDULED_RETRIES or time.thread_time() - cpu >= allowed / 2:
                    raise
    raise AssertionError("unreachable")  # the loop returns or raises
