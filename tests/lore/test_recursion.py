"""Recursion, its per-entry flags and levels, max steps and min activations."""

from __future__ import annotations

from tavern_tui.lore.settings import WorldInfoSettings

from ._util import book, context, entry, fired, reason, run


def test_recursion_activates_entries_whose_key_is_in_activated_content() -> None:
    a = entry("A", ["x"], content="about the tower", comment="Intro")
    b = entry("B", ["tower"])
    result = run(book(a, b), context("x"))
    decision = result.decision("book", "B")
    assert fired(result) == {"A", "B"}
    assert decision.reason.value == "recursion" and decision.step == 2
    assert decision.from_entry == ("book", "A") and decision.matched_in == "entry:book/A"
    assert "'Intro'" in decision.detail and "step 1" in decision.detail


def test_recursion_off() -> None:
    a = entry("A", ["x"], content="tower")
    b = entry("B", ["tower"])
    result = run(book(a, b), context("x"), WorldInfoSettings(recursive=False))
    assert fired(result) == {"A"} and result.steps == 1


def test_prevent_recursion_keeps_content_out_of_the_buffer() -> None:
    a = entry("A", ["x"], content="tower", prevent_recursion=True)
    b = entry("B", ["tower"])
    assert fired(run(book(a, b), context("x"))) == {"A"}


def test_exclude_recursion_entry_cannot_be_activated_by_content() -> None:
    a = entry("A", ["x"], content="tower")
    b = entry("B", ["tower"], exclude_recursion=True)
    result = run(book(a, b), context("x"))
    assert fired(result) == {"A"} and reason(result, "B") == "excluded_from_recursion"
    # ... but it still matches the chat itself.
    assert fired(run(book(a, b), context("x tower"))) == {"A", "B"}


def test_delay_until_recursion_levels_open_one_after_another() -> None:
    a = entry("A", ["x"], content="y z")
    b = entry("B", ["y"], content="b", delay_until_recursion=1)
    c = entry("C", ["z"], content="c", delay_until_recursion=2)
    d = entry("D", ["x"], content="d", delay_until_recursion=1)  # matches the chat, but waits for level 1
    result = run(book(a, b, c, d), context("x"))
    assert fired(result) == {"A", "B", "C", "D"}
    steps = {uid: result.decision("book", uid).step for uid in "ABCD"}
    # Loop 1: A. Loop 2 (level 1): B, D. Loop 3: nothing new. Loop 4 (level 2): C.
    assert steps == {"A": 1, "B": 2, "C": 4, "D": 2}


def test_delay_until_recursion_without_recursion_and_a_single_level_never_fires() -> None:
    # SillyTavern takes the first level before the first loop; with recursion off and no other
    # level pending there is never a recursion loop.
    d = entry("D", ["x"], delay_until_recursion=1)
    result = run(book(d), context("x"), WorldInfoSettings(recursive=False))
    assert fired(result) == set() and reason(result, "D") == "delay_until_recursion"


def test_delay_levels_run_even_with_recursion_off() -> None:
    d1 = entry("D1", ["x"], delay_until_recursion=1)
    d2 = entry("D2", ["x"], delay_until_recursion=2)
    result = run(book(d1, d2), context("x"), WorldInfoSettings(recursive=False))
    assert fired(result) == {"D1", "D2"} and result.steps == 2


def test_max_recursion_steps_caps_the_loops() -> None:
    a = entry("A", ["x"], content="y")
    b = entry("B", ["y"], content="z")
    c = entry("C", ["z"])
    assert fired(run(book(a, b, c), context("x"), WorldInfoSettings(max_recursion_steps=1))) == {"A"}
    assert fired(run(book(a, b, c), context("x"), WorldInfoSettings(max_recursion_steps=2))) == {"A", "B"}
    assert fired(run(book(a, b, c), context("x"), WorldInfoSettings(max_recursion_steps=0))) == {"A", "B", "C"}


def test_recursion_never_removes_an_active_entry() -> None:
    a = entry("A", ["x"], content="y", group="g")
    b = entry("B", ["y"], content="x", group="g", group_override=True, order=500)
    result = run(book(a, b), context("x"))
    assert fired(result) == {"A"}
    assert result.decision("book", "A").step == 1 and reason(result, "B") == "group_lost"


def test_min_activations_widen_the_depth_one_message_per_loop() -> None:
    history = context("a dragon", "nothing", "nothing")  # dragon 3 back; depth 1 sees only the last
    e = entry(1, ["dragon"])
    assert fired(run(book(e), history, WorldInfoSettings(depth=1))) == set()
    result = run(book(e), history, WorldInfoSettings(depth=1, min_activations=1))
    assert fired(result) == {1} and result.decision("book", 1).step == 3


def test_min_activations_depth_max_is_checked_before_widening() -> None:
    # SillyTavern compares the current depth with the maximum, then widens: max 2 still scans 3.
    e = entry(1, ["dragon"])
    settings = WorldInfoSettings(depth=1, min_activations=1, min_activations_depth_max=2)
    assert fired(run(book(e), context("a dragon", "x", "x"), settings)) == {1}
    assert fired(run(book(e), context("a dragon", "x", "x", "x"), settings)) == set()


def test_min_activations_stop_at_the_chat_length() -> None:
    e = entry(1, ["dragon"])
    result = run(book(e), context("x", "x"), WorldInfoSettings(depth=1, min_activations=1))
    assert fired(result) == set() and result.steps == 3  # depths 1, 2, 3 (3 > 2 messages stops)


def test_min_activation_loops_do_not_scan_recursion_text() -> None:
    # A fires in loop 1 (constant, content "tower"); recursion is off, so B (key "tower") can only
    # match through min-activation loops, which exclude the recursion buffer.
    a = entry("A", [], content="tower", constant=True)
    b = entry("B", ["tower"])
    settings = WorldInfoSettings(depth=1, min_activations=3, recursive=False)
    assert fired(run(book(a, b), context("x", "x", "x"), settings)) == {"A"}


def test_entry_scan_depth_is_not_widened_by_min_activations() -> None:
    e = entry(1, ["dragon"], scan_depth=1)
    settings = WorldInfoSettings(depth=1, min_activations=1)
    assert fired(run(book(e), context("a dragon", "x"), settings)) == set()
