"""Chat-completion presets: corpus facts (shared/corpus/FACTS.md, SOURCES.md), SillyTavern 1.18 rules
(format-digest §c), round trips, connection fields and broken files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tavern_tui.errors import FormatError
from tavern_tui.formats.presets import (
    DEFAULT_ORDER,
    DEFAULT_PROMPTS,
    ParsedPreset,
    export_preset,
    is_connection_field,
    parse_preset,
)

DEFAULT = "st_openai_default_staging.json"
VIVARIUM = "nemo_vivarium_v1_0_beta.json"
ATELIER = "atelier_1_2.json"
NEMO = "nemoengine_5_4_tutorial.json"
PRESETS = (DEFAULT, VIVARIUM, ATELIER, NEMO)
MARKERS = {"dialogueExamples", "chatHistory", "worldInfoAfter", "worldInfoBefore", "charDescription",
           "charPersonality", "scenario", "personaDescription"}


def raw(corpus_dir: Path, name: str) -> bytes:
    return (corpus_dir / "presets" / name).read_bytes()


def load(corpus_dir: Path, name: str) -> ParsedPreset:
    return parse_preset(raw(corpus_dir, name), name)


def parse_obj(obj: dict, file: str = "test.json") -> ParsedPreset:
    return parse_preset(json.dumps(obj).encode(), file)


def ids(items) -> list[str]:
    return [item.identifier for item in items]


def enabled_count(items) -> int:
    return sum(item.enabled for item in items)


def role_warnings(preset: ParsedPreset) -> list[str]:
    return [w for w in preset.warnings if ": role " in w]


def broken(data: bytes) -> FormatError:
    with pytest.raises(FormatError) as info:
        parse_preset(data, "broken.json")
    assert info.value.file == "broken.json"
    return info.value


# --- corpus facts ---------------------------------------------------------------------------


def test_default_preset_facts(corpus_dir: Path) -> None:
    preset = load(corpus_dir, DEFAULT)
    assert preset.name == "st_openai_default_staging"
    assert len(preset.prompts) == 12
    assert sorted(preset.orders) == [100000, 100001]
    assert len(preset.orders[100000]) == 11 and enabled_count(preset.orders[100000]) == 10
    assert len(preset.orders[100001]) == 12 and enabled_count(preset.orders[100001]) == 11
    assert ids(preset.orders[100000]) == ["main", "worldInfoBefore", "charDescription", "charPersonality", "scenario",
                                          "enhanceDefinitions", "nsfw", "worldInfoAfter", "dialogueExamples",
                                          "chatHistory", "jailbreak"]
    assert preset.order_source == "100001" and preset.order is preset.orders[100001]
    assert {p.identifier for p in preset.prompts.values() if p.marker} == MARKERS
    assert all(p.system_prompt for p in preset.prompts.values())
    # FACTS: roles {system: 4, None: 8}; the 8 role-less prompts are markers → system, no warning.
    assert Counter(p.role for p in preset.prompts.values()) == {"system": 12}
    assert role_warnings(preset) == []
    assert preset.temperature == 1 and preset.max_context == 4095 and preset.max_tokens == 300
    assert preset.names_behavior == 0 and preset.squash_system_messages is False
    assert preset.wi_format == "{0}"
    assert preset.scenario_format == "[Circumstances and context of the dialogue: {{scenario}}]"
    assert preset.personality_format == "[{{char}}'s personality: {{personality}}]"
    assert preset.continue_postfix == " " and preset.continue_prefill is False
    assert preset.settings["stream_openai"] is True


def test_default_order_and_prompts_match_default_json(corpus_dir: Path) -> None:
    obj = json.loads(raw(corpus_dir, DEFAULT))
    group = next(g for g in obj["prompt_order"] if g["character_id"] == 100001)
    assert DEFAULT_ORDER == [(item["identifier"], item["enabled"]) for item in group["order"]]
    assert DEFAULT_PROMPTS == {p["identifier"]: p for p in obj["prompts"]}


def test_vivarium_facts(corpus_dir: Path) -> None:
    preset = load(corpus_dir, VIVARIUM)
    assert len(preset.prompts) == 16
    assert list(preset.orders) == [100001] and preset.order_source == "100001"
    assert len(preset.order) == 15 and enabled_count(preset.order) == 8
    assert ids(preset.order) == ["worldInfoBefore", "finch-core", "finch-databank", "worldInfoAfter",
                                 "dialogueExamples", "chatHistory", "bbbf24ea-a85e-4c94-8514-b5cc9019a3a0",
                                 "finch-turn-gate", "main", "jailbreak", "nsfw", "personaDescription",
                                 "charDescription", "charPersonality", "scenario"]
    assert len(set(preset.prompts) - set(ids(preset.order))) == 1
    assert "1 prompt is not in the active order and will not be sent" in preset.warnings
    # FACTS: injection_position {0: 13, 1: 2, absent: 1}; the absent one (enhanceDefinitions) is relative.
    assert Counter(p.injection_position for p in preset.prompts.values()) == {0: 14, 1: 2}
    assert "injection_position" not in preset.prompts["enhanceDefinitions"].raw
    assert Counter(p.role for p in preset.prompts.values()) == {"system": 13, "user": 3}
    assert preset.temperature == 1.25 and preset.top_p == 0.97
    assert preset.max_context == 2000000 and preset.max_tokens == 64000
    assert preset.names_behavior == 0 and preset.squash_system_messages is True
    assert preset.continue_prefill is True and preset.continue_postfix == ""
    assert preset.settings["extensions"] == {"regex_scripts": []}
    # Its order puts chatHistory (5th) before main (9th): kept, warned.
    assert any("'chatHistory' before 'main'" in w for w in preset.warnings)


def test_atelier_facts(corpus_dir: Path) -> None:
    preset = load(corpus_dir, ATELIER)
    assert len(preset.prompts) == 88
    assert sorted(preset.orders) == [100000, 100001]
    assert len(preset.orders[100000]) == 88 and enabled_count(preset.orders[100000]) == 37
    assert len(preset.orders[100001]) == 88 and enabled_count(preset.orders[100001]) == 50
    assert preset.order_source == "100001"
    assert ids(preset.order)[:3] == ["interview_core_header", "interview_varinit", "atelier_style_library"]
    assert ids(preset.order)[-3:] == ["dialogueExamples", "chatHistory", "jailbreak"]
    # FACTS: roles {system: 80, user: 1, "": 7}; the 7 empty ones become system. They are all
    # markers, whose role is never used, so none is warned (issue 21 item 6).
    empty = [p.identifier for p in preset.prompts.values() if p.raw.get("role") == ""]
    assert len(empty) == 7
    assert Counter(p.role for p in preset.prompts.values()) == {"system": 87, "user": 1}
    warned = role_warnings(preset)
    assert all(preset.prompts[ident].marker for ident in empty) and warned == []
    assert Counter(p.injection_position for p in preset.prompts.values()) == {0: 87, 1: 1}
    assert preset.temperature == 1 and preset.max_context == 2000000 and preset.max_tokens == 64000
    assert preset.names_behavior == 0 and preset.squash_system_messages is True
    assert preset.scenario_format == "[Circumstances and context of the dialogue: {{scenario}}]"
    assert preset.settings["extensions"] == {}
    assert not any("not in the active order" in w for w in preset.warnings)


def test_nemoengine_facts(corpus_dir: Path) -> None:
    preset = load(corpus_dir, NEMO)
    assert len(preset.prompts) == 186
    assert list(preset.orders) == [100001]
    assert len(preset.order) == 175 and enabled_count(preset.order) == 43
    assert ids(preset.order)[-3:] == ["charPersonality", "charDescription", "personaDescription"]
    assert len(set(preset.prompts) - set(ids(preset.order))) == 11
    assert "11 prompts are not in the active order and will not be sent" in preset.warnings
    # FACTS: roles {system: 169, assistant: 7, None: 2, user: 8}; the two role-less ones are markers.
    no_role = [p for p in preset.prompts.values() if "role" not in p.raw]
    assert {p.identifier for p in no_role} == {"dialogueExamples", "chatHistory"}
    assert all(p.marker and p.role == "system" for p in no_role)
    assert Counter(p.role for p in preset.prompts.values()) == {"system": 171, "assistant": 7, "user": 8}
    assert Counter(p.injection_position for p in preset.prompts.values()) == {0: 172, 1: 14}
    assert preset.names_behavior == -1
    assert preset.temperature == 1.45 and preset.max_context == 1000000 and preset.max_tokens == 65536
    assert preset.squash_system_messages is False and preset.settings["stream_openai"] is False
    assert preset.scenario_format == "{{scenario}}" and preset.personality_format == "{{personality}}"
    assert preset.send_if_empty == "[Continue]"
    # This preset's active order has no `main`: nothing to keep as an anchor.
    assert "main" not in ids(preset.enabled_prompts())
    assert ids(preset.order)[:3] == ["a96a9b08-0e20-47f7-9c19-624cbb8e4609", "1c0ebc0e-36c1-44c6-870a-49384fd03fde",
                                     "8b557b40-15d0-4e38-a037-de2644fbc957"]


@pytest.mark.parametrize("name", PRESETS)
def test_corpus_round_trip(corpus_dir: Path, name: str) -> None:
    original = json.loads(raw(corpus_dir, name))
    exported = export_preset(load(corpus_dir, name))
    assert exported == {k: v for k, v in original.items() if not is_connection_field(k)}
    again = export_preset(parse_preset(json.dumps(exported, indent=4).encode(), name))
    assert again == exported


@pytest.mark.parametrize("name", PRESETS)
def test_corpus_prompts_in_file_order(corpus_dir: Path, name: str) -> None:
    original = json.loads(raw(corpus_dir, name))
    preset = load(corpus_dir, name)
    assert list(preset.prompts) == [p["identifier"] for p in original["prompts"]]
    assert not any(is_connection_field(k) for k in preset.settings)


# --- defaults, order choice ---------------------------------------------------------------


def test_temperature_only_preset_uses_default_order_and_prompts() -> None:
    preset = parse_obj({"temperature": 0.5})
    assert preset.order_source == "default" and preset.orders == {}
    assert [(item.identifier, item.enabled) for item in preset.order] == DEFAULT_ORDER
    assert list(preset.prompts) == list(DEFAULT_PROMPTS)
    assert preset.prompts["main"].content == DEFAULT_PROMPTS["main"]["content"]
    assert preset.prompts["chatHistory"].marker is True
    assert preset.temperature == 0.5 and preset.max_tokens == 300 and preset.max_context == 4095
    assert role_warnings(preset) == []
    assert [p.identifier for p in preset.enabled_prompts()] == [i for i, on in DEFAULT_ORDER if on]
    exported = export_preset(preset)
    assert exported["temperature"] == 0.5
    assert exported["prompts"] == list(DEFAULT_PROMPTS.values())
    assert exported["prompt_order"] == [{"character_id": 100001, "order": [
        {"identifier": i, "enabled": on} for i, on in DEFAULT_ORDER]}]
    assert parse_preset(json.dumps(exported).encode(), "x.json").order_source == "100001"


def test_accessor_defaults_when_absent() -> None:
    preset = parse_obj({})
    assert preset.temperature == 1 and preset.top_p == 1
    assert preset.frequency_penalty == 0 and preset.presence_penalty == 0
    assert preset.names_behavior == 0 and preset.squash_system_messages is False
    assert preset.continue_prefill is False and preset.continue_postfix == " "
    assert preset.wi_format == "{0}"
    assert preset.scenario_format == "{{scenario}}" and preset.personality_format == "{{personality}}"
    assert preset.new_chat_prompt == "[Start a new Chat]" and preset.new_example_chat_prompt == "[Example Chat]"
    assert preset.continue_nudge_prompt == "[Continue your last message without repeating its original content.]"
    assert preset.impersonation_prompt.startswith("[Write your next reply from the point of view of {{user}}")
    assert preset.send_if_empty == preset.assistant_prefill == preset.assistant_impersonation == ""


def test_unusable_setting_values_warn_and_fall_back() -> None:
    preset = parse_obj({"temperature": "hot", "names_behavior": 5, "squash_system_messages": "yes",
                        "wi_format": 3, "top_p": "0.9"})
    assert preset.temperature == 1 and preset.names_behavior == 0
    assert preset.squash_system_messages is False and preset.wi_format == "{0}"
    assert preset.top_p == 0.9  # ST pushes preset values through form inputs: numeric text works
    for key in ("temperature", "names_behavior", "squash_system_messages", "wi_format"):
        assert any(w.startswith(key + " ") for w in preset.warnings), key
    assert preset.settings["temperature"] == "hot"  # kept as in the file


def order_group(character_id, *items):
    return {"character_id": character_id, "order": [{"identifier": i, "enabled": on} for i, on in items]}


def test_order_falls_back_to_100000_then_default() -> None:
    only_legacy = parse_obj({"prompt_order": [order_group(100000, ("main", True), ("chatHistory", True))]})
    assert only_legacy.order_source == "100000" and ids(only_legacy.order) == ["main", "chatHistory"]
    assert any("group 100000 order is used" in w for w in only_legacy.warnings)
    other = parse_obj({"prompt_order": [order_group(7, ("main", True))]})
    assert other.order_source == "default" and list(other.orders) == [7]
    assert any("default order is used" in w for w in other.warnings)
    other.order[0].enabled = False  # the default order is exported as group 100001, edits included
    assert export_preset(other)["prompt_order"] == [
        order_group(7, ("main", True)), order_group(100001, ("main", False), *DEFAULT_ORDER[1:])]
    empty_global = parse_obj({"prompt_order": [order_group(100001), order_group(100000, ("main", True))]})
    assert empty_global.order_source == "100000"
    as_text = parse_obj({"prompt_order": [order_group("100001", ("main", False))]})
    assert as_text.order_source == "100001" and list(as_text.orders) == [100001]


def test_prompts_without_order_get_default_order_and_missing_built_ins() -> None:
    preset = parse_obj({"prompts": [{"identifier": "main", "role": "system", "content": "Mine"},
                                    {"identifier": "chatHistory", "marker": True}]})
    assert preset.order_source == "default"
    assert preset.prompts["main"].content == "Mine"
    assert set(preset.prompts) == set(DEFAULT_PROMPTS)
    filled = [w for w in preset.warnings if "built-in one is used" in w]
    assert len(filled) == 10 and not any("'main'" in w or "'chatHistory'" in w for w in filled)


def test_chat_history_before_main_is_kept_and_warned() -> None:
    preset = parse_obj({"prompt_order": [order_group(100001, ("chatHistory", True), ("main", True))]})
    assert ids(preset.order) == ["chatHistory", "main"]
    [warning] = [w for w in preset.warnings if "before" in w]
    assert "'chatHistory'" in warning and "'main'" in warning


def test_order_items_without_prompts() -> None:
    prompts = [{"identifier": "main", "role": "system", "content": "M"},
               {"identifier": "extra", "role": "user", "content": "E"}]
    preset = parse_obj({"prompts": prompts, "prompt_order": [
        order_group(100001, ("main", True), ("ghost", True), ("nsfw", True))]})
    assert ids(preset.order) == ["main", "ghost", "nsfw"]  # kept
    assert any("'ghost'" in w and "skipped" in w for w in preset.warnings)
    # A missing built-in gets SillyTavern's built-in prompt.
    assert preset.prompts["nsfw"].name == "Auxiliary Prompt"
    assert any("'nsfw'" in w and "built-in" in w for w in preset.warnings)
    assert ids(preset.enabled_prompts()) == ["main", "nsfw"]
    assert "1 prompt is not in the active order and will not be sent" in preset.warnings  # "extra"
    assert "extra" in preset.prompts


def test_duplicate_identifiers_and_groups_first_wins() -> None:
    preset = parse_obj({
        "prompts": [{"identifier": "a", "content": "first"}, {"identifier": "a", "content": "second"}],
        "prompt_order": [order_group(100001, ("a", True)), order_group(100001, ("a", False))]})
    assert preset.prompts["a"].content == "first" and preset.order[0].enabled is True
    assert any("prompts[1]" in w and "duplicate" in w for w in preset.warnings)
    assert any("prompt_order[1]" in w for w in preset.warnings)


# --- prompts ------------------------------------------------------------------------------


def test_prompt_defaults_and_unknown_keys() -> None:
    preset = parse_obj({"prompts": [{"identifier": "x", "role": "user", "custom_flag": 3, "note": {"a": 1}}],
                        "prompt_order": [order_group(100001, ("x", True))]})
    prompt = preset.prompts["x"]
    assert prompt.name == "x" and prompt.content == "" and prompt.system_prompt is False
    assert prompt.marker is False and prompt.injection_position == 0 and prompt.injection_depth == 4
    assert prompt.injection_order == 100 and prompt.injection_trigger == [] and prompt.forbid_overrides is False
    assert prompt.enabled is True and prompt.extra == {"custom_flag": 3, "note": {"a": 1}}
    assert export_preset(preset)["prompts"] == [{"identifier": "x", "role": "user", "custom_flag": 3,
                                                 "note": {"a": 1}}]


@pytest.mark.parametrize(("item", "role", "warned"), [
    ({"role": ""}, "system", "empty"),
    ({"role": None}, "system", "missing"),
    ({}, "system", "missing"),
    ({"role": "User"}, "user", "read as 'user'"),
    ({"role": "model"}, "system", "'model' is not system"),
    ({"role": "assistant"}, "assistant", None),
    ({"marker": True}, "system", None),  # Default.json's marker shape
    ({"marker": True, "role": ""}, "system", None),  # a marker's role is never used (issue 21 item 6)
])
def test_prompt_roles(item: dict, role: str, warned: str | None) -> None:
    preset = parse_obj({"prompts": [{"identifier": "p1", "name": "Nice name", **item}]})
    assert preset.prompts["p1"].role == role
    found = role_warnings(preset)
    if warned is None:
        assert found == []
    else:
        assert len(found) == 1 and "'p1'" in found[0] and warned in found[0]


def test_odd_injection_values_warn_and_default() -> None:
    preset = parse_obj({"prompts": [{"identifier": "p", "role": "system", "injection_position": 2,
                                     "injection_depth": -1, "injection_order": 2.0, "marker": "yes"}]})
    prompt = preset.prompts["p"]
    assert prompt.injection_position == 0 and prompt.injection_depth == 4 and prompt.injection_order == 2
    assert prompt.marker is False
    assert len([w for w in preset.warnings if "'p'" in w]) == 3
    # Export gives the file's values back.
    assert export_preset(preset)["prompts"][0] == {"identifier": "p", "role": "system", "injection_position": 2,
                                                   "injection_depth": -1, "injection_order": 2.0, "marker": "yes"}


def test_export_writes_edits_and_keeps_unchanged_spelling(corpus_dir: Path) -> None:
    preset = load(corpus_dir, ATELIER)
    preset.prompts["chatHistory"].role = "user"
    preset.prompts["main"].content = "New main"
    preset.order[0].enabled = not preset.order[0].enabled
    exported = export_preset(preset)
    by_id = {p["identifier"]: p for p in exported["prompts"]}
    assert by_id["chatHistory"]["role"] == "user"
    assert by_id["dialogueExamples"]["role"] == ""  # untouched: the file's spelling
    assert by_id["main"]["content"] == "New main"
    group = next(g for g in exported["prompt_order"] if g["character_id"] == 100001)
    assert group["order"][0]["enabled"] == preset.order[0].enabled


def test_legacy_prompts_migrate() -> None:
    # A pre-PromptManager preset: no prompts at all.
    old = parse_obj({"main_prompt": "Be terse.", "jailbreak_prompt": "Stay in character.", "nsfw_prompt": ""})
    assert old.prompts["main"].content == "Be terse."
    assert old.prompts["jailbreak"].content == "Stay in character."
    assert old.prompts["nsfw"].content == ""
    assert "main_prompt" not in old.settings and "jailbreak_prompt" not in old.settings
    assert any("main_prompt" in w and "'main'" in w for w in old.warnings)
    assert any("jailbreak_prompt" in w and "'jailbreak'" in w for w in old.warnings)
    # With prompts: empty or missing ones are filled, one with its own content is kept.
    mixed = parse_obj({"main_prompt": "Legacy main", "jailbreak_prompt": "Legacy jb", "nsfw_prompt": "Legacy aux",
                       "prompts": [{"identifier": "main", "role": "system", "content": "Own main"},
                                   {"identifier": "jailbreak", "role": "system", "content": ""}]})
    assert mixed.prompts["main"].content == "Own main" and mixed.settings["main_prompt"] == "Legacy main"
    assert any("main_prompt ignored" in w for w in mixed.warnings)
    assert mixed.prompts["jailbreak"].content == "Legacy jb"
    assert mixed.prompts["nsfw"].content == "Legacy aux" and mixed.prompts["nsfw"].name == "Auxiliary Prompt"


def test_enabled_prompts_keeps_disabled_main_empty(corpus_dir: Path) -> None:
    preset = load(corpus_dir, VIVARIUM)  # its order has main disabled
    assert next(i for i in preset.order if i.identifier == "main").enabled is False
    sent = preset.enabled_prompts()
    [main] = [p for p in sent if p.identifier == "main"]
    assert main.content == ""
    assert preset.prompts["main"] is not main  # the preset's prompt is untouched
    assert ids(sent) == [i.identifier for i in preset.order if i.enabled or i.identifier == "main"]


def test_enabled_prompts_generation_type() -> None:
    preset = parse_obj({
        "prompts": [{"identifier": "main", "content": "M", "injection_trigger": ["impersonate"]},
                    {"identifier": "cont", "content": "C", "injection_trigger": ["continue"]},
                    {"identifier": "off", "content": "O"}],
        "prompt_order": [order_group(100001, ("main", True), ("cont", True), ("off", False), ("gone", True))]})
    assert [(p.identifier, p.content) for p in preset.enabled_prompts()] == [("main", "M"), ("cont", "C")]
    assert [(p.identifier, p.content) for p in preset.enabled_prompts("continue")] == [("main", ""), ("cont", "C")]
    assert [(p.identifier, p.content) for p in preset.enabled_prompts("impersonate")] == [("main", "M")]


# --- connection fields, call config -----------------------------------------------------------


def test_connection_fields_are_ignored_listed_and_never_exported() -> None:
    secret = "hunter2-proxy-password"
    obj = {"chat_completion_source": "custom", "custom_url": "http://proxy.local/v1", "reverse_proxy": "http://rp",
           "proxy_password": secret, "custom_include_headers": "X-Key: abc", "custom_include_body": "a: 1",
           "custom_exclude_body": "b", "vertexai_region": "us-east1", "vertexai_express_project_id": "proj",
           "azure_base_url": "https://az", "azure_deployment_name": "dep", "workers_ai_account_id": "acc",
           "deepseek_model": "deepseek-chat", "openrouter_providers": ["x"], "temperature": 0.8,
           "custom_prompt_post_processing": "merge"}
    preset = parse_obj(obj)
    assert preset.ignored_connection_fields == [k for k in obj
                                                if k not in ("temperature", "custom_prompt_post_processing")]
    assert set(preset.settings) == {"temperature", "custom_prompt_post_processing"}
    assert secret not in repr(preset)
    preset.settings["proxy_password"] = secret  # even when a caller puts one back
    exported = export_preset(preset)
    assert secret not in json.dumps(exported)
    assert not any(is_connection_field(k) for k in exported)


def test_default_preset_connection_fields(corpus_dir: Path) -> None:
    preset = load(corpus_dir, DEFAULT)
    for key in ("chat_completion_source", "openai_model", "claude_model", "custom_url", "custom_model",
                "reverse_proxy", "proxy_password", "custom_include_body", "custom_exclude_body",
                "custom_include_headers", "openrouter_model", "google_model"):
        assert key in preset.ignored_connection_fields
        assert key not in preset.settings
        assert key not in export_preset(preset)


def test_call_config(corpus_dir: Path) -> None:
    assert load(corpus_dir, DEFAULT).call_config() == {
        "temperature": 1, "top_p": 1, "frequency_penalty": 0, "presence_penalty": 0, "max_tokens": 300}
    # The file's reasoning_effort "max" has no value the adapter sends: its default is used
    # (seed 000 §3: "Unsupported effort preflight uses the adapter default rather than guessing an alias").
    nemo = load(corpus_dir, NEMO)
    assert nemo.call_config() == {
        "temperature": 1.45, "top_p": 0.85, "frequency_penalty": 0, "presence_penalty": 0, "max_tokens": 65536}
    assert len(nemo.config_notes()) == 1 and "'max' not sent" in nemo.config_notes()[0]
    custom = parse_obj({"temperature": "0.7", "top_p": 0.9, "frequency_penalty": 0.1, "presence_penalty": -0.2,
                        "openai_max_tokens": 512, "openai_max_context": 8000, "seed": 42, "n": 2,
                        "reasoning_effort": "medium", "top_k": 40, "stream_openai": True})
    assert custom.call_config() == {"temperature": 0.7, "top_p": 0.9, "frequency_penalty": 0.1,
                                    "presence_penalty": -0.2, "max_tokens": 512, "seed": 42, "n": 2,
                                    "reasoning_effort": "medium"}
    assert parse_obj({"seed": 0, "reasoning_effort": "min"}).call_config()["seed"] == 0
    assert "reasoning_effort" not in parse_obj({"reasoning_effort": "min"}).call_config()  # never "low"
    assert "guessed alias" in parse_obj({"reasoning_effort": "min"}).config_notes()[0]
    assert parse_obj({"reasoning_effort": "low"}).config_notes() == []
    assert "reasoning_effort" not in parse_obj({"reasoning_effort": "auto"}).call_config()
    assert "reasoning_effort" not in parse_obj({"reasoning_effort": ""}).call_config()


def test_name_from_file_or_argument(corpus_dir: Path) -> None:
    assert parse_preset(b"{}", "dir/My Preset.json").name == "My Preset"
    assert parse_preset(raw(corpus_dir, DEFAULT), "x.json", name="Default").name == "Default"


# --- broken files -------------------------------------------------------------------------


def test_truncated_file_names_line_and_column(corpus_dir: Path) -> None:
    data = raw(corpus_dir, DEFAULT)[:1000]
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(data)
    error = broken(data)
    assert error.field == ""
    assert f"line {expected.value.lineno} column {expected.value.colno}" in error.reason


def test_stray_byte_names_line_and_column(corpus_dir: Path) -> None:
    data = raw(corpus_dir, DEFAULT)
    cut = data.index(b'"temperature"')
    line = data[:cut].count(b"\n") + 1
    column = cut - data.rfind(b"\n", 0, cut)
    error = broken(data[:cut] + b"\x1a" + data[cut:])  # a DOS end-of-file byte left by a copy
    assert error.field == "" and f"line {line} column {column}" in error.reason


def test_latin1_file_names_byte_offset_and_line(corpus_dir: Path) -> None:
    # An encoding mix-up: the text saved as Latin-1 instead of UTF-8.
    text = json.dumps({"temperature": 1, "prompts": [{"identifier": "main", "content": "Café au lait"}]},
                      ensure_ascii=False, indent=2)
    data = text.encode("latin-1")
    offset = data.index(b"\xe9")
    line = data[:offset].count(b"\n") + 1
    error = broken(data)
    assert error.field == ""
    assert f"offset {offset}" in error.reason and f"line {line}" in error.reason
    # A UTF-16 file fails the same way, at its byte-order mark.
    utf16 = broken(raw(corpus_dir, DEFAULT).decode().encode("utf-16"))
    assert "not UTF-8" in utf16.reason and "offset 0" in utf16.reason


def test_mojibake_stays_valid_json(corpus_dir: Path) -> None:
    # UTF-8 read as Latin-1 and saved again as UTF-8 is still valid JSON: it imports, garbled.
    # Only the text differs, so this cannot be told from a real preset (no error to raise).
    data = raw(corpus_dir, NEMO)
    garbled = parse_preset(data.decode("latin-1").encode("utf-8"), NEMO)
    assert len(garbled.prompts) == 186
    assert garbled.prompts["dialogueExamples"].name != load(corpus_dir, NEMO).prompts["dialogueExamples"].name


@pytest.mark.parametrize(("data", "reason"), [
    (b"", "file is empty"),
    (b"  \n", "file is empty"),
    (b"[1, 2]", "top level is a list"),
    (b'"preset"', "top level is a string"),
    (json.dumps({"spec": "chara_card_v2", "data": {"name": "X"}}).encode(), "not a chat-completion preset"),
    (json.dumps({"entries": {}}).encode(), "not a chat-completion preset"),
])
def test_whole_file_errors(data: bytes, reason: str) -> None:
    error = broken(data)
    assert error.field == "" and reason in error.reason


@pytest.mark.parametrize(("obj", "field"), [
    ({"prompts": {"main": {}}}, "prompts"),
    ({"prompts": ["main"]}, "prompts[0]"),
    ({"prompts": [{"identifier": "a"}, {"identifier": "b"}, {"identifier": "c"}, {"name": "no id"}]},
     "prompts[3].identifier"),
    ({"prompts": [{"identifier": ""}]}, "prompts[0].identifier"),
    ({"prompts": [{"identifier": 5}]}, "prompts[0].identifier"),
    ({"prompts": [{"identifier": "a", "content": ["x"]}]}, "prompts[0].content"),
    ({"prompts": [{"identifier": "a", "name": {"x": 1}}]}, "prompts[0].name"),
    ({"prompts": [{"identifier": "a", "injection_trigger": "continue"}]}, "prompts[0].injection_trigger"),
    ({"prompt_order": {"100001": []}}, "prompt_order"),
    ({"prompt_order": [[]]}, "prompt_order[0]"),
    ({"prompt_order": [{"order": []}]}, "prompt_order[0].character_id"),
    ({"prompt_order": [{"character_id": "abc", "order": []}]}, "prompt_order[0].character_id"),
    ({"prompt_order": [{"character_id": 100001}]}, "prompt_order[0].order"),
    ({"prompt_order": [{"character_id": 100001, "order": ["main"]}]}, "prompt_order[0].order[0]"),
    ({"prompt_order": [order_group(100001, ("main", True)),
                       {"character_id": 100000, "order": [{"enabled": True}]}]},
     "prompt_order[1].order[0].identifier"),
    ({"prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True},
                                                          {"identifier": "nsfw", "enabled": "yes"}]}]},
     "prompt_order[0].order[1].enabled"),
])
def test_structure_errors_name_the_field(obj: dict, field: str) -> None:
    error = broken(json.dumps(obj).encode())
    assert error.field == field
    assert str(error).startswith(f"broken.json: {field}: ")


def test_null_prompt_is_skipped() -> None:
    preset = parse_obj({"prompts": [None, {"identifier": "main", "content": "M"}],
                        "prompt_order": [order_group(100001, ("main", True))]})
    assert list(preset.prompts) == ["main"]
    assert any("prompts[0] is null" in w for w in preset.warnings)


def test_bom_is_accepted(corpus_dir: Path) -> None:
    preset = parse_preset(b"\xef\xbb\xbf" + raw(corpus_dir, DEFAULT), DEFAULT)
    assert len(preset.prompts) == 12
