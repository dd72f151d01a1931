"""`WorldInfoSettings`: shipped defaults, SillyTavern key names, the budget formula."""

from __future__ import annotations

import pytest

from tavern_tui.lore.settings import WorldInfoSettings


def test_defaults_are_the_shipped_settings_json_values() -> None:
    s = WorldInfoSettings()
    assert (s.depth, s.budget, s.budget_cap, s.include_names, s.recursive) == (2, 25, 0, True, True)
    assert (s.max_recursion_steps, s.min_activations, s.min_activations_depth_max) == (0, 0, 0)
    assert (s.case_sensitive, s.match_whole_words, s.use_group_scoring) == (False, True, False)
    assert s.character_strategy == 1 and s.max_context == 4095


def test_budget_is_a_rounded_percentage_of_the_context_with_an_optional_cap() -> None:
    assert WorldInfoSettings(budget=25, max_context=4095).token_budget == 1024  # round(1023.75)
    assert WorldInfoSettings(budget=12.5, max_context=100).token_budget == 13  # JS Math.round: .5 up
    assert WorldInfoSettings(budget=25, max_context=4095, budget_cap=500).token_budget == 500
    assert WorldInfoSettings(budget=25, max_context=100, budget_cap=500).token_budget == 25
    assert WorldInfoSettings(budget=0, max_context=4095).token_budget == 1  # `|| 1`


def test_from_st_reads_sillytavern_key_names() -> None:
    s = WorldInfoSettings.from_st({
        "world_info_depth": 4, "world_info_budget": 30, "world_info_budget_cap": 800,
        "world_info_include_names": False, "world_info_recursive": False,
        "world_info_max_recursion_steps": 3, "world_info_min_activations": 2,
        "world_info_min_activations_depth_max": 10, "world_info_case_sensitive": True,
        "world_info_match_whole_words": False, "world_info_use_group_scoring": True,
        "world_info_character_strategy": 2, "world_info_overflow_alert": True, "max_context": 8192,
    })
    assert s == WorldInfoSettings(depth=4, budget=30, budget_cap=800, include_names=False, recursive=False,
                                  max_recursion_steps=3, min_activations=2, min_activations_depth_max=10,
                                  case_sensitive=True, match_whole_words=False, use_group_scoring=True,
                                  character_strategy=2, overflow_alert=True, max_context=8192)
    assert WorldInfoSettings.from_st(s.to_st()) == s


def test_from_st_reads_a_whole_settings_json_and_keeps_defaults_for_missing_keys() -> None:
    s = WorldInfoSettings.from_st({"max_context": 16384, "world_info_settings": {"world_info_depth": "5"}})
    assert s.depth == 5 and s.max_context == 16384 and s.budget == 25


def test_budget_over_100_percent_resets_to_25() -> None:
    assert WorldInfoSettings.from_st({"world_info_budget": 150}).budget == 25


@pytest.mark.parametrize(("key", "value"), [
    ("world_info_depth", "deep"), ("world_info_depth", 2.5), ("world_info_depth", -1),
    ("world_info_depth", True), ("world_info_recursive", "yes"), ("world_info_budget", [25]),
    ("max_context", "x"), ("world_info_character_strategy", 7),
])
def test_from_st_rejects_bad_values_naming_the_key(key: str, value: object) -> None:
    with pytest.raises(ValueError, match=key):
        WorldInfoSettings.from_st({key: value})
