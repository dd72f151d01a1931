"""The `rp:policy` section in the assemblers themselves (`assembly.policy`): compat ends its system
prompt with it; the preset builder places it as its own system part just before the chat history;
an empty policy adds nothing. The service side (OOC toggle, settings) is tests/service/test_rp_policy.py."""

from __future__ import annotations

from pathlib import Path

from tavern_tui.assembly.basic import BasicAssembler, system_prompt_parts
from tavern_tui.assembly.macros import MacroContext
from tavern_tui.assembly.sillytavern import HistoryMessage, PromptInputs, build_prompt
from tavern_tui.formats.presets import parse_preset

CARD = {"description": "A healer of the glade.", "mes_example": "<START>\n{{char}}: Rest now."}
POLICY = "Stay in character as {{char}}; never write {{user}}'s lines."


def test_compat_puts_the_policy_last_as_its_own_section() -> None:
    for macros in (None, MacroContext(char="Seraphina", user="Ann")):
        text, parts = system_prompt_parts(CARD, "Seraphina", "Ann", persona="Ann is a ranger.", macros=macros,
                                          policy=POLICY)
        sent = "Stay in character as Seraphina; never write Ann's lines."
        assert text.endswith("\n\n" + sent)
        last = parts[-1]
        assert (last["kind"], last["identifier"], text[last["start"]:last["end"]]) == ("policy", "rp:policy", sent)
        plain, plain_parts = system_prompt_parts(CARD, "Seraphina", "Ann", persona="Ann is a ranger.", macros=macros)
        assert text == plain + "\n\n" + sent and plain_parts == parts[:-1]
        assert system_prompt_parts(CARD, "Seraphina", "Ann", macros=macros, policy="  ")[1][-1]["kind"] != "policy"


def test_the_basic_assembler_sends_it_in_the_system_section() -> None:
    assembly = BasicAssembler(CARD, "Seraphina", "Ann", {}, policy=POLICY)([], ["Hello"])
    assert assembly.system.endswith("Stay in character as Seraphina; never write Ann's lines.")
    assert [p["identifier"] for p in assembly.meta["system_parts"]][-1] == "rp:policy"


def test_the_preset_builder_places_it_just_before_the_chat(corpus_dir: Path) -> None:
    path = corpus_dir / "presets" / "st_openai_default_staging.json"
    preset = parse_preset(path.read_bytes(), path.name)
    history = [HistoryMessage("user", "Hello", (1, 1), "Ann", is_input=True)]
    built = build_prompt(PromptInputs(preset=preset, card=CARD, char="Seraphina", user="Ann", history=history,
                                      policy=POLICY))
    sources = [p.source for p in built.parts]
    at = sources.index("policy")
    policy = built.parts[at]
    assert (policy.role, policy.identifier, policy.content) == (
        "system", "rp:policy", "Stay in character as Seraphina; never write Ann's lines.")
    assert [s["kind"] for s in policy.spans] == ["policy"]
    assert all(s not in ("history", "input", "new_chat") for s in sources[:at])  # before the chat …
    assert sources[at + 1] in ("new_chat", "history", "input")  # … right before it
    plain = build_prompt(PromptInputs(preset=preset, card=CARD, char="Seraphina", user="Ann", history=history))
    assert [p for p in built.parts if p.source != "policy"] == plain.parts
