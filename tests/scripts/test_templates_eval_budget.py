"""Templates within the build's evaluation budget (`TemplateRunner.deadline`, `lore.eval_budget`):
a template gets at most what is left of the build's budget, its run in V8's own thread is charged to it,
and once it is used up no template runs and the refusal names where."""

from __future__ import annotations

from tavern_tui.lore.eval_budget import EXHAUSTED, EvalBudget
from tavern_tui.scripts.templates import TemplateRunner, marker, template_snapshot


def _snap() -> dict:
    return template_snapshot({"mood": "calm"}, {}, None)


def test_no_template_runs_once_the_builds_budget_is_spent() -> None:
    deadline = EvalBudget(0.0)
    runner = TemplateRunner(deadline=deadline)
    try:
        with deadline.part("first_mes"):
            result = runner.render("<%= 1 + 1 %>", _snap(), where="Welcome <%= 1 + 1 %>")
        assert (result.text, result.error) == (marker("evaluation budget used up"), EXHAUSTED)
        assert runner.evaluations == 0 and runner.failures == [("Welcome <%= 1 + 1 %>", EXHAUSTED)]
        assert deadline.refused == ["first_mes: template not run"]
        runner.render("<%= 2 %>", _snap(), where="world info: Lore/3")  # no part named: the template's place
        assert deadline.refused[-1] == "world info: Lore/3: template not run"
    finally:
        runner.close()


def test_an_endless_template_gets_only_what_is_left_and_is_charged_for_it() -> None:
    deadline = EvalBudget(600.0)
    deadline.charge(599.95)  # 50 ms left of the build's budget; the template's own limit is 250 ms
    runner = TemplateRunner(deadline=deadline)
    try:
        first = runner.render("<% while (true) {} %>", _snap(), where="description")
        assert first.error.startswith("timed out") and runner.evaluations == 1
        assert deadline.exhausted()  # V8's 50 ms were charged: the budget is used up
        second = runner.render("<%= 'late' %>", _snap(), where="scenario")
        assert second.error == EXHAUSTED and runner.evaluations == 1
    finally:
        runner.close()
