"""Provides `EvalBudget`, the total time one request build may spend evaluating a card's and its
books' untrusted contents (a hostile card must not freeze a step).

Every evaluator already has limits of its own: macros count calls, output and re-parsed text
(`assembly.macros`), templates have a time limit each and a per-build one (`scripts.templates`),
regex searches a timeout each and a per-step share (`lore.regex_budget`). Each alone is bounded,
but a card holding several hostile fields paid them one after another (over 10 s a build in the
fuzz run). `EvalBudget` bounds the sum: one object per build, created by the assembler that
builds it (`assembly.scripted.ScriptedAssembler`) and handed to each evaluator along the existing
path (`MacroBudget.deadline`, `TemplateRunner.deadline`, the regex `StepBudget.deadline`, the
world-info `ActivationContext.deadline`). Once it is used up, every later evaluation of that
build is refused as its own limits refuse: macros stop with their marker and leave the rest as
written, templates render their marker, regex searches are skipped (reported as timed out). The
request is still built, from what was evaluated in time; `refused` names each refused part
(the card or book, the field) and the build's trace and adjustments say so.

What is measured is work, not a busy machine: the CPU time of the building thread since the
budget was made (`time.thread_time`, as `lore.regex_budget`), plus the time the template
engine's own thread ran a template for it (charged with `charge`). The next build starts with a
full budget. Ours, not SillyTavern's (it has no such limit).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

EVAL_BUILD_BUDGET = 2.0
"""Seconds (CPU time, see the module docstring) all untrusted evaluation of one request build may
take together. Ours: a whole preview of the corpus's book card takes about 0.2 s, most single hostile
fields under 0.5 s; a step builds its request twice (the fit before anything is stored, then the
request sent), so a step's evaluation stays under twice this."""

EXHAUSTED = "the request build's evaluation time budget is used up"
"""The reason an evaluator gives when it refuses for this budget (macro and template markers)."""

MAX_REFUSED = 20
"""Refused parts named at most (the rest are counted)."""


class EvalBudget:
    """The evaluation time left to one request build (module docstring).

    Attributes:
        seconds: the budget, in seconds of CPU time. owner: what is being built for (e.g.
            "the card 'Seraphina'"), named in `summary`.
        where: the part being evaluated now (set with `part`), named in refusals.
        refused: "where: what" of every refused part, in order (at most `MAX_REFUSED`);
            `more_refused` counts the rest.
    """

    __slots__ = ("seconds", "owner", "where", "refused", "more_refused", "_over", "_elsewhere", "_starts")

    def __init__(self, seconds: float = EVAL_BUILD_BUDGET, owner: str = "") -> None:
        self.seconds = seconds
        self.owner = owner
        self.where = ""
        self.refused: list[str] = []
        self.more_refused = 0
        self._over = False
        self._elsewhere = 0.0
        self._starts: dict[int, float] = {threading.get_ident(): time.thread_time()}

    def spent(self) -> float:
        """Seconds used so far: this thread's CPU time since the budget was made (or since the
        thread first asked) plus the time charged for other threads."""
        ident = threading.get_ident()
        now = time.thread_time()
        return self._elsewhere + now - self._starts.setdefault(ident, now)

    def left(self) -> float:
        """Seconds left (0.0 once used up)."""
        return 0.0 if self._over else max(0.0, self.seconds - self.spent())

    @property
    def over(self) -> bool:
        """Whether the budget was found used up (cheap: no clock read; see `exhausted`)."""
        return self._over

    def exhausted(self) -> bool:
        """Whether the budget is used up (reads the clock; once true, stays true)."""
        if not self._over and self.spent() >= self.seconds:
            self._over = True
        return self._over

    def charge(self, seconds: float) -> None:
        """Count `seconds` of work another thread did for this build (a template run in V8)."""
        self._elsewhere += max(0.0, seconds)

    @contextmanager
    def part(self, where: str) -> Iterator[None]:
        """Name the part evaluated inside the block (e.g. "description", "book 'Eldoria' entry 12
        content") for refusals; nested parts restore the outer name after."""
        outer, self.where = self.where, where
        try:
            yield
        finally:
            self.where = outer

    def refuse(self, what: str) -> None:
        """Record that `what` (e.g. "macros stopped") was refused in the current part; a repeat of
        the last refusal is not recorded twice."""
        entry = f"{self.where or 'text'}: {what}"
        if self.refused and self.refused[-1] == entry:
            return
        if len(self.refused) < MAX_REFUSED:
            self.refused.append(entry)
        else:
            self.more_refused += 1

    def summary(self) -> str:
        """One sentence for the build's adjustments: the limit, the owner and the refused parts;
        "" when nothing was refused."""
        if not self.refused:
            return ""
        more = f" and {self.more_refused} more" if self.more_refused else ""
        owner = f" for {self.owner}" if self.owner else ""
        return (f"evaluation stopped{owner}: the {self.seconds:g} s evaluation budget of one request build "
                f"(macros, templates, world-info keys, regex scripts; CPU time) was used up; refused: "
                f"{'; '.join(self.refused)}{more}")

    def to_json(self) -> dict[str, object]:
        """`{"seconds", "spent", "exhausted", "refused"}` for the build's trace (`exhausted`: an
        evaluator found it used up, so something was refused)."""
        return {"seconds": self.seconds, "spent": round(self.spent(), 3), "exhausted": self._over,
                "refused": list(self.refused) + ([f"{self.more_refused} more"] if self.more_refused else [])}
