"""Chats (issue 24 item 4): a SillyTavern chat exported back writes `swipe_info` only where the
original line had it and never copies a message's own `extra` into a swipe's `swipe_info.extra`
(the exported lines equal the original lines); one swipe of a message can be deleted leaving the
others (SillyTavern's "delete swipe"); a chat can start with the model speaking first, and
swiping a model-first message works.

The lines are written by SillyTavern's chat format (format-digest §d; `public/global.d.ts`
ChatMessage): older files carry `swipes` without `swipe_info`, newer ones one `swipe_info` per
swipe whose `extra` is that swipe's own (it may differ from the message's `extra`)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tavern_tui.cli import main
from tavern_tui.errors import TavernError
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

HEADER = {"user_name": "Ann", "character_name": "Mira", "create_date": "2024-7-12@01h31m37s", "chat_metadata": {}}
LINES = [
    # ≤1.10: swipes but no swipe_info.
    {"name": "Mira", "is_user": False, "is_system": False, "send_date": "July 12, 2024 1:31am",
     "mes": "Oh, a visitor!", "extra": {}, "swipe_id": 1, "swipes": ["Hello, Ann.", "Oh, a visitor!"]},
    {"name": "Ann", "is_user": True, "is_system": False, "send_date": "July 12, 2024 1:32am",
     "mes": "Hi! Who are you?", "extra": {"isSmallSys": False}},
    # Newer: the message's extra (the shown swipe's model and token count) differs from the
    # swipe_info entry of the shown swipe, whose extra was written before the reply was counted.
    {"name": "Mira", "is_user": False, "is_system": False, "send_date": "2024-07-12T01:33:00.000Z",
     "gen_started": "2024-07-12T01:32:59.000Z", "gen_finished": "2024-07-12T01:33:00.000Z",
     "mes": "They call me Mira.", "extra": {"api": "openai", "model": "gpt-4o", "token_count": 7},
     "swipe_id": 1, "swipes": ["I am Mira.", "They call me Mira."],
     "swipe_info": [{"send_date": "2024-07-12T01:32:30.000Z", "gen_started": "2024-07-12T01:32:29.000Z",
                     "gen_finished": "2024-07-12T01:32:30.000Z", "extra": {"api": "openai", "model": "gpt-4o-mini"}},
                    {"send_date": "2024-07-12T01:33:00.000Z", "gen_started": "2024-07-12T01:32:59.000Z",
                     "gen_finished": "2024-07-12T01:33:00.000Z", "extra": {}}]},
    # A single reply without swipes at all.
    {"name": "Mira", "is_user": False, "is_system": False, "send_date": "2024-07-12T01:34:00.000Z",
     "mes": "Welcome.", "extra": {"api": "openai"}},
]


@pytest.fixture
def mira(tavern: Tavern, tmp_path: Path) -> int:
    card = tmp_path / "mira.json"
    card.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0",
                                "data": {"name": "Mira", "first_mes": "Hello, {{user}}.",
                                         "alternate_greetings": ["Oh, a visitor!"]}}))
    [result] = tavern.imports.import_paths([card])
    return result.id


def import_lines(tavern: Tavern, tmp_path: Path, lines: list[dict]) -> int:
    path = tmp_path / "Mira - chat.jsonl"
    path.write_text("\n".join(json.dumps(o) for o in [HEADER, *lines]) + "\n", encoding="utf-8")
    [result] = tavern.imports.import_paths([path])
    assert result.ok, result.error
    return result.id


def test_export_writes_back_the_original_lines(tavern: Tavern, mira: int, tmp_path: Path) -> None:
    pid = import_lines(tavern, tmp_path, LINES)
    exported = [json.loads(line) for line in tavern.chat_files.export_chat(pid).splitlines()]
    assert exported[0] == HEADER
    for original, written in zip(LINES, exported[1:], strict=True):
        assert written == original
    assert "swipe_info" not in exported[1]  # none added where the original had none
    assert exported[3]["swipe_info"][1]["extra"] == {}  # the message's own extra not copied in


async def test_deleting_one_swipe_keeps_the_others(tavern: Tavern, model: ScriptedModel, mira: int,
                                                   tmp_path: Path) -> None:
    pid = import_lines(tavern, tmp_path, LINES[:3])  # ends with the two-swipe reply
    model.enqueue("Mira, keeper of the lamp.")
    async for _ in tavern.steps.regenerate(pid):
        pass
    assert tavern.timeline.swipe_state(pid).label == "3/3"
    assert tavern.playthroughs.messages(pid)[-1].content == "Mira, keeper of the lamp."
    # Delete the shown swipe: SillyTavern then shows the one before it (deleteSwipe: swipe_id - 1).
    tavern.timeline.delete_swipe(pid)
    assert tavern.timeline.swipe_state(pid).label == "2/2"
    assert tavern.playthroughs.messages(pid)[-1].content == "They call me Mira."
    lines = [json.loads(line) for line in tavern.chat_files.export_chat(pid).splitlines()]
    assert lines[3]["swipes"] == ["I am Mira.", "They call me Mira."] and lines[3]["swipe_id"] == 1
    # Down to one: the last swipe of a message cannot be deleted that way (delete the message).
    tavern.timeline.delete_swipe(pid)
    assert tavern.timeline.swipe_state(pid).label == "1/1"
    assert tavern.playthroughs.messages(pid)[-1].content == "I am Mira."
    with pytest.raises(TavernError, match="only swipe"):
        tavern.timeline.delete_swipe(pid)


async def test_delete_swipe_from_the_cli(tavern: Tavern, model: ScriptedModel, mira: int, tmp_path: Path,
                                         db_url: str) -> None:
    pid = import_lines(tavern, tmp_path, LINES[:3])
    out, err = io.StringIO(), io.StringIO()
    assert main(["--db", db_url, "delete-swipe", str(pid)], out, err) == 0, err.getvalue()
    assert "1/1" in out.getvalue()
    assert tavern.playthroughs.messages(pid)[-1].content == "I am Mira."


async def test_the_model_can_speak_first_and_be_swiped(tavern: Tavern, model: ScriptedModel, tmp_path: Path) -> None:
    card = tmp_path / "quiet.json"
    card.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0",
                                "data": {"name": "Quiet", "first_mes": ""}}))
    [result] = tavern.imports.import_paths([card])
    pid = tavern.playthroughs.new_playthrough(result.id, user_name="Ann").id
    assert tavern.playthroughs.messages(pid) == []  # an empty chat
    model.enqueue("*Quiet looks up.* You're late.")
    async for _ in tavern.steps.generate(pid):
        pass
    shown = tavern.playthroughs.messages(pid)
    assert [(m.role, m.content) for m in shown] == [("assistant", "*Quiet looks up.* You're late.")]
    request = model.requests[-1].messages
    assert request[-1]["role"] != "assistant"  # nothing fabricated as the model's own turn
    model.enqueue("*Quiet sighs.* Finally.")
    async for _ in tavern.steps.regenerate(pid):
        pass
    assert tavern.timeline.swipe_state(pid).label == "2/2"
    assert [m.content for m in tavern.playthroughs.messages(pid)] == ["*Quiet sighs.* Finally."]


async def test_the_model_can_speak_after_the_greeting(tavern: Tavern, model: ScriptedModel, mira: int) -> None:
    pid = tavern.playthroughs.new_playthrough(mira, user_name="Ann").id
    model.enqueue("*Mira sets down the lamp.* Well?")
    async for _ in tavern.steps.generate(pid):
        pass
    assert [m.content for m in tavern.playthroughs.messages(pid)] == ["Hello, Ann.", "*Mira sets down the lamp.* Well?"]


def test_chat_generate_from_the_cli_speaks_first(tmp_path: Path, db_url: str) -> None:
    card = tmp_path / "quiet.json"
    card.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0",
                                "data": {"name": "Quiet", "first_mes": ""}}))
    assert main(["--db", db_url, "import", str(card)], io.StringIO(), io.StringIO()) == 0
    out, err = io.StringIO(), io.StringIO()
    assert main(["--db", db_url, "chat", "Quiet", "--generate"], out, err) == 0, err.getvalue()
    assert out.getvalue().strip()  # the (offline demo) model's words, with no turn of the person before them
    shown = io.StringIO()
    assert main(["--db", db_url, "show", "1", "--json"], shown, io.StringIO()) == 0
    assert [m["role"] for m in json.loads(shown.getvalue())["messages"]] == ["assistant"]
