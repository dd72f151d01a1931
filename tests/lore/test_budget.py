"""The token budget (SillyTavern `checkWorldInfo` budget check), counted in characters here."""

from __future__ import annotations

from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.lore.timed import TimedEffect, TimedState, entry_hash

from ._util import book, context, entry, fired, reason, run

# Budget 100 tokens; the counter below counts characters, each content is followed by "\n".
BUDGET = WorldInfoSettings(budget=10, max_context=1000)


def chars(text: str) -> int:
    return len(text)


def test_constant_entries_are_not_exempt_and_lose_to_higher_order() -> None:
    high = entry(1, ["dragon"], content="k" * 60, order=100)
    constant = entry(2, [], content="c" * 60, order=10, constant=True)
    result = run(book(high, constant), context("dragon"), BUDGET, token_counter=chars)
    assert fired(result) == {1}
    decision = result.decision("book", 2)
    assert decision.reason.value == "over_budget" and "122" in decision.detail  # 61 + 61 >= 100
    assert result.overflowed and result.budget == 100


def test_the_check_is_inclusive() -> None:
    exact = entry(1, ["dragon"], content="k" * 99)  # 99 + "\n" = 100 >= 100
    assert reason(run(book(exact), context("dragon"), BUDGET, token_counter=chars), 1) == "over_budget"
    fits = entry(1, ["dragon"], content="k" * 98)
    assert fired(run(book(fits), context("dragon"), BUDGET, token_counter=chars)) == {1}


def test_sticky_entries_take_the_budget_first() -> None:
    sticky = entry("S", ["never"], content="s" * 60, order=1, sticky=5)
    keyed = entry("K", ["dragon"], content="k" * 60, order=100)
    state = TimedState(sticky={("book", "S"): TimedEffect(0, 5, False, entry_hash(sticky))})
    result = run(book(sticky, keyed), context("dragon", timed_state=state), BUDGET, token_counter=chars)
    assert fired(result) == {"S"} and reason(result, "K") == "over_budget"


def test_after_overflow_only_ignore_budget_entries_are_accepted() -> None:
    a = entry("A", ["k"], content="a" * 80, order=100)
    b = entry("B", ["k"], content="b" * 80, order=90)  # overflows
    c = entry("C", ["k"], content="c" * 80, order=80, ignore_budget=True)
    d = entry("D", ["k"], content="d" * 5, order=70)  # would fit, but the budget is closed
    result = run(book(a, b, c, d), context("k"), BUDGET, token_counter=chars)
    assert fired(result) == {"A", "C"}
    assert reason(result, "B") == "over_budget" and reason(result, "D") == "over_budget"


def test_ignore_budget_content_still_counts_against_later_entries() -> None:
    free = entry("E", ["k"], content="e" * 90, order=100, ignore_budget=True)
    later = entry("F", ["k"], content="f" * 20, order=90)  # 91 + 21 >= 100
    result = run(book(free, later), context("k"), BUDGET, token_counter=chars)
    assert fired(result) == {"E"} and reason(result, "F") == "over_budget"


def test_overflow_stops_recursion() -> None:
    a = entry("A", ["x"], content="y", order=100)
    filler = entry("C", [], content="c" * 200, order=90, constant=True)  # overflows in loop 1
    b = entry("B", ["y"], order=10)
    result = run(book(a, filler, b), context("x"), BUDGET, token_counter=chars)
    assert fired(result) == {"A"} and reason(result, "B") == "no_match" and result.steps == 1
    roomy = WorldInfoSettings(budget=100, max_context=1000)
    assert fired(run(book(a, filler, b), context("x"), roomy, token_counter=chars)) == {"A", "B", "C"}


def test_earlier_loops_count_only_their_recursion_text() -> None:
    # Loop 1: A (70 chars, prevent_recursion) and R (content "y"). Loop 2 counts only "y\n" from
    # earlier loops, not A's 71, so B's 80 still fits: 2 + 81 < 100.
    a = entry("A", ["x"], content="a" * 70, prevent_recursion=True, order=100)
    r = entry("R", ["x"], content="y", order=90)
    b = entry("B", ["y"], content="b" * 80)
    result = run(book(a, r, b), context("x"), BUDGET, token_counter=chars)
    assert fired(result) == {"A", "R", "B"}


def test_tokens_used_and_the_default_estimate() -> None:
    result = run(book(entry(1, ["k"], content="abcd" * 10)), context("k"))
    assert result.tokens_used == 11  # ceil(41 UTF-8 bytes / 4)
    assert result.budget == 1024
