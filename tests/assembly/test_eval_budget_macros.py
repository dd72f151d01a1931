"""Macros within the build's evaluation budget (`MacroBudget.deadline`, `lore.eval_budget`):
once it is used up, evaluation stops with the marker, the rest stays as written and the refusal names
the field; the person's typed input is never refused. And pairing scoped blocks is bounded: thousands
of unpaired `{{if}}` openers each searched to the end of the text (their square)."""

from __future__ import annotations

from tavern_tui.assembly.basic import expand_input
from tavern_tui.assembly.macros import LIMIT_MARKER, MacroBudget, MacroContext, substitute, substitute_in
from tavern_tui.lore.eval_budget import EXHAUSTED, EvalBudget

STOPPED = LIMIT_MARKER.format(reason=EXHAUSTED)


class _Runs(EvalBudget):
    """A budget that answers "used up" from its `checks`-th clock reading on (a deterministic clock)."""

    def __init__(self, checks: int) -> None:
        super().__init__(600.0)
        self.checks = checks

    def exhausted(self) -> bool:
        self.checks -= 1
        if self.checks < 0:
            self._over = True
        return self.over


def _ctx(deadline: EvalBudget) -> MacroContext:
    return MacroContext(char="Alice", user="Bob", budget=MacroBudget(deadline=deadline))


def test_a_spent_budget_leaves_the_field_as_written_and_names_it() -> None:
    deadline = EvalBudget(0.0, owner="the card 'Alice'")
    ctx = _ctx(deadline)
    out = substitute_in("Hello {{user}}, I am {{char}}.", ctx, "description")
    assert out == STOPPED + "Hello {{user}}, I am {{char}}."
    assert ctx.limits_hit == {EXHAUSTED}
    assert deadline.refused == ["description: macros stopped"]
    assert substitute_in("No macros here.", ctx, "scenario") == "No macros here."  # nothing to refuse
    assert deadline.refused == ["description: macros stopped"]


def test_a_budget_running_out_midway_keeps_what_was_evaluated_and_stops_there() -> None:
    deadline = _Runs(checks=5)  # the parser asks 3 times (every 256 macros), the pairing once, then every 64 calls
    ctx = _ctx(deadline)
    text = "start " + "{{newline}}" * 1000
    out = substitute(text, ctx)
    evaluated, rest = out.split(STOPPED)
    newlines = evaluated.count("\n")
    assert 0 < newlines < 1000 and evaluated == "start " + "\n" * newlines
    assert rest == "{{newline}}" * (1000 - newlines)  # the rest as written
    assert deadline.refused == [f"the text starting {text[:30]!r}: macros stopped"]  # no field named: its start


def test_the_typed_input_is_expanded_whatever_the_budget() -> None:
    deadline = EvalBudget(0.0)
    ctx = _ctx(deadline)
    assert expand_input(["I bow to {{char}}.", "{{setvar::mood::calm}}ok"], ctx) == ["I bow to Alice.", "ok"]
    assert ctx.local_vars == {"mood": "calm"}  # its writes land in the build's context
    assert deadline.refused == []


def test_thousands_of_unpaired_openers_stop_at_the_pairing_limit() -> None:
    ctx = MacroContext()
    text = "{{if 1}}" * 5000 + "x{{/if}}"
    assert substitute(text, ctx) == LIMIT_MARKER.format(reason="too many scoped blocks to pair") + text
    assert ctx.limits_hit == {"too many scoped blocks to pair"}


def test_many_paired_blocks_and_plain_macros_still_pair() -> None:
    ctx = MacroContext()
    assert substitute("{{if 1}}a{{/if}}" * 3000, ctx) == "a" * 3000 and ctx.limits_hit == set()
    assert substitute("{{newline}}" * 5000 + "{{if 1}}x{{/if}}", ctx) == "\n" * 5000 + "x"
