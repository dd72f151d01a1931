"""How activation.py keeps its decisions cheaply, pinned against the rules they stand for.

Rule: SillyTavern 1.18 `checkWorldInfo` (format-digest §b.5): each loop walks the entries in
scan order; an entry keeps the furthest decision reached (`result.STAGE`); the budget counts
`tokens(earlier loops' recursion text) + tokens(this loop's text)`. The activation keeps plain
key misses as one group per shape and loop, walks only the entries it must, and sums the
estimate from cached UTF-8 sizes; these tests check each shortcut gives the plain answer.
"""

from __future__ import annotations

import random
from functools import partial

import pytest

from tavern_tui.lore.activation import activate
from tavern_tui.lore.context import ActivationContext, ScanMessage
from tavern_tui.lore.fastindex import FastIndex
from tavern_tui.lore.model import (
    CharacterFilter,
    SelectiveLogic,
    WorldBook,
    WorldInfoEntry,
)
from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.text.tokens import estimate_tokens

from ._util import book, context, entry, fired, reason, run


def test_a_miss_keeps_the_loop_it_was_decided_in() -> None:
    # Loop 1 misses "late"; loops 2 and 3 run (recursion) and must not re-decide it.
    b = book(entry(1, ["start"], "first"), entry(2, ["first"], "second"), entry(3, ["late"]))
    result = run(b, context("start"), WorldInfoSettings(max_recursion_steps=3))
    assert result.steps == 3 and fired(result) == {1, 2}
    assert result.decision("book", 3).reason.value == "no_match" and result.decision("book", 3).step == 1
    assert result.no_match_uids() == {"book": [3]}


def test_a_miss_of_the_first_loop_can_fire_in_recursion() -> None:
    b = book(entry(1, ["start"], "the dragon"), entry(2, ["dragon"]))
    result = run(b, context("start"))
    decision = result.decision("book", 2)
    assert decision.fired and decision.reason.value == "recursion" and decision.step == 2
    assert result.no_match_uids() == {}
    assert [d.uid for d in result.notable] == [1, 2]


def test_a_later_timeout_does_not_replace_a_first_loop_miss() -> None:
    # Entry 2's slow regex finds nothing fast in the message, then times out on entry 1's content
    # in loop 2: a timeout is no further than a miss, so the loop-1 miss stands.
    evil = "/(a|aa)+$/"
    b = book(entry(1, ["start"], "a" * 40 + "b"), entry(2, [evil]))
    result = run(b, context("start"), index_factory=partial(FastIndex, regex_timeout=0.01))
    assert result.steps == 2
    assert reason(result, 2) == "no_match" and result.decision("book", 2).step == 1


def test_candidates_reach_the_budget_in_scan_order() -> None:
    # B is walked one by one (a character filter), A and C in bulk; scan order is A, B, C
    # (order 300, 200, 100) and the budget takes only the first.
    passing = CharacterFilter(names=["Other"], is_exclude=True)
    b = book(entry("A", ["key"], "x" * 400, order=300),
             entry("B", ["key"], "x" * 400, order=200, character_filter=passing),
             entry("C", ["key"], "x" * 400, order=100))
    result = run(b, context("key"), WorldInfoSettings(budget=1, max_context=12_000))  # 120 tokens
    assert fired(result) == {"A"} and reason(result, "B") == "over_budget" and reason(result, "C") == "over_budget"


def test_a_settled_decision_outlives_a_min_activations_loop() -> None:
    # Loop 2 finds S's key in entry R's content but its secondary key fails; the min-activations
    # loop scans deeper messages without recursion, where S's key is absent: S keeps its failure.
    s = entry("S", ["k1"], keysecondary=["zzz"], selective=True, selective_logic=SelectiveLogic.AND_ANY)
    r = entry("R", ["start"], "k1 appears here")
    result = run(book(r, s), context("a", "b", "start"),
                 WorldInfoSettings(depth=1, min_activations=5, max_recursion_steps=0))
    assert result.steps >= 3
    assert reason(result, "S") == "secondary_failed" and result.decision("book", "S").step == 2


def test_messages_without_a_ref_are_numbered_from_the_oldest() -> None:
    # Message segments are made on demand (newest first); a message without a ref is its
    # 1-based position in the chat, as before.
    ctx = ActivationContext(messages=[ScanMessage("Alice", "sky"), ScanMessage("Bob", "sea"),
                                      ScanMessage("Alice", "hi")], input="fire", user_name="User", char_name="Alice")
    b = book(entry(1, ["sky"]), entry(2, ["sea"]), entry(3, ["fire"]))
    result = run(b, ctx, WorldInfoSettings(depth=4))
    assert [result.decision("book", uid).matched_in for uid in (1, 2, 3)] == [1, 2, "input"]
    assert "message 2 (Bob)" in result.decision("book", 2).detail


def test_the_recursion_text_counts_at_the_budget_boundary() -> None:
    # Budget 4 tokens. Loop 1: A's content "dragon!" + "\n" is 8 bytes, 2 tokens. Loop 2: the
    # recursion text ("dragon!" + "\n") counts 2 tokens, B's "xyz\n" 1 more: 3 < 4, B fires.
    b = book(entry("A", ["start"], "dragon!"), entry("B", ["dragon"], "xyz"))
    settings = WorldInfoSettings(budget=1, max_context=400)
    assert settings.token_budget == 4
    for counter in (estimate_tokens, lambda text: estimate_tokens(text)):
        result = run(b, context("start"), settings, token_counter=counter)
        assert fired(result) == {"A", "B"} and not result.overflowed and result.tokens_used == 3
    c = book(entry("A", ["start"], "dragon!"), entry("B", ["dragon"], "xyzuvw"))  # 7 bytes: 2 tokens
    assert reason(run(c, context("start"), settings), "B") == "over_budget"


def _entry(rng: random.Random, uid: int) -> WorldInfoEntry:
    words = ["sky", "blue", "king", "dragon", "Straße", "魔法", "fire", "sea"]
    return WorldInfoEntry(
        uid=uid, key=rng.sample(words, rng.randint(1, 2)), keysecondary=rng.sample(words, rng.randint(0, 1)),
        selective_logic=SelectiveLogic(rng.randint(0, 3)), order=rng.randint(0, 50),
        content=" ".join(rng.choice(words + ["ä", "—", "x" * 30]) for _ in range(rng.randint(1, 12))),
        prevent_recursion=rng.random() < 0.2, ignore_budget=rng.random() < 0.1, constant=rng.random() < 0.05,
        probability=rng.choice([100, 100, 70]), delay_until_recursion=rng.choice([0, 0, 0, 1]),
        group=rng.choice(["", "", "g"]), character_filter=rng.choice([None, None, CharacterFilter(names=["Alice"])]),
    )


@pytest.mark.parametrize("seed", range(10))
def test_the_estimate_from_cached_sizes_equals_counting_the_text(seed: int) -> None:
    """The default counter is summed from each entry's cached UTF-8 size; wrapping it makes the
    activation count the joined texts instead (any other counter's path). Same decisions."""
    rng = random.Random(seed)
    b = WorldBook("book", [_entry(rng, uid) for uid in range(30)])
    settings = WorldInfoSettings(depth=2, budget=rng.choice([1, 2, 5]), max_context=4000, max_recursion_steps=4,
                                 min_activations=rng.choice([0, 3]))
    history = [ScanMessage("User", " ".join(rng.sample(["sky", "blue", "king", "sea", "the"], 3)), n)
               for n in range(4)]
    ctx = ActivationContext(messages=history, input="dragon fire", user_name="User", char_name="Alice")
    roll = rng.random()
    results = [activate([b], ctx, settings, rng=partial(_rolls, random.Random(roll)), token_counter=counter,
                        index_factory=FastIndex)
               for counter in (estimate_tokens, lambda text: estimate_tokens(text))]
    plain, counted = results
    assert [(d.uid, d.fired, d.reason, d.step, d.detail) for d in plain.decisions] == \
        [(d.uid, d.fired, d.reason, d.step, d.detail) for d in counted.decisions]
    assert (plain.tokens_used, plain.overflowed, plain.steps) == \
        (counted.tokens_used, counted.overflowed, counted.steps)


def _rolls(source: random.Random) -> float:
    return source.random() * 100
