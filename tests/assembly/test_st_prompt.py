"""`build_prompt`: the chat-completion request SillyTavern would send for a preset (issue 5 §3,
format-digest §c.4), with the corpus presets and Seraphina, and small hand-made presets."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tavern_tui.assembly.macros import MacroContext
from tavern_tui.assembly.sillytavern import (
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    BuiltPrompt,
    HistoryMessage,
    PromptInputs,
    PromptPart,
    PromptTooLarge,
    build_prompt,
    parse_example_block,
    sanitize_name,
    to_messages,
)
from tavern_tui.formats.cards import parse_card
from tavern_tui.formats.presets import ParsedPreset, parse_preset
from tavern_tui.lore.model import Role
from tavern_tui.lore.result import Buckets
from tavern_tui.text.tokens import estimate_tokens

CHAR, USER = "Seraphina", "Alice"
DEFAULT_MAIN = "Write Seraphina's next reply in a fictional chat between Seraphina and Alice."


# --- fixtures and helpers ----------------------------------------------------------------------


def load_preset(corpus_dir: Path, name: str) -> ParsedPreset:
    path = corpus_dir / "presets" / name
    return parse_preset(path.read_bytes(), path.name)


@pytest.fixture()
def default_preset(corpus_dir: Path) -> ParsedPreset:
    return load_preset(corpus_dir, "st_openai_default_staging.json")


@pytest.fixture(scope="module")
def seraphina_data() -> dict[str, Any]:
    from tests.conftest import CORPUS_DIR

    path = CORPUS_DIR / "cards" / "seraphina_chara_ccv3.png"
    return parse_card(path.read_bytes(), path.name).data


@pytest.fixture()
def card(seraphina_data: dict[str, Any]) -> dict[str, Any]:
    """Seraphina's data; she has no personality/scenario/examples, so the tests add them."""
    data = copy.deepcopy(seraphina_data)
    data.update(personality="kind and watchful", scenario="a glade in Eldoria",
                mes_example="<START>\n{{user}}: Hello?\n{{char}}: Rest now, {{user}}.\n*She smiles.*")
    return data


def chat(n: int, with_input: bool = True) -> list[HistoryMessage]:
    """n messages alternating assistant/user, oldest first; the last is the input when asked."""
    out = []
    for i in range(n):
        role = "assistant" if (n - i) % 2 == 0 else "user"
        name = CHAR if role == "assistant" else USER
        out.append(HistoryMessage(role, f"message {i}", (1, i), name, is_input=with_input and i == n - 1))
    return out


def make_preset(prompts: list[dict[str, Any]], order: list[str] | None = None, **settings: Any) -> ParsedPreset:
    """A preset with `prompts` (plus chatHistory) in the given order, all enabled."""
    items = [{"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True}, *prompts]
    idents = order or [p["identifier"] for p in prompts] + ["chatHistory"]
    obj = {"openai_max_context": 100000, "openai_max_tokens": 300, **settings, "prompts": items,
           "prompt_order": [{"character_id": 100001, "order": [{"identifier": i, "enabled": True} for i in idents]}]}
    return parse_preset(json.dumps(obj).encode(), "hand.json")


def absolute(ident: str, content: str, depth: int, order: int = 100, role: str = "system") -> dict[str, Any]:
    return {"identifier": ident, "name": ident, "role": role, "content": content, "injection_position": 1,
            "injection_depth": depth, "injection_order": order}


def relative(ident: str, content: str, role: str = "system") -> dict[str, Any]:
    return {"identifier": ident, "name": ident, "role": role, "content": content}


def build(preset: ParsedPreset, card: dict[str, Any] | None = None, **kwargs: Any) -> BuiltPrompt:
    kwargs.setdefault("history", chat(3))
    return build_prompt(PromptInputs(preset=preset, card=card if card is not None else {}, char=CHAR, user=USER,
                                     **kwargs))


def idents(built: BuiltPrompt) -> list[str]:
    return [p.identifier or p.source for p in built.parts]


def cost(part: PromptPart) -> int:
    return estimate_tokens(part.content) + (estimate_tokens(part.name) if part.name else 0) + MESSAGE_OVERHEAD


# --- collection and markers ------------------------------------------------------------------


def test_default_preset_with_seraphina_follows_order_100001(default_preset: ParsedPreset,
                                                            card: dict[str, Any]) -> None:
    built = build(default_preset, card, persona="A lost traveler.", history=chat(3))

    assert idents(built) == [
        "main", "personaDescription", "charDescription", "charPersonality", "scenario",
        "dialogueExamples", "dialogueExamples", "dialogueExamples", "newMainChat", "history", "history", "input",
    ]
    assert all(p.role == "system" for p in built.parts[:9])
    assert [p.role for p in built.parts[9:]] == ["user", "assistant", "user"]
    parts = {p.identifier: p for p in built.parts[:5]}
    assert parts["main"].content == DEFAULT_MAIN
    assert parts["main"].source == "preset"
    assert parts["personaDescription"].content == "A lost traveler."
    assert parts["personaDescription"].source == "persona"  # its own section (DESIGN.md, persona)
    assert parts["charDescription"].content == card["description"].replace("{{char}}", CHAR).replace("{{user}}", USER)
    assert parts["charPersonality"].content == "[Seraphina's personality: kind and watchful]"
    assert parts["scenario"].content == "[Circumstances and context of the dialogue: a glade in Eldoria]"
    assert {parts[i].source for i in ("charDescription", "charPersonality", "scenario")} == {"marker"}
    examples = built.parts[5:8]
    assert [(p.name, p.content) for p in examples] == [
        (None, "[Example Chat]"), ("example_user", "Hello?"), ("example_assistant", "Rest now, Alice.\n*She smiles.*")]
    assert built.parts[8].content == "[Start a new Chat]" and built.parts[8].source == "new_chat"
    assert [p.ref for p in built.parts[9:]] == [(1, 0), (1, 1), (1, 2)]
    # empty nsfw/jailbreak are reported; empty world info is simply absent
    assert "prompt 'nsfw' skipped: empty" in built.adjustments
    assert "prompt 'jailbreak' skipped: empty" in built.adjustments
    assert built.budget == 4095 - 300
    assert built.history_dropped == 0
    assert built.tokens["history"] == sum(cost(p) for p in built.parts[9:11])
    assert set(built.tokens) == {"preset", "marker", "persona", "examples", "new_chat", "history", "input"}


def test_world_info_markers_and_jailbreak_take_their_places(default_preset: ParsedPreset,
                                                            card: dict[str, Any]) -> None:
    card["post_history_instructions"] = "Stay in character as {{char}}."
    lore = Buckets(before="The forest is old.", after="Wolves roam at night.")
    built = build(default_preset, card, lore=lore)

    order = idents(built)
    assert order[:2] == ["main", "worldInfoBefore"]
    assert order.index("worldInfoAfter") == order.index("scenario") + 1
    assert order[-1] == "jailbreak"
    wi = {p.identifier: p for p in built.parts if p.source == "world_info"}
    assert wi["worldInfoBefore"].content == "The forest is old."
    assert wi["worldInfoAfter"].content == "Wolves roam at night."
    assert built.parts[-1].content == "Stay in character as Seraphina."
    assert "card post_history_instructions replaced jailbreak (forbid_overrides off)" in built.adjustments
    assert "personaDescription" not in order  # no persona → no part


def test_wi_format_wraps_the_text_and_a_blank_format_sends_it_raw() -> None:
    prompts = [{"identifier": "worldInfoBefore", "marker": True, "system_prompt": True}]
    # Activated WI text is expanded once (ST substitutes it on activation; issue 17: our lore engine only
    # fills the names, the builder does the rest after the card fields). Once: the unescaped braces stay.
    wrapped = build(make_preset(prompts, wi_format="[Lore of {{char}}: {0}]"),
                    lore=Buckets(before="{{user}} text \\{\\{char\\}\\}"))
    assert wrapped.parts[0].content == "[Lore of Seraphina: Alice text {{char}}]"
    raw = build(make_preset(prompts, wi_format="  "), lore=Buckets(before="plain"))
    assert raw.parts[0].content == "plain"


def test_card_system_prompt_wraps_the_preset_main_with_original(default_preset: ParsedPreset,
                                                                card: dict[str, Any]) -> None:
    card["system_prompt"] = "Card rules for {{char}}. {{original}} Twice: {{original}}."
    built = build(default_preset, card)

    assert built.parts[0].identifier == "main"
    assert built.parts[0].content == f"Card rules for Seraphina. {DEFAULT_MAIN} Twice: ."
    assert "card system_prompt replaced main (forbid_overrides off)" in built.adjustments


def test_forbid_overrides_keeps_the_preset_main(default_preset: ParsedPreset, card: dict[str, Any]) -> None:
    default_preset.prompts["main"].forbid_overrides = True
    card["system_prompt"] = "Card rules. {{original}}"
    built = build(default_preset, card)

    assert built.parts[0].content == DEFAULT_MAIN
    assert "card system_prompt not used: 'main' forbids overrides" in built.adjustments


def test_disabled_main_is_skipped_and_not_overridden(card: dict[str, Any]) -> None:
    preset = make_preset([relative("main", "Main text."), relative("extra", "Extra.")])
    preset.order[0].enabled = False
    card["system_prompt"] = "Card main."
    built = build(preset, card)

    assert "main" not in idents(built)
    assert idents(built)[0] == "extra"
    assert "prompt 'main' skipped: disabled in the preset" in built.adjustments
    assert "card system_prompt not used: 'main' is disabled in the preset" in built.adjustments


def test_prompts_go_through_macros_and_empty_results_are_skipped() -> None:
    preset = make_preset([relative("setter", "{{setvar::mood::calm}}"), relative("reader", "Mood: {{getvar::mood}}"),
                          relative("blank", "   "), relative("who", "{{user}} meets {{char}}", role="user")])
    ctx = MacroContext()
    built = build(preset, macros=ctx)

    assert [(p.identifier, p.content, p.role) for p in built.parts[:2]] == [
        ("reader", "Mood: calm", "system"), ("who", "Alice meets Seraphina", "user")]
    assert ctx.local_vars == {"mood": "calm"}  # the base context's variables are the ones written
    assert "prompt 'setter' skipped: empty" in built.adjustments
    assert "prompt 'blank' skipped: empty" in built.adjustments


def test_unknown_markers_and_engine_prompts_are_not_placed() -> None:
    preset = make_preset([{"identifier": "myMarker", "marker": True}, relative("impersonate", "Imp."),
                          {**relative("customBuiltin", "X."), "system_prompt": True}, relative("kept", "Kept.")])
    built = build(preset)

    assert idents(built)[0] == "kept"
    assert "marker 'myMarker' skipped: SillyTavern fills no marker of that name" in built.adjustments
    assert any(a.startswith("prompt 'impersonate' skipped") for a in built.adjustments)
    assert any(a.startswith("prompt 'customBuiltin' skipped") for a in built.adjustments)


# --- in-chat injections ------------------------------------------------------------------------


def history_positions(built: BuiltPrompt) -> list[str]:
    return [p.content if p.source in ("history", "input") else p.identifier for p in built.parts]


def test_depth_4_injection_lands_before_the_4th_message_from_the_end() -> None:
    preset = make_preset([absolute("deep", "Deep note.", 4)])
    built = build(preset, history=chat(6))

    assert history_positions(built) == ["newMainChat", "message 0", "message 1", "deep", "message 2", "message 3",
                                        "message 4", "message 5"]
    part = built.parts[3]
    assert (part.role, part.content, part.source) == ("system", "Deep note.", "injection")


def test_two_depth_0_injections_follow_the_last_message_lower_order_first() -> None:
    preset = make_preset([absolute("late", "Order 200.", 0, order=200), absolute("early", "Order 100.", 0, order=100)])
    built = build(preset, history=chat(3))

    assert history_positions(built)[-3:] == ["message 2", "early", "late"]


def test_within_one_depth_and_order_assistant_then_user_then_system_and_same_role_joins() -> None:
    preset = make_preset([absolute("s1", "System one.", 1), absolute("u1", "User one.", 1, role="user"),
                          absolute("a1", "Assistant one.", 1, role="assistant"), absolute("s2", "System two.", 1)])
    built = build(preset, history=chat(3))

    tail = built.parts[-4:]
    assert [(p.role, p.identifier) for p in tail] == [
        ("assistant", "a1"), ("user", "u1"), ("system", "s1+s2"), ("user", "")]
    assert tail[2].content == "System one.\nSystem two."
    assert tail[3].content == "message 2"


def test_injection_deeper_than_the_chat_goes_to_its_top() -> None:
    built = build(make_preset([absolute("far", "Far.", 50)]), history=chat(2))
    assert history_positions(built) == ["newMainChat", "far", "message 0", "message 1"]


def test_world_info_at_depth_and_the_card_depth_prompt_join_the_order_100_group(card: dict[str, Any]) -> None:
    card["extensions"] = {"depth_prompt": {"prompt": "Note for {{char}}.", "depth": 2, "role": "system"}}
    lore = Buckets(at_depth={(2, Role.SYSTEM): "WI at two.", (0, Role.USER): "WI for the user."})
    preset = make_preset([absolute("pre", "Preset at two.", 2), absolute("other", "Order 50.", 2, order=50)])
    built = build(preset, card, lore=lore, history=chat(4))

    assert history_positions(built) == [
        "newMainChat", "message 0", "message 1", "other", "pre+charDepthPrompt+worldInfoDepth", "message 2",
        "message 3", "worldInfoDepth"]
    merged = built.parts[4]
    assert merged.content == "Preset at two.\nNote for Seraphina.\nWI at two."
    assert merged.source == "injection"
    wi = built.parts[-1]
    assert (wi.role, wi.source, wi.content) == ("user", "world_info", "WI for the user.")
    assert built.tokens["world_info"] == cost(wi)


def test_markers_set_to_in_chat_are_injected(card: dict[str, Any]) -> None:
    prompts = [{"identifier": "charDescription", "marker": True, "system_prompt": True, "role": "user",
                "injection_position": 1, "injection_depth": 0}]
    built = build(make_preset(prompts), card)
    assert built.parts[-1].role == "user"
    assert built.parts[-1].identifier == "charDescription"
    assert built.parts[-1].content.startswith("[Seraphina's Personality=")


# --- budget ------------------------------------------------------------------------------------


def test_oldest_messages_are_dropped_when_the_budget_is_full_and_the_input_is_kept() -> None:
    history = chat(10)
    preset = make_preset([relative("main", "Main.")])
    full = build(preset, history=history)
    mandatory = REPLY_PRIMING + sum(cost(p) for p in full.parts if p.source in ("preset", "new_chat", "input"))
    per_message = cost(full.parts[-2])  # every "message N" costs the same
    preset.settings["openai_max_context"] = 300 + mandatory + 3 * per_message
    built = build(preset, history=history)

    assert history_positions(built)[-4:] == ["message 6", "message 7", "message 8", "message 9"]
    assert built.history_dropped == 6
    assert f"6 oldest messages left out: the budget of {mandatory + 3 * per_message} tokens is full" \
        in built.adjustments
    assert built.parts[1].source == "new_chat"  # still on top of what is left


def test_mandatory_prompts_over_the_budget_raise_prompt_too_large(default_preset: ParsedPreset,
                                                                   card: dict[str, Any]) -> None:
    default_preset.settings["openai_max_context"] = 400
    with pytest.raises(PromptTooLarge) as caught:
        build(default_preset, card)
    err = caught.value
    assert err.budget == 100 and err.needed > 100
    assert err.max_context == 400 and err.max_tokens == 300
    assert str(err).startswith("Mandatory prompts exceed the context size")
    assert f"they need {err.needed} tokens, the budget is 100" in str(err)


def test_examples_are_dropped_before_history_unless_pinned(default_preset: ParsedPreset,
                                                           card: dict[str, Any]) -> None:
    history = chat(6)
    roomy = build(default_preset, card, history=history)
    mandatory = REPLY_PRIMING + sum(t for s, t in roomy.tokens.items()
                                    if s in ("preset", "marker", "new_chat", "input"))
    room = roomy.tokens["history"] + 1  # the whole chat fits, the example block (more than 1 token) does not
    default_preset.settings["openai_max_context"] = 300 + mandatory + room

    tight = build(default_preset, card, history=history)
    assert "dialogueExamples" not in idents(tight)
    assert tight.history_dropped == 0
    assert any(a.startswith("examples left out: budget") for a in tight.adjustments)

    default_preset.settings["pin_examples"] = True
    pinned = build(default_preset, card, history=history)
    assert idents(pinned).count("dialogueExamples") == 3
    assert pinned.history_dropped > 0
    assert pinned.parts[-1].source == "input"  # the input stays whatever the budget


def test_example_blocks_come_whole_in_order_world_info_first(default_preset: ParsedPreset,
                                                              card: dict[str, Any]) -> None:
    card["mes_example"] = "<START>\n{{user}}: A\n{{char}}: B\n<START>\n{{char}}: C"
    lore = Buckets(examples_top=["<START>\n{{user}}: top"], examples_bottom=["{{char}}: bottom"])
    built = build(default_preset, card, lore=lore)
    examples = [(p.name, p.content) for p in built.parts if p.source == "examples"]
    header = (None, "[Example Chat]")
    assert examples == [header, ("example_user", "top"), header, ("example_user", "A"), ("example_assistant", "B"),
                        header, ("example_assistant", "C"), header, ("example_assistant", "bottom")]


def test_parse_example_block_follows_parse_example_into_individual() -> None:
    block = "Narration first.\nAlice: Hi there\nAlice: still me\nBob: Hello\nmore of Bob: yes"
    assert parse_example_block(block, "Alice", "Bob") == [
        ("example_user", "Narration first.\n Hi there\nAlice: still me"),
        ("example_assistant", "Hello\nmore of Bob: yes"),
    ]
    assert parse_example_block("no speaker at all", "Alice", "Bob") == []


# --- generation types --------------------------------------------------------------------------


def test_continue_without_prefill_sends_the_reply_and_the_nudge_last(default_preset: ParsedPreset,
                                                                      card: dict[str, Any]) -> None:
    card["post_history_instructions"] = "PHI."
    built = build(default_preset, card, generation="continue", continue_text="She raised her hand",
                  history=chat(2, with_input=False))

    reply, nudge = built.parts[-2:]
    assert (reply.role, reply.source, reply.content) == ("assistant", "continue", "She raised her hand")
    assert (nudge.role, nudge.source) == ("system", "continue")
    assert nudge.content.startswith("[Continue the following message.")
    assert nudge.content.endswith(": She raised her hand]")  # {{lastChatMessage}}
    assert built.parts[-3].identifier == "jailbreak"  # ST adds the continue collection at the very end


def test_continue_with_prefill_ends_on_the_reply_plus_postfix(default_preset: ParsedPreset,
                                                              card: dict[str, Any]) -> None:
    default_preset.settings["continue_prefill"] = True
    built = build(default_preset, card, generation="continue", continue_text="She raised her hand",
                  history=chat(2, with_input=False))
    assert built.parts[-1] == PromptPart("assistant", "She raised her hand ", "prefill", "continuePrefill")
    assert not any(p.source == "continue" for p in built.parts)

    default_preset.settings["continue_postfix"] = "\n"
    again = build(default_preset, card, generation="continue", continue_text="Done. ", history=chat(2, False))
    assert again.parts[-1].content == "Done. "  # ends with a space: no postfix, as ST


def test_continue_anchor_counts_for_injection_depth() -> None:
    preset = make_preset([absolute("d1", "Depth one.", 1)])
    history = chat(2, with_input=False)
    plain = build(preset, history=history, generation="continue", continue_text="Reply")
    # the continued reply counted as the newest message: depth 1 lands after message 1
    assert history_positions(plain)[-4:] == ["message 1", "d1", "continueMessage", "continueNudge"]
    preset.settings["continue_prefill"] = True
    prefilled = build(preset, history=history, generation="continue", continue_text="Reply")
    assert history_positions(prefilled)[-3:] == ["d1", "message 1", "continuePrefill"]


def test_impersonate_ends_with_the_impersonation_prompt_then_its_prefill(default_preset: ParsedPreset,
                                                                         card: dict[str, Any]) -> None:
    built = build(default_preset, card, generation="impersonate", history=chat(2, with_input=False))
    last = built.parts[-1]
    assert (last.role, last.source) == ("system", "impersonate")
    assert last.content.startswith("[Write your next reply from the point of view of Alice")

    default_preset.settings.update(assistant_impersonation="Alice:", assistant_prefill="unused")
    with_prefill = build(default_preset, card, generation="impersonate", history=chat(2, with_input=False))
    assert [p.source for p in with_prefill.parts[-2:]] == ["impersonate", "prefill"]
    assert with_prefill.parts[-1].content == "Alice:"


def test_assistant_prefill_is_the_final_assistant_message() -> None:
    built = build(make_preset([relative("main", "Main.")], assistant_prefill="Sure, {{user}}:"))
    assert built.parts[-1] == PromptPart("assistant", "Sure, Alice:", "prefill", "assistantPrefill")


def test_send_if_empty_fills_the_user_turn_only_without_input() -> None:
    preset = make_preset([relative("main", "Main.")], send_if_empty="(continue)")
    ends_with_reply = [*chat(2, with_input=False), HistoryMessage("assistant", "A reply.", (1, 2), CHAR)]
    regen = build(preset, history=ends_with_reply, generation="regenerate")
    assert regen.parts[-1] == PromptPart("user", "(continue)", "send_if_empty", "emptyUserMessageReplacement")
    assert regen.parts[-2].content == "A reply."
    normal = build(preset, history=chat(3))
    assert not any(p.source == "send_if_empty" for p in normal.parts)


def test_injection_trigger_filters_by_generation_type() -> None:
    prompt = {**relative("only_cont", "Only on continue."), "injection_trigger": ["continue"]}
    preset = make_preset([prompt])
    assert "only_cont" not in idents(build(preset))
    assert "only_cont" in idents(build(preset, generation="continue", continue_text="x"))


def test_without_chat_history_marker_no_chat_is_sent() -> None:
    preset = make_preset([relative("main", "Main.")], order=["main"])
    built = build(preset)
    assert idents(built) == ["main"]
    assert "chat history not sent: the preset's order has no enabled 'chatHistory'" in built.adjustments


# --- squash and names --------------------------------------------------------------------------


def test_squash_merges_consecutive_unnamed_system_parts(default_preset: ParsedPreset, card: dict[str, Any]) -> None:
    default_preset.settings["squash_system_messages"] = True
    built = build(default_preset, card, persona="A lost traveler.")

    first = built.parts[0]
    assert first.identifier == "main"
    assert first.content.split("\n")[:2] == [DEFAULT_MAIN, "A lost traveler."]
    assert first.content.endswith("[Circumstances and context of the dialogue: a glade in Eldoria]")
    assert [p.source for p in built.parts] == ["preset", "examples", "examples", "examples", "new_chat",
                                               "history", "history", "input"]
    assert built.parts[1].content == "[Example Chat]"  # the example header stays apart
    assert built.tokens["marker"] > 0  # counted before squashing


def test_names_behavior_content_prefixes_names_once() -> None:
    preset = make_preset([relative("main", "Main.")], names_behavior=2)
    history = [HistoryMessage("assistant", "Hello.", (1, 0), CHAR),
               HistoryMessage("user", "Alice: already named", (1, 1), USER, is_input=True)]
    built = build(preset, history=history)
    assert [p.content for p in built.parts[-2:]] == ["Seraphina: Hello.", "Alice: already named"]
    assert all(p.name is None for p in built.parts)


def test_names_behavior_completion_sets_sanitised_names() -> None:
    preset = make_preset([relative("main", "Main.")], names_behavior=1)
    history = [HistoryMessage("assistant", "Hello.", (1, 0), "Zoë Smith"),
               HistoryMessage("user", "Hi.", (1, 1), USER, is_input=True)]
    built = build(preset, history=history)
    assert [(p.name, p.content) for p in built.parts[-2:]] == [("Zoe_Smith", "Hello."), ("Alice", "Hi.")]
    assert to_messages(built.parts[-2:]) == [{"role": "assistant", "content": "Hello.", "name": "Zoe_Smith"},
                                             {"role": "user", "content": "Hi.", "name": "Alice"}]
    assert built.parts[0].name is None
    assert sanitize_name("a" * 70) == "a" * 64
    assert sanitize_name("名前") == "__"


def test_names_behavior_none_and_default_leave_messages_alone() -> None:
    for behaviour in (-1, 0):
        built = build(make_preset([relative("main", "Main.")], names_behavior=behaviour), history=chat(2))
        assert [p.content for p in built.parts[-2:]] == ["message 0", "message 1"]
        assert all(p.name is None for p in built.parts)


def test_history_goes_through_macros() -> None:
    history = [HistoryMessage("user", "Hi {{char}}, I am {{user}}.", (1, 0), USER, is_input=True)]
    built = build(make_preset([relative("main", "Last: {{lastUserMessage}}")]), history=history)
    assert built.parts[-1].content == "Hi Seraphina, I am Alice."
    assert built.parts[0].content == "Last: Hi {{char}}, I am {{user}}."  # chat state is raw, as ST's


def test_to_messages_is_one_message_per_part() -> None:
    parts = [PromptPart("system", "a", "preset", "main"), PromptPart("system", "b", "examples", name="example_user")]
    assert to_messages(parts) == [{"role": "system", "content": "a"},
                                  {"role": "system", "content": "b", "name": "example_user"}]


# --- corpus presets (smoke, with independent counts) -------------------------------------------


@pytest.mark.parametrize("name", ["atelier_1_2.json", "nemoengine_5_4_tutorial.json", "nemo_vivarium_v1_0_beta.json"])
def test_corpus_presets_build_on_a_ten_message_chat(corpus_dir: Path, card: dict[str, Any], name: str) -> None:
    preset = load_preset(corpus_dir, name)
    preset.settings["squash_system_messages"] = False  # count parts one by one
    history = chat(10)
    built = build(preset, card, persona="A lost traveler.", history=history)

    enabled = preset.enabled_prompts("normal")
    placed = {"chatHistory", "dialogueExamples", "worldInfoBefore", "worldInfoAfter", "charDescription",
              "charPersonality", "scenario", "personaDescription"}
    relative_text = [p for p in enabled if not p.marker and p.injection_position == 0 and p.identifier not in placed]
    absolute_text = [p for p in enabled if not p.marker and p.injection_position == 1]
    skipped = {a.split("'")[1] for a in built.adjustments if a.startswith("prompt '") and " skipped: " in a}
    present = [p.identifier for p in built.parts if p.source == "preset"]

    # every enabled relative prompt is either sent, once, in order, or reported as skipped
    assert present == [p.identifier for p in relative_text if p.identifier not in skipped]
    assert set(skipped) <= {p.identifier for p in relative_text}
    for prompt in relative_text:
        if prompt.identifier in skipped and prompt.identifier != "main":
            assert not prompt.content.strip() or "{{" in prompt.content  # only macro-only prompts vanish
    # injections: one message per (depth, order, role) group of the absolute prompts
    groups = {(p.injection_depth, p.injection_order, p.role) for p in absolute_text if p.content.strip()}
    assert sum(p.source == "injection" for p in built.parts) == len(groups)
    # the whole chat fits these huge budgets
    assert built.history_dropped == 0
    chat_parts = [p for p in built.parts if p.source in ("history", "input")]
    assert [p.ref for p in chat_parts] == [m.ref for m in history]
    markers = [p for p in built.parts if p.source in ("marker", "persona")]
    expected_markers = [i for i in ("charDescription", "charPersonality", "scenario")
                        if i in {p.identifier for p in enabled if p.injection_position == 0}]
    # The persona is always sent: at its marker, else placed after the instructions (and said so).
    assert sorted(p.identifier for p in markers) == sorted([*expected_markers, "personaDescription"])
    has_marker = "personaDescription" in {p.identifier for p in enabled}
    assert has_marker != any("no enabled personaDescription marker" in a for a in built.adjustments)
    assert len(built.parts) == (len(present) + len(groups) + len(markers) + len(chat_parts)
                                + sum(p.source in ("examples", "new_chat") for p in built.parts))
    assert sum(built.tokens.values()) == sum(cost(p) for p in built.parts)
