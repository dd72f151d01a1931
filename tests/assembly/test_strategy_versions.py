"""Strategies as stored, versioned objects and the preset-roles-first placement (issue 5 §4;
DESIGN.md "Strategies"; seed 000 §2.1-2.2): saving never applies, applying pins a snapshot the
trace names, new playthroughs start on preset-slots-first, user-role preset prompts become
durable context that is admitted again only when it changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.assembly.strategies import BUILTINS, StrategySpec, check_options
from tavern_tui.config import Settings
from tavern_tui.errors import Conflict, NotFound, TavernError
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

CARD = {"spec": "chara_card_v2", "spec_version": "2.0",
        "data": {"name": "Mira", "first_mes": "Hello.", "description": "Mira keeps the lighthouse.",
                 "mes_example": "<START>\n{{user}}: Hi?\n{{char}}: Welcome."}}
PRESET = {
    "prompts": [
        {"identifier": "main", "name": "Main", "role": "system", "content": "Write {{char}}'s reply.",
         "system_prompt": True},
        {"identifier": "charDescription", "system_prompt": True, "marker": True},
        {"identifier": "dialogueExamples", "system_prompt": True, "marker": True},
        {"identifier": "userNote", "name": "User note", "role": "user", "content": "(OOC: keep replies short.)"},
        {"identifier": "ack", "name": "Ack", "role": "assistant", "content": "Understood."},
        {"identifier": "chatHistory", "system_prompt": True, "marker": True},
        {"identifier": "jailbreak", "role": "system", "content": "Stay in character.", "system_prompt": True},
    ],
    "prompt_order": [{"character_id": 100001, "order": [
        {"identifier": i, "enabled": True}
        for i in ("main", "charDescription", "dialogueExamples", "userNote", "ack", "chatHistory", "jailbreak")]}],
}


@pytest.fixture
def pid(tavern: Tavern, tmp_path: Path) -> int:
    (tmp_path / "mira.json").write_text(json.dumps(CARD))
    (tmp_path / "Short.json").write_text(json.dumps(PRESET))
    card, preset = tavern.imports.import_paths([tmp_path / "mira.json", tmp_path / "Short.json"])
    playthrough = tavern.playthroughs.new_playthrough(card.id, user_name="Ann").id
    tavern.presets.bind_preset(playthrough, preset.id)
    return playthrough


async def say(tavern: Tavern, model: ScriptedModel, pid: int, text: str) -> list[dict]:
    model.enqueue("Mm.")
    async for _ in tavern.steps.send(pid, text):
        pass
    return model.requests[-1].messages


def test_new_playthroughs_start_on_preset_slots_first(tavern: Tavern, pid: int) -> None:
    assert tavern.playthroughs.playthrough(pid).strategy == "preset-slots-first"
    assert tavern.strategies.applied_strategy(pid) == BUILTINS["preset-slots-first"]


def test_options_are_checked_and_hashed() -> None:
    assert check_options("preset-roles-first", {}) == {"examples": "system", "after_history": "system"}
    with pytest.raises(TavernError, match="option 'examples' must be one of system, omit"):
        check_options("preset-slots-first", {"examples": "sometimes"})
    with pytest.raises(TavernError, match="does not apply to projection"):
        check_options("projection", {"examples": "omit"})
    a = StrategySpec("a", 1, "preset-slots-first", check_options("preset-slots-first", {}))
    b = StrategySpec("b", 7, "preset-slots-first", check_options("preset-slots-first", {}))
    c = StrategySpec("a", 1, "preset-slots-first", check_options("preset-slots-first", {"examples": "omit"}))
    assert a.sha256 == b.sha256 != c.sha256  # the hash is what it does, not what it is called


async def test_saving_never_applies_and_applying_pins_the_version(tavern: Tavern, model: ScriptedModel,
                                                                  pid: int) -> None:
    with pytest.raises(TavernError, match="built in and read-only"):
        tavern.strategies.save_strategy("projection", "projection")
    v1 = tavern.strategies.save_strategy("lean", "preset-slots-first", {"examples": "system"})
    assert (v1.name, v1.version) == ("lean", 1)
    tavern.strategies.apply_strategy(pid, "lean")
    first = await say(tavern, model, pid, "Hello.")
    assert "Ann: Hi?" in first[0]["content"]  # v1 keeps the examples
    v2 = tavern.strategies.save_strategy("lean", "preset-slots-first", {"examples": "omit"}, expected_version=1)
    assert v2.version == 2
    with pytest.raises(Conflict):
        tavern.strategies.save_strategy("lean", "preset-slots-first", {}, expected_version=1)
    second = await say(tavern, model, pid, "Again.")
    assert "Ann: Hi?" in second[0]["content"]  # saved, not applied: still v1
    tavern.strategies.apply_strategy(pid, "lean")  # the newest version
    third = await say(tavern, model, pid, "Once more.")
    assert "Ann: Hi?" not in third[0]["content"]
    snaps = [tavern.traces.trace(t.id)["record"]["strategy_snapshot"] for t in tavern.traces.traces(pid)]
    assert [(s["name"], s["version"]) for s in snaps] == [("lean", 1), ("lean", 1), ("lean", 2)]
    assert snaps[0]["sha256"] == v1.sha256 and snaps[2]["sha256"] == v2.sha256
    assert tavern.strategies.strategy_spec("lean", 1) == v1 and tavern.strategies.strategy_spec("lean") == v2
    with pytest.raises(NotFound, match="unknown strategy 'lean' version 9"):
        tavern.strategies.strategy_spec("lean", 9)
    assert [s.name for s in tavern.strategies.strategies()] == [*BUILTINS, "lean"]


async def test_roles_first_keeps_user_prompts_as_durable_context(tavern: Tavern, model: ScriptedModel,
                                                                 pid: int) -> None:
    tavern.strategies.apply_strategy(pid, "preset-roles-first")
    shown = tavern.steps.preview(pid, "Hello.")
    sent = await say(tavern, model, pid, "Hello.")
    assert [{k: v for k, v in m.items() if k != "source"} for m in shown["messages"]] == sent
    system = sent[0]
    assert system["role"] == "system"
    assert system["content"].startswith("Write Mira's reply.\n\nMira keeps the lighthouse.")
    assert "Understood." in system["content"] and "Stay in character." in system["content"]
    assert "(OOC: keep replies short.)" not in system["content"]
    # The user-role prompt keeps its role: a context message just before the input.
    assert sent[1:] == [{"role": "assistant", "content": "Hello."},
                        {"role": "user", "content": "(OOC: keep replies short.)"},
                        {"role": "user", "content": "Hello."}]
    assert [m["source"] for m in shown["messages"]] == ["system", "history", "context", "input"]
    moves = " | ".join(shown["adjustments"])
    assert "'ack' (role assistant) sent inside the system section" in moves
    # It entered durable history (origin engine) and is not admitted again while unchanged.
    again = await say(tavern, model, pid, "And now?")
    assert [m["content"] for m in again[1:]] == ["Hello.", "(OOC: keep replies short.)", "Hello.", "Mm.", "And now?"]
    context = [m for m in tavern.playthroughs.messages(pid) if m.content == "(OOC: keep replies short.)"]
    assert [(m.role, m.origin) for m in context] == [("user", "engine")]
    record = tavern.traces.trace(tavern.traces.traces(pid)[-1].id)["record"]
    assert [m["source"] for m in record["messages"]][:3] == ["system", "history", "context"]
    assert tavern.traces.verify_trace(tavern.traces.traces(pid)[-1].id).ok
    tavern.persona.consolidate(pid)
    assert all("short" not in b.key for b in tavern.persona.beliefs())  # context is never the person's words


async def test_roles_first_after_history_option_moves_post_history_prompts_to_context(
        tavern: Tavern, model: ScriptedModel, pid: int) -> None:
    tavern.strategies.save_strategy("ctx", "preset-roles-first", {"after_history": "context"})
    tavern.strategies.apply_strategy(pid, "ctx")
    sent = await say(tavern, model, pid, "Hello.")
    assert "Stay in character." not in sent[0]["content"]
    assert sent[-3:] == [{"role": "user", "content": "(OOC: keep replies short.)"},
                         {"role": "user", "content": "Stay in character."},
                         {"role": "user", "content": "Hello."}]


def test_the_default_for_new_playthroughs_can_be_configured(db_url: str, model: ScriptedModel,
                                                           tmp_path: Path) -> None:
    service = Tavern(Settings(db_url=db_url, default_strategy="compat"), provider=model)
    try:
        (tmp_path / "mira.json").write_text(json.dumps(CARD))
        [card] = service.imports.import_paths([tmp_path / "mira.json"])
        assert service.playthroughs.playthrough(service.playthroughs.new_playthrough(card.id).id).strategy == "compat"
    finally:
        service.close()


def test_cli_lists_saves_and_applies_strategies(tavern: Tavern, pid: int, db_url: str) -> None:
    import io

    from tavern_tui.cli import main

    def run(*args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        return main(["--db", db_url, *args], out, err), out.getvalue(), err.getvalue()

    code, out, _ = run("strategy", "save", "terse", "--base", "preset-slots-first", "--option", "examples=omit")
    assert code == 0 and "saved terse v1" in out and "not applied" in out
    code, _, err = run("strategy", "save", "terse", "--base", "preset-slots-first", "--option", "examples=never")
    assert code == 1 and "option 'examples' must be one of system, omit" in err
    code, out, _ = run("strategies", "--json")
    listed = {s["name"]: s for s in json.loads(out)}
    assert listed["terse"]["options"] == {"examples": "omit"} and listed["projection"]["builtin"] is True
    assert tavern.strategies.applied_strategy(pid).name == "preset-slots-first"  # saving applied nothing
    code, out, _ = run("strategy", "apply", str(pid), "terse", "--version", "1")
    assert code == 0 and tavern.strategies.applied_strategy(pid).name == "terse"
