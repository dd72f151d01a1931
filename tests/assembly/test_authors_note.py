"""The chat's Author's Note and card-field overrides from `chat_metadata` in `build_prompt`
(issue 5; format-digest §c.4 steps 2, 4, 5 and §d).

Expected values come from SillyTavern 1.18's rules, cited per test:
- `public/scripts/authors-note.js`: `metadata_keys` (note_prompt / note_interval / note_depth /
  note_position / note_role), `loadSettings` defaults (DEFAULT_DEPTH 4, DEFAULT_POSITION 1,
  DEFAULT_INTERVAL 1, role SYSTEM), `setFloatingPrompt` (interval rule counted over
  `chat.filter(m => m.is_user)`), MODULE_NAME "2_floating_prompt".
- `public/scripts/world-info.js` `checkWorldInfo`: `${ANTop.join('\\n')}\\n${AN}\\n${ANBottom.join('\\n')}`
  with one leading / trailing newline removed, only when `shouldWIAddPrompt`.
- `public/script.js` `getExtensionPrompt` (keys sorted, values trimmed, joined "\\n"),
  `extension_prompt_types` (IN_PROMPT 0, IN_CHAT 1, BEFORE_PROMPT 2), `getCharacterCardFieldsLazy`
  (`chat_metadata.X || card.X`).
- `public/scripts/openai.js` `populationInjectionPrompts`, `getPromptPosition` (BEFORE_PROMPT →
  'start', IN_PROMPT → 'end' of main's collection), `preparePromptsForChatCompletion`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tavern_tui.assembly.sillytavern import (
    MESSAGE_OVERHEAD,
    AuthorsNote,
    BuiltPrompt,
    HistoryMessage,
    PromptInputs,
    build_prompt,
    chat_overrides_from_metadata,
)
from tavern_tui.formats.presets import ParsedPreset, parse_preset
from tavern_tui.lore.model import Role
from tavern_tui.lore.result import Buckets
from tavern_tui.text.tokens import estimate_tokens
from tests.assembly.test_st_prompt import CHAR, USER, absolute, chat, make_preset, relative

NOTE = "Keep the pace slow."


def build(preset: ParsedPreset, card: dict[str, Any] | None = None, **kwargs: Any) -> BuiltPrompt:
    kwargs.setdefault("history", chat(3))
    return build_prompt(PromptInputs(preset=preset, card=card if card is not None else {}, char=CHAR, user=USER,
                                     **kwargs))


def positions(built: BuiltPrompt) -> list[str]:
    """History/input parts as their text, every other part as its identifier."""
    return [p.content if p.source in ("history", "input") else p.identifier for p in built.parts]


def users_in(history: list[HistoryMessage]) -> int:
    return sum(1 for m in history if m.role == "user")


def main_preset(main: str = "Main.", **settings: Any) -> ParsedPreset:
    return make_preset([relative("main", main)], **settings)


# --- from_chat_metadata ----------------------------------------------------------------------


def test_metadata_without_note_keys_gives_sillytaverns_default_note() -> None:
    # authors-note.js loadSettings: prompt '' (no user default), interval 1, position 1 (IN_CHAT),
    # depth 4, role SYSTEM (0).
    assert AuthorsNote.from_chat_metadata({}) == AuthorsNote(prompt="", interval=1, depth=4, position=1, role=0)
    assert AuthorsNote.from_chat_metadata(None) == AuthorsNote("")
    nulls = {"note_prompt": None, "note_interval": None, "note_depth": None, "note_position": None, "note_role": None}
    assert AuthorsNote.from_chat_metadata(nulls) == AuthorsNote("")  # `??` replaces null too


def test_metadata_values_are_read_and_coerced() -> None:
    meta = {"note_prompt": NOTE, "note_interval": "3", "note_depth": -2, "note_position": 2.0, "note_role": 2}
    assert AuthorsNote.from_chat_metadata(meta) == AuthorsNote(NOTE, interval=3, depth=2, position=2, role=2)
    odd = {"note_prompt": 5, "note_interval": "often", "note_depth": True, "note_role": 9}
    assert AuthorsNote.from_chat_metadata(odd) == AuthorsNote("", interval=1, depth=4, position=1, role=0)


@pytest.mark.parametrize("meta", [{"note_interval": 0}, {"note_interval": -2}, {"note_position": -1},
                                  {"note_position": 3}])
def test_disabled_note_is_none(meta: dict[str, Any]) -> None:
    # setFloatingPrompt: interval <= 0 sets the prompt to extension_prompt_types.NONE; a position
    # outside 0/1/2 is never collected by getExtensionPrompt / getPromptPosition.
    assert AuthorsNote.from_chat_metadata({"note_prompt": NOTE, **meta}) is None


def test_interval_rule_counts_user_messages_like_set_floating_prompt() -> None:
    # messagesTillInsertion = n >= interval ? n % interval : interval - n; inserted when 0;
    # n <= 0 disables; interval 1 forces n = 1 ("interval 1 should be inserted no matter what").
    every3 = AuthorsNote(NOTE, interval=3)
    assert [n for n in range(0, 10) if every3.inserted(n)] == [3, 6, 9]
    assert [every3.messages_until(n) for n in range(0, 8)] == [-1, 2, 1, 0, 1, 2, 0, 1]
    always = AuthorsNote(NOTE, interval=1)
    assert all(always.inserted(n) for n in range(0, 5))  # even before the first user message
    assert not AuthorsNote(NOTE, interval=2).inserted(0)


# --- in-chat placement -----------------------------------------------------------------------


def test_note_at_depth_4_lands_before_the_fourth_message_from_the_end() -> None:
    # IN_CHAT at depth 4: inserted at index 4 of the newest-first chat, i.e. before the 4th-from-last.
    built = build(main_preset(), history=chat(6), authors_note=AuthorsNote(NOTE))
    assert positions(built) == ["main", "newMainChat", "message 0", "message 1", "authorsNote", "message 2",
                                "message 3", "message 4", "message 5"]
    part = built.parts[4]
    assert (part.role, part.content, part.source) == ("system", NOTE, "injection")


def test_note_role_and_macros() -> None:
    note = AuthorsNote("Keep {{char}} calm around {{user}}. ", depth=0, role=1)
    built = build(main_preset(), authors_note=note)
    last = built.parts[-1]
    assert (last.role, last.identifier) == ("user", "authorsNote")
    assert last.content == "Keep Seraphina calm around Alice."  # macros expanded, value trimmed


def test_interval_3_note_is_present_only_on_the_steps_sillytavern_inserts_it() -> None:
    note = AuthorsNote(NOTE, interval=3, depth=0)
    present = []
    for size in range(1, 14, 2):  # chat(size) holds (size + 1) // 2 user messages, the input included
        history = chat(size)
        built = build(main_preset(), history=history, authors_note=note)
        if "authorsNote" in positions(built):
            present.append(users_in(history))
    assert present == [3, 6]


def test_user_message_count_overrides_the_history_count() -> None:
    # ST counts every is_user message of the chat, hidden ones too; the caller may know more than `history`.
    note = AuthorsNote(NOTE, interval=3, depth=0)
    assert "authorsNote" not in positions(build(main_preset(), history=chat(1), authors_note=note))
    assert "authorsNote" in positions(build(main_preset(), history=chat(1), authors_note=note, user_message_count=3))


def test_note_skipped_by_its_interval_says_so() -> None:
    built = build(main_preset(), history=chat(1), authors_note=AuthorsNote(NOTE, interval=2))
    assert "authorsNote" not in positions(built)
    assert "Author's Note left out: the note is inserted every 2 user messages and the chat has 1" in built.adjustments


# --- world info AN-top / AN-bottom -----------------------------------------------------------


def test_an_top_and_bottom_world_info_wrap_the_note() -> None:
    lore = Buckets(an_top=["Top A", "Top B"], an_bottom=["Bottom"])
    built = build(main_preset(), lore=lore, authors_note=AuthorsNote(NOTE, depth=0))
    assert built.parts[-1].content == f"Top A\nTop B\n{NOTE}\nBottom"
    assert built.parts[-1].identifier == "authorsNote"


def test_an_world_info_is_sent_with_an_empty_note_at_the_default_depth() -> None:
    # The note is enabled by default (interval 1), so shouldWIAddPrompt is true even with no text:
    # "Top\n\nBottom" (the empty note between) goes to depth 4, role system.
    lore = Buckets(an_top=["Top"], an_bottom=["Bottom"])
    built = build(main_preset(), history=chat(6), lore=lore, authors_note=AuthorsNote.from_chat_metadata({}))
    assert positions(built)[4] == "authorsNote"
    assert built.parts[4].content == "Top\n\nBottom"
    only_top = build(main_preset(), lore=Buckets(an_top=["Top"]), authors_note=AuthorsNote("", depth=0))
    assert only_top.parts[-1].content == "Top"  # "Top\n\n" minus one trailing newline, then trimmed


def test_an_world_info_is_dropped_when_the_note_is_disabled_or_not_inserted() -> None:
    lore = Buckets(an_top=["Top"], an_bottom=["Bottom"])
    disabled = AuthorsNote.from_chat_metadata({"note_prompt": NOTE, "note_interval": 0})
    none = build(main_preset(), lore=lore, authors_note=disabled)
    assert "authorsNote" not in positions(none)
    assert "world info for the Author's Note left out: there is no Author's Note" in none.adjustments
    waiting = build(main_preset(), history=chat(1), lore=lore, authors_note=AuthorsNote(NOTE, interval=2))
    assert not any("Top" in p.content for p in waiting.parts)
    assert ("world info for the Author's Note left out: the note is inserted every 2 user messages and the chat "
            "has 1") in waiting.adjustments


# --- merging with other in-chat prompts --------------------------------------------------------


def test_depth_0_note_world_info_and_depth_prompt_of_one_role_merge_in_key_order() -> None:
    # getExtensionPrompt sorts the keys: "2_floating_prompt" < "DEPTH_PROMPT" < "customDepthWI-0-0";
    # populationInjectionPrompts puts the preset's order-100 prompt of that role first.
    card = {"extensions": {"depth_prompt": {"prompt": "Depth prompt.", "depth": 0, "role": "system"}}}
    lore = Buckets(at_depth={(0, Role.SYSTEM): "WI at zero."})
    preset = make_preset([relative("main", "Main."), absolute("pre", "Preset at zero.", 0)])
    built = build(preset, card, lore=lore, authors_note=AuthorsNote(NOTE, depth=0))
    last = built.parts[-1]
    assert last.identifier == "pre+authorsNote+charDepthPrompt+worldInfoDepth"
    assert last.content == f"Preset at zero.\n{NOTE}\nDepth prompt.\nWI at zero."
    assert (last.role, last.source) == ("system", "injection")
    alone = build(main_preset(), lore=lore, authors_note=AuthorsNote(NOTE, depth=0)).parts[-1]
    assert (alone.identifier, alone.content, alone.source) == ("authorsNote+worldInfoDepth",
                                                               f"{NOTE}\nWI at zero.", "injection")


def test_note_of_another_role_is_its_own_message_in_role_order() -> None:
    # One depth, order 100: chronologically assistant, then user, then system.
    lore = Buckets(at_depth={(0, Role.SYSTEM): "WI at zero."})
    built = build(main_preset(), lore=lore, authors_note=AuthorsNote(NOTE, depth=0, role=1))
    assert [(p.role, p.identifier) for p in built.parts[-2:]] == [("user", "authorsNote"),
                                                                  ("system", "worldInfoDepth")]


# --- before / after main ---------------------------------------------------------------------


@pytest.mark.parametrize(("position", "expected"), [(2, ["authorsNote", "main"]), (0, ["main", "authorsNote"])])
def test_before_and_in_prompt_notes_are_their_own_message_next_to_main(position: int, expected: list[str]) -> None:
    preset = make_preset([relative("intro", "Intro."), relative("main", "Main."), relative("outro", "Outro.")])
    built = build(preset, authors_note=AuthorsNote(NOTE, position=position, role=2))
    assert positions(built)[:4] == ["intro", *expected, "outro"]
    part = next(p for p in built.parts if p.identifier == "authorsNote")
    assert (part.role, part.content, part.source) == ("assistant", NOTE, "authors_note")
    # Inserted into main's collection: mandatory, counted like any placed prompt.
    assert built.tokens["authors_note"] == estimate_tokens(NOTE) + MESSAGE_OVERHEAD


def test_in_prompt_note_keeps_its_anchor_when_main_is_disabled() -> None:
    obj = {"prompts": [{"identifier": "main", "name": "Main", "system_prompt": True, "content": "Main."},
                       {"identifier": "intro", "name": "intro", "content": "Intro."},
                       {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True}],
           "prompt_order": [{"character_id": 100001, "order": [
               {"identifier": "intro", "enabled": True}, {"identifier": "main", "enabled": False},
               {"identifier": "chatHistory", "enabled": True}]}]}
    preset = parse_preset(json.dumps(obj).encode(), "hand.json")
    built = build(preset, authors_note=AuthorsNote(NOTE, position=0))
    assert positions(built)[:3] == ["intro", "authorsNote", "newMainChat"]


def test_note_without_main_in_the_order_is_not_sent() -> None:
    built = build(make_preset([relative("intro", "Intro.")]), authors_note=AuthorsNote(NOTE, position=2))
    assert "authorsNote" not in positions(built)
    assert any(a.startswith("Author's Note not sent") for a in built.adjustments)


def test_persona_without_marker_follows_main_and_its_note() -> None:
    built = build(main_preset(), persona="A traveler.", authors_note=AuthorsNote(NOTE, position=0))
    assert positions(built)[:3] == ["main", "authorsNote", "personaDescription"]


def test_preset_authors_note_entry_overrides_role_and_can_make_it_in_chat() -> None:
    # preparePromptsForChatCompletion: an enabled collection prompt 'authorsNote' overrides the
    # extension prompt's role / injection_position / depth / order.
    entry = {"identifier": "authorsNote", "name": "AN", "role": "user", "content": ""}
    preset = make_preset([relative("main", "Main."), entry])
    built = build(preset, authors_note=AuthorsNote(NOTE, position=0, role=0))
    part = next(p for p in built.parts if p.identifier == "authorsNote")
    assert (part.role, part.source) == ("user", "authors_note")
    assert not any("'authorsNote' skipped" in a for a in built.adjustments)

    in_chat = make_preset([relative("main", "Main."), absolute("authorsNote", "", 1, role="assistant")])
    moved = build(in_chat, history=chat(3), authors_note=AuthorsNote(NOTE, position=0))
    assert positions(moved)[-3:] == ["message 1", "authorsNote", "message 2"]
    assert moved.parts[-2].role == "assistant"


# --- chat overrides --------------------------------------------------------------------------


def test_chat_overrides_from_metadata_keeps_non_empty_strings() -> None:
    meta = {"scenario": "On a ship.", "mes_example": "", "system_prompt": 3, "note_prompt": "x"}
    assert chat_overrides_from_metadata(meta) == {"scenario": "On a ship."}
    assert chat_overrides_from_metadata(None) == {}


def scenario_preset() -> ParsedPreset:
    marker = {"identifier": "scenario", "name": "Scenario", "system_prompt": True, "marker": True}
    return make_preset([relative("main", "Scene: {{scenario}}"), marker])


def test_chat_scenario_override_wins_for_the_marker_and_the_macro() -> None:
    card = {"scenario": "A glade."}
    built = build(scenario_preset(), card, chat_overrides={"scenario": "On a ship."})
    parts = {p.identifier: p.content for p in built.parts}
    assert parts["main"] == "Scene: On a ship."
    assert parts["scenario"] == "On a ship."  # scenario_format "{{scenario}}"
    assert "chat scenario override used instead of the card's scenario" in built.adjustments
    # `chat_metadata.scenario || card.scenario`: an empty override keeps the card's.
    kept = build(scenario_preset(), card, chat_overrides={"scenario": ""})
    assert {p.identifier: p.content for p in kept.parts}["scenario"] == "A glade."


def test_chat_mes_example_override_replaces_the_examples() -> None:
    marker = {"identifier": "dialogueExamples", "name": "Examples", "system_prompt": True, "marker": True}
    preset = make_preset([relative("main", "Main."), marker])
    card = {"mes_example": "<START>\n{{user}}: Card hello.\n{{char}}: Card reply."}
    built = build(preset, card, chat_overrides={"mes_example": "<START>\n{{user}}: Chat hello.\n{{char}}: Chat reply."})
    examples = [(p.name, p.content) for p in built.parts if p.source == "examples" and p.name]
    assert examples == [("example_user", "Chat hello."), ("example_assistant", "Chat reply.")]


def test_chat_system_prompt_override_replaces_main_over_the_cards() -> None:
    # systemPrompt = chat_metadata.system_prompt || card.data.system_prompt, then main override
    # with {{original}} = the preset's main.
    card = {"system_prompt": "Card system. {{original}}"}
    built = build(main_preset("Preset main."), card, chat_overrides={"system_prompt": "Chat system. {{original}}"})
    assert built.parts[0].content == "Chat system. Preset main."
    assert "chat system_prompt override replaced main (forbid_overrides off)" in built.adjustments
    plain = build(main_preset("Preset main."), card)
    assert plain.parts[0].content == "Card system. Preset main."
