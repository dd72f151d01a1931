"""The checks listed in the world-info issue, one test each (inputs and expectations from the issue)."""

from __future__ import annotations

from tavern_tui.lore.model import SelectiveLogic
from tavern_tui.lore.settings import WorldInfoSettings

from ._util import book, context, entry, fired, reason, run, scripted


def test_key_ai_does_not_match_inside_aint_with_whole_words() -> None:
    result = run(book(entry(1, ["AI"])), context("Maine is a state, ain't it?"))
    assert fired(result) == set()


def test_key_ai_matches_as_a_word() -> None:
    result = run(book(entry(1, ["AI"])), context("I asked the AI."))
    assert fired(result) == {1}


def test_cjk_key_matches_inside_running_text_with_whole_words() -> None:
    result = run(book(entry(1, ["魔法"])), context("我会魔法了"))
    assert fired(result) == {1}


def test_hash_key_matches_with_whole_words() -> None:
    result = run(book(entry(1, ["#hello"])), context("say #hello to everyone"))
    assert fired(result) == {1}


def test_regex_key_with_i_flag() -> None:
    result = run(book(entry(1, ["/dragon(s)?/i"])), context("DRAGONS!"))
    assert fired(result) == {1}


def test_ac_dc_is_a_literal_key() -> None:
    result = run(book(entry(1, ["AC/DC"])), context("I love AC/DC"))
    assert fired(result) == {1}
    assert result.decision("book", 1).matched_key == "AC/DC"


def test_book_without_scan_depth_uses_the_global_depth() -> None:
    b = book(entry(1, ["busy"]))
    assert b.scan_depth is None
    result = run(b, context("I'm busy at work today"))
    assert fired(result) == {1}


def test_probability_10_fires_on_rolls_up_to_10() -> None:
    expected = {5: True, 10: True, 11: False, 90: False}
    for roll, fires in expected.items():
        result = run(book(entry(1, ["dragon"], probability=10)), context("a dragon"), rng=scripted(roll))
        assert (fired(result) == {1}) is fires, roll
        if not fires:
            decision = result.decision("book", 1)
            assert decision.reason.value == "probability_failed"
            assert decision.roll == roll and decision.probability == 10


def test_probability_0_never_fires() -> None:
    for roll in (0.0, 0.5, 50, 99.9):
        result = run(book(entry(1, ["dragon"], probability=0)), context("a dragon"), rng=scripted(roll))
        assert fired(result) == set(), roll


def test_key_list_with_one_empty_key_never_fires() -> None:
    result = run(book(entry(1, [""])), context("anything at all"))
    assert fired(result) == set()
    assert reason(result, 1) == "no_keys"


def test_not_any_secondary_is_checked_against_the_pass_where_the_entry_is_first_evaluated() -> None:
    # B's secondary key "sigil" only appears in A's content. Both match in the first pass, whose
    # buffer is the input alone, so NOT_ANY passes and B fires; A's content only enters the buffer
    # for a second pass, and B (already active) is never re-checked.
    a = entry("A", ["1"], content="the sigil glows")
    b = entry("B", ["2"], keysecondary=["sigil"], selective_logic=SelectiveLogic.NOT_ANY)
    result = run(book(a, b), context(input="1 2"), WorldInfoSettings(recursive=True))
    assert fired(result) == {"A", "B"}
    assert result.decision("book", "B").step == 1
    assert result.decision("book", "B").matched_in == "input"
