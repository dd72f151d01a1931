"""The build's evaluation budget (`lore.eval_budget.EvalBudget`): once it is used up, regex
searches are skipped and the refusal names the part and the limit; a world-info step under a spent
budget still decides every entry (plain keys fire, regex keys are refused as timed out)."""

from __future__ import annotations

import pytest

from tavern_tui.lore.activation import activate
from tavern_tui.lore.context import ActivationContext
from tavern_tui.lore.eval_budget import MAX_REFUSED, EvalBudget
from tavern_tui.lore.model import WorldBook, WorldInfoEntry
from tavern_tui.lore.regex_budget import BudgetSpent, bounded, step_budget
from tavern_tui.lore.result import Reason
from tavern_tui.lore.settings import WorldInfoSettings


def test_a_spent_budget_names_each_refused_part_once_with_its_limit() -> None:
    budget = EvalBudget(0.0, owner="the card 'Hostile'")
    assert budget.exhausted() and budget.over and budget.left() == 0.0
    with budget.part("description"):
        budget.refuse("macros stopped")
        budget.refuse("macros stopped")  # the same part again: named once
        with budget.part("book 'Lore' entry 3 content"):
            budget.refuse("template not run")
        assert budget.where == "description"
    assert budget.where == ""
    assert budget.refused == ["description: macros stopped", "book 'Lore' entry 3 content: template not run"]
    summary = budget.summary()
    assert summary.startswith("evaluation stopped for the card 'Hostile': the 0 s evaluation budget")
    assert summary.endswith("refused: description: macros stopped; book 'Lore' entry 3 content: template not run")
    assert budget.to_json()["exhausted"] is True
    assert budget.to_json()["refused"] == budget.refused


def test_refusals_past_the_cap_are_counted_not_listed() -> None:
    budget = EvalBudget(0.0)
    for n in range(MAX_REFUSED + 5):
        with budget.part(f"book 'B' entry {n} key"):
            budget.refuse("macros stopped")
    assert len(budget.refused) == MAX_REFUSED and budget.more_refused == 5
    assert budget.summary().endswith("and 5 more") and budget.to_json()["refused"][-1] == "5 more"


def test_time_charged_for_another_thread_counts_against_the_budget() -> None:
    budget = EvalBudget(600.0)
    assert not budget.exhausted() and budget.summary() == ""
    budget.charge(599.9)  # a template ran 599.9 s in the engine's own thread (as it says)
    assert budget.left() <= 0.1
    budget.charge(1.0)
    assert budget.exhausted() and budget.left() == 0.0
    assert budget.to_json()["exhausted"] is True and budget.refused == []  # nothing was refused yet


def test_a_regex_search_is_skipped_once_the_builds_budget_is_spent() -> None:
    deadline = EvalBudget(0.0)
    ran: list[float] = []
    with step_budget(1.0, deadline) as regexes, deadline.part("regex scripts on the chat history"):
        with pytest.raises(BudgetSpent):
            bounded(0.05, lambda timeout: ran.append(timeout))
    assert ran == [] and regexes.skipped == 1
    assert deadline.refused == ["regex scripts on the chat history: regex searches skipped"]


def test_a_search_gets_no_more_than_what_is_left_of_the_build() -> None:
    deadline = EvalBudget(600.0)
    deadline.charge(599.99)
    given: list[float] = []
    with step_budget(1.0, deadline):
        bounded(0.05, lambda timeout: given.append(timeout))
    assert len(given) == 1 and 0 < given[0] <= 0.01


def test_world_info_under_a_spent_budget_refuses_regex_keys_and_still_fires_plain_ones() -> None:
    book = WorldBook(name="Lore", entries=[
        WorldInfoEntry(uid=1, key=["/dra(g|k)on/"], content="Dragons nest in the north."),
        WorldInfoEntry(uid=2, key=["castle"], content="The castle is old."),
    ])
    deadline = EvalBudget(0.0)
    ctx = ActivationContext(input="A dragon circles the castle.", deadline=deadline)
    result = activate([book], ctx, WorldInfoSettings())
    fired = {d.uid for d in result.decisions if d.fired}
    assert fired == {2}
    regex_decision = next(d for d in result.decisions if d.uid == 1)
    assert regex_decision.reason == Reason.REGEX_TIMEOUT and regex_decision.timed_out_keys == ("/dra(g|k)on/",)
    assert deadline.refused == ["world-info keys: regex searches skipped"]
