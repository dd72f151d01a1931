"""Branches inherit (issue 20 item 2; seed 000 §3 `agent/created`: a child inherits its parent's
strategy selection): a new playthrough from a message, a swipe fork and a rollback carry the
parent's strategy snapshot, preset, chat-bound books, persona and variables at that point, and
a child's later changes never touch the parent. Variable values follow SillyTavern 1.18
`variables.js` (`{{incvar::n}}` on a missing variable gives 1, then counts up)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Counter", "first_mes": "Hello {{user}}.",
    "description": "Turn {{incvar::turns}} of the story."}}


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


@pytest.fixture
def setup(tavern: Tavern, tmp_path: Path, corpus_dir: Path) -> tuple[int, int, int]:
    """(playthrough, book, preset): a playthrough with a preset, a chat book and a saved
    strategy version 1 applied (a version 2 is saved after, so "the newest" would differ)."""
    card = tmp_path / "counter.json"
    card.write_text(json.dumps(CARD))
    character, book, preset = tavern.imports.import_paths([
        card, corpus_dir / "worldbooks" / "eldoria_st_staging.json",
        corpus_dir / "presets" / "st_openai_default_staging.json"])
    assert character.ok and book.ok and preset.ok
    pid = tavern.playthroughs.new_playthrough(character.id, user_name="Ann").id
    tavern.presets.bind_preset(pid, preset.id)
    tavern.lore.bind_world_book(book.id, "playthrough", pid)
    tavern.strategies.save_strategy("mine", "preset-roles-first", {"examples": "omit"})
    tavern.strategies.apply_strategy(pid, "mine")
    tavern.strategies.save_strategy("mine", "preset-roles-first", {"examples": "system"}, expected_version=1)
    return pid, book.id, preset.id


def selections(tavern: Tavern, pid: int) -> dict[str, object]:
    """What a step of `pid` would use, read from its dry run (the same assembly a step runs)."""
    shown = tavern.steps.preview(pid)
    with tavern.store.unit_of_work(write=False) as uow:
        books = uow.bindings.books_for("playthrough", pid)
        meta = json.loads(uow.playthroughs.get(pid).meta)
    return {"snapshot": shown["strategy_snapshot"], "preset": (shown["preset"] or {}).get("id"),
            "chat_books": books, "user": tavern.playthroughs.playthrough(pid).user_name,
            "persona_pin": meta.get("persona"),
            "world_books": [(b["name"], b["source"]) for b in shown["world_books"]]}


async def test_a_new_playthrough_from_a_message_inherits_and_never_touches_its_parent(
        tavern: Tavern, model: ScriptedModel, setup: tuple[int, int, int], corpus_dir: Path) -> None:
    pid, book, preset = setup
    model.enqueue("r1", "r2")
    await drain(tavern.steps.send(pid, "u1"))
    await drain(tavern.steps.send(pid, "u2"))
    parent = selections(tavern, pid)
    assert parent["snapshot"]["name"] == "mine" and parent["snapshot"]["version"] == 1
    assert parent["snapshot"]["options"] == {"examples": "omit", "after_history": "system"}
    r1 = next(m for m in tavern.playthroughs.messages(pid) if m.content == "r1")
    child = tavern.timeline.branch_playthrough(pid, r1.ref)
    assert selections(tavern, child.id) == parent
    assert (child.strategy, child.preset_id) == ("mine", preset)
    assert tavern.variables.variables(child.id).local == {"turns": 1}  # at r1, not the parent's 2
    with tavern.store.unit_of_work(write=False) as uow:
        parent_row = uow.playthroughs.get(pid)
    # The child's changes stay the child's.
    [other] = tavern.imports.import_paths([corpus_dir / "worldbooks" / "hogwarts_agnai_memory.json"])
    tavern.lore.bind_world_book(other.id, "playthrough", child.id)
    tavern.lore.unbind_world_book(book, "playthrough", child.id)
    tavern.strategies.apply_strategy(child.id, "compat")
    tavern.presets.bind_preset(child.id, None)
    model.enqueue("b1")
    await drain(tavern.steps.send(child.id, "other u2"))
    assert tavern.variables.variables(child.id).local == {"turns": 2}
    with tavern.store.unit_of_work(write=False) as uow:
        assert uow.playthroughs.get(pid) == parent_row
    assert selections(tavern, pid) == parent
    assert tavern.variables.variables(pid).local == {"turns": 2}
    assert [m.content for m in tavern.playthroughs.messages(pid)][-2:] == ["u2", "r2"]


async def test_a_swipe_fork_keeps_the_selections_and_the_variables_before_the_reply(
        tavern: Tavern, model: ScriptedModel, setup: tuple[int, int, int]) -> None:
    pid, _book, _preset = setup
    model.enqueue("r1", "r2", "r2 again")
    await drain(tavern.steps.send(pid, "u1"))
    before = selections(tavern, pid)
    await drain(tavern.steps.send(pid, "u2"))
    await drain(tavern.steps.regenerate(pid))
    assert tavern.playthroughs.messages(pid)[-1].content == "r2 again"
    assert selections(tavern, pid) == before
    # The swipe was built from the state before r2 (turn 2 again), and its own commit counts it.
    system = "\n".join(str(m.get("content", "")) for m in model.requests[-1].messages if m.get("role") == "system")
    assert "Turn 2 of the story." in system
    assert tavern.variables.variables(pid).local == {"turns": 2}


async def test_a_rollback_keeps_the_selections_and_goes_back_to_the_variables_at_that_message(
        tavern: Tavern, model: ScriptedModel, setup: tuple[int, int, int]) -> None:
    pid, _book, _preset = setup
    model.enqueue("r1", "r2", "r3")
    await drain(tavern.steps.send(pid, "u1"))
    await drain(tavern.steps.send(pid, "u2"))
    await drain(tavern.steps.send(pid, "u3"))
    before = selections(tavern, pid)
    assert tavern.variables.variables(pid).local == {"turns": 3}
    r1 = next(m for m in tavern.playthroughs.messages(pid) if m.content == "r1")
    tavern.timeline.rollback(pid, r1.ref)
    assert selections(tavern, pid) == before
    assert tavern.variables.variables(pid).local == {"turns": 1}
