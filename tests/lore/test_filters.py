"""Per-entry checks in SillyTavern's order, each with its reason code, plus what gets scanned."""

from __future__ import annotations

import json

import pytest

from tavern_tui.lore.model import CharacterFilter, SelectiveLogic
from tavern_tui.lore.settings import WorldInfoSettings

from ._util import book, context, entry, fired, reason, run


def test_disabled_entry_is_skipped_even_when_constant() -> None:
    result = run(book(entry(1, ["dragon"], disable=True, constant=True)), context("dragon"))
    assert fired(result) == set() and reason(result, 1) == "disabled"


def test_generation_type_triggers() -> None:
    e = entry(1, ["dragon"], triggers=["continue", "swipe"])
    assert reason(run(book(e), context("dragon", generation_type="normal")), 1) == "trigger_filtered"
    assert fired(run(book(e), context("dragon", generation_type="swipe"))) == {1}
    assert fired(run(book(entry(2, ["dragon"])), context("dragon", generation_type="quiet"))) == {2}


def test_character_filter_by_file_name_include_and_exclude() -> None:
    only_bob = entry(1, ["dragon"], character_filter=CharacterFilter(names=["bob"]))
    not_bob = entry(2, ["dragon"], character_filter=CharacterFilter(is_exclude=True, names=["bob"]))
    result = run(book(only_bob, not_bob), context("dragon", character_file="bob"))
    assert fired(result) == {1} and reason(result, 2) == "character_filtered"
    result = run(book(only_bob, not_bob), context("dragon", character_file="carol"))
    assert fired(result) == {2} and reason(result, 1) == "character_filtered"


def test_character_filter_by_tag_applies_only_when_tags_are_known() -> None:
    e = entry(1, ["dragon"], character_filter=CharacterFilter(tags=["fantasy"]))
    assert reason(run(book(e), context("dragon", character_tags=["scifi"])), 1) == "character_filtered"
    assert fired(run(book(e), context("dragon", character_tags=["fantasy", "x"]))) == {1}
    assert fired(run(book(e), context("dragon", character_tags=None))) == {1}
    excluded = entry(2, ["dragon"], character_filter=CharacterFilter(is_exclude=True, tags=["fantasy"]))
    assert reason(run(book(excluded), context("dragon", character_tags=["fantasy"])), 2) == "character_filtered"


def test_constant_entry_fires_without_keys() -> None:
    result = run(book(entry(1, [], constant=True)), context("nothing"))
    assert fired(result) == {1} and reason(result, 1) == "constant"


def test_entry_without_keys_is_skipped() -> None:
    result = run(book(entry(1, [])), context("anything"))
    assert reason(result, 1) == "no_keys"


def test_blank_and_whitespace_keys_are_discarded() -> None:
    result = run(book(entry(1, ["   ", ""]), entry(2, ["  ", " dragon "])), context("a dragon"))
    assert fired(result) == {2} and reason(result, 1) == "no_keys"
    assert result.decision("book", 2).matched_key == "dragon"


def test_no_match_reason_names_the_keys_and_the_scope() -> None:
    decision = run(book(entry(1, ["dragon"])), context("hello")).decision("book", 1)
    assert decision.reason.value == "no_match" and "dragon" in decision.detail and "2" in decision.detail


@pytest.mark.parametrize(("logic", "secondary", "fires"), [
    (SelectiveLogic.AND_ANY, ["red", "blue"], True),
    (SelectiveLogic.AND_ANY, ["blue", "green"], False),
    (SelectiveLogic.AND_ALL, ["red", "big"], True),
    (SelectiveLogic.AND_ALL, ["red", "blue"], False),
    (SelectiveLogic.NOT_ANY, ["blue", "green"], True),
    (SelectiveLogic.NOT_ANY, ["red", "blue"], False),
    (SelectiveLogic.NOT_ALL, ["red", "blue"], True),
    (SelectiveLogic.NOT_ALL, ["red", "big"], False),
])
def test_secondary_key_logic(logic: SelectiveLogic, secondary: list[str], fires: bool) -> None:
    e = entry(1, ["dragon"], keysecondary=secondary, selective_logic=logic)
    result = run(book(e), context("a big red dragon"))
    assert (fired(result) == {1}) is fires
    if not fires:
        assert reason(result, 1) == "secondary_failed"


def test_secondary_keys_are_ignored_when_not_selective() -> None:
    e = entry(1, ["dragon"], keysecondary=["blue"], selective=False)
    assert fired(run(book(e), context("a red dragon"))) == {1}


def test_blank_secondary_key_never_matches() -> None:
    and_all = entry(1, ["dragon"], keysecondary=["", "red"], selective_logic=SelectiveLogic.AND_ALL)
    not_all = entry(2, ["dragon"], keysecondary=["", "red"], selective_logic=SelectiveLogic.NOT_ALL)
    assert fired(run(book(and_all, not_all), context("a red dragon"))) == {2}


def test_case_sensitivity_is_tri_state_per_entry() -> None:
    text = context("a dragon")
    assert fired(run(book(entry(1, ["Dragon"])), text)) == {1}
    assert fired(run(book(entry(1, ["Dragon"], case_sensitive=True)), text)) == set()
    assert fired(run(book(entry(1, ["Dragon"])), text, WorldInfoSettings(case_sensitive=True))) == set()
    assert fired(run(book(entry(1, ["Dragon"], case_sensitive=False)), text,
                     WorldInfoSettings(case_sensitive=True))) == {1}


def test_whole_words_is_tri_state_per_entry() -> None:
    text = context("dragonfly")
    assert fired(run(book(entry(1, ["dragon"])), text)) == set()
    assert fired(run(book(entry(1, ["dragon"], match_whole_words=False)), text)) == {1}
    assert fired(run(book(entry(1, ["dragon"])), text, WorldInfoSettings(match_whole_words=False))) == {1}


def test_macros_in_keys_are_expanded() -> None:
    e = entry(1, ["{{char}}'s sword"], content="{{user}} sees {{char}}'s sword")
    result = run(book(e), context(("User", "I take Alice's sword"), char_name="Alice", user_name="User"))
    assert fired(result) == {1}
    assert result.activated[0].content == "User sees Alice's sword"


def test_name_prefixes_can_be_matched_and_switched_off() -> None:
    e = entry(1, ["Alice"])
    assert fired(run(book(e), context(("Alice", "hello")))) == {1}
    assert fired(run(book(e), context(("Alice", "hello")), WorldInfoSettings(include_names=False))) == set()


def test_regex_key_can_anchor_on_the_message_separator() -> None:
    e = entry(1, ["/\\x01{{user}}:[^\\x01]*?hello/"])
    assert fired(run(book(e), context(("Alice", "hello"), ("User", "well, hello")))) == {1}
    assert fired(run(book(e), context(("User", "bye"), ("Alice", "hello")))) == set()


def test_input_is_scanned_as_the_newest_message() -> None:
    # depth 1: only the input is scanned, not the last history message.
    result = run(book(entry(1, ["dragon"]), entry(2, ["castle"])), context("a castle", input="a dragon"),
                 WorldInfoSettings(depth=1))
    assert fired(result) == {1}
    decision = result.decision("book", 1)
    assert decision.matched_in == "input" and "the input" in decision.detail


def test_scan_depth_entry_then_book_then_global() -> None:
    history = context("dragon here", "nothing", "nothing")  # dragon is 3 messages back
    assert fired(run(book(entry(1, ["dragon"])), history)) == set()
    assert fired(run(book(entry(1, ["dragon"]), scan_depth=3), history)) == {1}
    assert fired(run(book(entry(1, ["dragon"], scan_depth=2), scan_depth=3), history)) == set()
    assert fired(run(book(entry(1, ["dragon"], scan_depth=3)), history)) == {1}


def test_depth_zero_scans_nothing_not_even_recursion_or_extra_sources() -> None:
    a = entry(1, ["x"], content="dragon")
    b = entry(2, ["dragon"], scan_depth=0, match_scenario=True)
    result = run(book(a, b), context("x", scenario="a dragon"))
    assert fired(result) == {1} and reason(result, 2) == "no_match"


def test_decision_reports_the_message_the_key_was_found_in() -> None:
    result = run(book(entry(1, ["dragon"])), context(("Bob", "a dragon"), ("Alice", "oh")))
    decision = result.decision("book", 1)
    assert decision.reason.value == "key" and decision.matched_in == 1
    assert decision.detail == "key 'dragon' found in message 1 (Bob)"


@pytest.mark.parametrize(("flag", "field"), [
    ("match_persona_description", "persona_description"),
    ("match_character_description", "character_description"),
    ("match_character_personality", "character_personality"),
    ("match_character_depth_prompt", "character_depth_prompt"),
    ("match_scenario", "scenario"),
    ("match_creator_notes", "creator_notes"),
])
def test_extra_sources_are_scanned_only_by_entries_that_opt_in(flag: str, field: str) -> None:
    opted = entry(1, ["castle"], **{flag: True})
    other = entry(2, ["castle"])
    result = run(book(opted, other), context("hello", **{field: "a castle on a hill"}))
    assert fired(result) == {1} and reason(result, 2) == "no_match"
    assert result.decision("book", 1).matched_in == field


def test_injections_are_scanned_by_every_entry() -> None:
    result = run(book(entry(1, ["castle"])), context("hello", injections=["[Author's note: castle]"]))
    assert fired(result) == {1} and result.decision("book", 1).matched_in == "injection"


def test_decorators() -> None:
    on = entry(1, ["nothing-matches"], content="@@activate\nlore")
    off = entry(2, ["dragon"], content="@@dont_activate\nlore")
    result = run(book(on, off), context("a dragon"))
    assert fired(result) == {1} and reason(result, 1) == "decorator"
    assert result.activated[0].content == "lore"
    assert reason(result, 2) == "decorator_suppressed"


def test_decisions_serialise_to_json() -> None:
    result = run(book(entry(1, ["dragon"]), entry(2, ["x"])), context("dragon"))
    text = json.dumps(result.to_json())
    assert '"reason": "key"' in text and '"reason": "no_match"' in text


def test_two_entries_with_one_uid_behave_like_sillytavern_keyed_by_book_and_uid() -> None:
    # Both match in one loop: the later one replaces the first (JS Map.set on `${world}.${uid}`).
    first = entry(7, ["dragon"], content="first", order=100)
    second = entry(7, ["dragon"], content="second", order=50)
    result = run(book(first, second), context("dragon"))
    assert [a.content for a in result.activated] == ["second"]
    assert [d.reason.value for d in result.decisions] == ["duplicate_uid", "key"]
