"""Inclusion groups (SillyTavern `filterByInclusionGroups`), with a scripted random source."""

from __future__ import annotations

from tavern_tui.lore.groups import js_key_order
from tavern_tui.lore.model import SelectiveLogic
from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.lore.timed import TimedEffect, TimedState, entry_hash

from ._util import book, context, entry, fired, reason, run, scripted


def test_group_override_picks_the_highest_order_among_prioritised_members() -> None:
    a = entry("A", ["rain"], group="weather", group_override=True, order=10)
    b = entry("B", ["rain"], group="weather", group_override=True, order=50)
    c = entry("C", ["rain"], group="weather", order=100)
    result = run(book(a, b, c), context("rain"))
    assert fired(result) == {"B"}
    for loser in ("A", "C"):
        decision = result.decision("book", loser)
        assert decision.reason.value == "group_lost" and decision.detail.startswith("lost group 'weather' to uid B")


def test_weighted_pick_uses_the_roll_over_the_total_weight() -> None:
    # Weights 100 and 300: A wins when roll/100*400 <= 100, i.e. roll <= 25.
    a = entry("A", ["rain"], group="weather", group_weight=100, order=100)
    b = entry("B", ["rain"], group="weather", group_weight=300, order=90)
    assert fired(run(book(a, b), context("rain"), rng=scripted(20))) == {"A"}
    assert fired(run(book(a, b), context("rain"), rng=scripted(25))) == {"A"}
    assert fired(run(book(a, b), context("rain"), rng=scripted(30))) == {"B"}


def test_group_scoring_keeps_the_entry_with_most_key_hits() -> None:
    a = entry("A", ["dragon"], group="g")
    b = entry("B", ["dragon", "fire"], group="g")
    result = run(book(a, b), context("dragon fire"), WorldInfoSettings(use_group_scoring=True))
    assert fired(result) == {"B"}  # no roll needed: one member left
    assert "score 1 < best 2" in result.decision("book", "A").detail


def test_group_scoring_counts_secondary_keys_for_and_any_and_complete_and_all() -> None:
    # Scores: A 2 primary; B 1 + 1 secondary (AND_ANY); C 1 + 2 secondaries (AND_ALL, all found);
    # D 1. Best is 3. A and D opted into scoring and lose; B did not opt in (tri-state unset,
    # global off) and stays. The roll then picks between B and C.
    a = entry("A", ["dragon", "fire"], group="g", use_group_scoring=True, order=100)
    b = entry("B", ["dragon"], keysecondary=["fire", "cave"], selective_logic=SelectiveLogic.AND_ANY, group="g",
              order=90)
    c = entry("C", ["dragon"], keysecondary=["fire", "dragon"], selective_logic=SelectiveLogic.AND_ALL, group="g",
              order=80)
    d = entry("D", ["dragon"], group="g", use_group_scoring=True, order=70)
    result = run(book(a, b, c, d), context("dragon fire"), rng=scripted(10))
    assert fired(result) == {"B"}
    assert "score 2 < best 3" in result.decision("book", "A").detail
    assert "score 1 < best 3" in result.decision("book", "D").detail
    assert fired(run(book(a, b, c, d), context("dragon fire"), rng=scripted(60))) == {"C"}


def test_group_scoring_uses_raw_keys_without_macro_expansion() -> None:
    # SillyTavern's getScore matches the raw key, so "{{char}}" scores nothing.
    a = entry("A", ["{{char}}", "sword"], group="g")
    b = entry("B", ["sword", "Alice"], group="g")
    result = run(book(a, b), context("Alice has a sword"), WorldInfoSettings(use_group_scoring=True))
    assert fired(result) == {"B"}


def test_sticky_member_wins_its_group() -> None:
    a = entry("A", ["never"], group="g", sticky=5)
    b = entry("B", ["rain"], group="g", order=200)
    state = TimedState(sticky={("book", "A"): TimedEffect(0, 5, False, entry_hash(a))})
    result = run(book(a, b), context("rain", timed_state=state))
    assert fired(result) == {"A"} and reason(result, "A") == "sticky"
    assert result.decision("book", "B").detail == "lost group 'g' to sticky uid A"


def test_a_group_already_active_from_an_earlier_loop_blocks_new_members() -> None:
    a = entry("A", ["x"], content="rain", group="weather")
    b = entry("B", ["rain"], group="weather")
    result = run(book(a, b), context("x"))
    assert fired(result) == {"A"}
    assert result.decision("book", "B").detail == "group 'weather' already has an active entry"


def test_the_active_group_check_compares_the_whole_group_string() -> None:
    # SillyTavern: `x.group === key`; an active entry in "weather, sky" does not block "weather".
    a = entry("A", ["x"], content="rain", group="weather, sky")
    b = entry("B", ["rain"], group="weather")
    assert fired(run(book(a, b), context("x"))) == {"A", "B"}


def test_single_member_groups_need_no_roll() -> None:
    assert fired(run(book(entry(1, ["rain"], group="g"), entry(2, ["rain"], group="h")), context("rain"))) == {1, 2}


def test_removing_an_entry_twice_drops_the_last_candidate() -> None:
    # X is in groups a and b. Group a (rolled 80 of 200) picks Y and removes X; group b (rolled 80)
    # picks Z and removes X again: JS splice(indexOf(X) = -1, 1) removes the last candidate, W.
    x = entry("X", ["k"], group="a,b", order=100)
    y = entry("Y", ["k"], group="a", order=90)
    z = entry("Z", ["k"], group="b", order=80)
    w = entry("W", ["k"], order=10)
    result = run(book(x, y, z, w), context("k"), rng=scripted(80, 80))
    assert fired(result) == {"Y", "Z"}
    assert reason(result, "W") == "group_lost" and "quirk" in result.decision("book", "W").detail


def test_groups_are_visited_in_javascript_object_key_order() -> None:
    assert js_key_order(["b", "10", "a", "2", "01"]) == ["2", "10", "b", "a", "01"]


def test_constant_members_are_scored_by_their_keys_too() -> None:
    # getScore runs on every group member: a constant with weaker keys loses, one without keys scores 0.
    a = entry("A", ["dragon"], constant=True, group="g")
    b = entry("B", ["dragon", "fire"], group="g")
    c = entry("C", [], constant=True, group="g")
    result = run(book(a, b, c), context("dragon fire"), WorldInfoSettings(use_group_scoring=True))
    assert fired(result) == {"B"}
    assert "score 1 < best 2" in result.decision("book", "A").detail
    assert "score 0 < best 2" in result.decision("book", "C").detail


def test_a_grouped_sticky_entry_whose_cooldown_runs_is_removed_from_its_group() -> None:
    # Sticky 5 and cooldown 4 both start when the entry fires (chat length 1). At length 3 both run:
    # the per-entry check lets sticky win, but filterGroupsByTimedEffects removes cooling members.
    grouped = entry("A", ["never"], group="g", sticky=5, cooldown=4)
    plain = entry("B", ["never"], sticky=5, cooldown=4)
    state = TimedState(
        sticky={("book", "A"): TimedEffect(1, 6, False, entry_hash(grouped)),
                ("book", "B"): TimedEffect(1, 6, False, entry_hash(plain))},
        cooldown={("book", "A"): TimedEffect(1, 5, False, entry_hash(grouped)),
                  ("book", "B"): TimedEffect(1, 5, False, entry_hash(plain))})
    result = run(book(grouped, plain), context("x", "y", input="z", timed_state=state))
    assert fired(result) == {"B"}
    assert result.decision("book", "A").detail == "removed from group 'g' while cooling down"
