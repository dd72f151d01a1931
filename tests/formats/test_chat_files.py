"""SillyTavern chat import/export through the service and the CLI (issue 4 §8, §9).

The fixture is written by SillyTavern's format rules (format-digest §d): a ≤1.12 header line,
then messages whose `mes` mirrors `swipes[swipe_id]`, with `swipe_info` per swipe.
"""

from __future__ import annotations

import io
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tavern_tui.cli import main
from tavern_tui.formats.chatlog import parse_chat_jsonl
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel
from tests.support.cli import run_cli

HEADER = {"user_name": "Ann", "character_name": "Mira", "create_date": "2024-7-12@01h31m37s",
          "chat_metadata": {"note_prompt": "", "timedWorldInfo": {"sticky": {}}}}


def _line(name: str, is_user: bool, swipes: list[str] | None, mes: str, swipe_id: int = 0, **extra: object) -> dict:
    line: dict = {"name": name, "is_user": is_user, "is_system": False, "send_date": "2024-07-12T01:31:37.000Z",
                  "mes": mes, "extra": {}}
    if swipes is not None:
        line.update(swipes=swipes, swipe_id=swipe_id,
                    swipe_info=[{"send_date": f"2024-07-12T01:3{i}:00.000Z", "gen_started": None,
                                 "gen_finished": None, "extra": {"model": f"m{i}"}} for i in range(len(swipes))])
        line["send_date"] = line["swipe_info"][swipe_id]["send_date"]
        line["extra"] = line["swipe_info"][swipe_id]["extra"]
    line.update(extra)
    return line


MESSAGES = [
    _line("Mira", False, ["Hello, Ann.", "Good evening.", "Oh, a visitor!"], "Oh, a visitor!", 2),
    _line("Ann", True, None, "Hi! Who are you?"),
    _line("Mira", False, ["I am Mira.", "They call me Mira.", "Mira, the keeper."], "They call me Mira.", 1,
          title="kept unknown field"),
    {"name": "SillyTavern System", "is_user": False, "is_system": True, "send_date": "2024-07-12T01:40:00.000Z",
     "mes": "Ann is now known as Ann.", "extra": {"type": "narrator"}},
    _line("Ann", True, None, "Nice to meet you."),
    _line("Mira", False, ["Likewise.", "The pleasure is mine."], "The pleasure is mine.", 1),
]


def write_chat(path: Path, messages: list[dict] = MESSAGES, header: dict = HEADER) -> Path:
    path.write_text("\n".join(json.dumps(o, ensure_ascii=False) for o in [header, *messages]) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def mira(tavern: Tavern, tmp_path: Path) -> int:
    card = tmp_path / "mira.json"
    card.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0",
                                "data": {"name": "Mira", "first_mes": "Hello, {{user}}.",
                                         "alternate_greetings": ["Good evening.", "Oh, a visitor!"]}}))
    [result] = tavern.imports.import_paths([card])
    assert result.ok
    return result.id


def test_import_makes_swipes_sibling_variants_with_the_saved_one_active(tavern: Tavern, mira: int,
                                                                        tmp_path: Path) -> None:
    [result] = tavern.imports.import_paths([write_chat(tmp_path / "Mira - 2024-7-12.jsonl")])
    assert result.ok and result.kind == "chat", result.error
    pid = result.id
    shown = tavern.playthroughs.messages(pid)
    assert [m.content for m in shown] == [
        "Oh, a visitor!", "Hi! Who are you?", "They call me Mira.", "Ann is now known as Ann.", "Nice to meet you.",
        "The pleasure is mine."]
    assert [m.origin for m in shown] == ["agent", "customer", "agent", "engine", "customer", "agent"]
    assert tavern.playthroughs.playthrough(pid).user_name == "Ann"
    assert tavern.timeline.swipe_state(pid).label == "2/2"
    tree = tavern.timeline.timeline(pid)
    third = next(v for v in tree.variants if v.preview == "They call me Mira.")
    assert third.position == (2, 3) and third.active
    assert [next(v.preview for v in tree.variants if v.ref == r) for r in tree.siblings[third.ref]] == [
        "I am Mira.", "They call me Mira.", "Mira, the keeper."]
    # The is_system line is shown but never sent.
    tavern.provider.enqueue("ok")  # type: ignore[union-attr]


async def test_hidden_lines_are_not_sent(tavern: Tavern, model: ScriptedModel, mira: int, tmp_path: Path) -> None:
    [result] = tavern.imports.import_paths([write_chat(tmp_path / "chat.jsonl")])
    model.enqueue("Shall we?")
    async for _ in tavern.steps.send(result.id, "Let's go."):
        pass
    contents = [m["content"] for m in model.requests[-1].messages]
    assert "Ann is now known as Ann." not in contents
    assert contents[-1] == "Let's go." and "The pleasure is mine." in contents


def test_round_trip_keeps_messages_swipes_and_chosen_swipe(tavern: Tavern, mira: int, tmp_path: Path) -> None:
    source = write_chat(tmp_path / "chat.jsonl")
    [result] = tavern.imports.import_paths([source])
    exported = tavern.chat_files.export_chat(result.id)
    again = parse_chat_jsonl(exported.encode("utf-8"), "exported.jsonl")
    original = parse_chat_jsonl(source.read_bytes(), "chat.jsonl")
    assert again.header == original.header
    assert [(m.name, m.is_user, m.is_system, m.swipes, m.swipe_id, m.mes) for m in again.messages] == [
        (m.name, m.is_user, m.is_system, m.swipes, m.swipe_id, m.mes) for m in original.messages]
    assert [m.swipe_info for m in again.messages] == [m.swipe_info for m in original.messages]
    assert again.messages[2].raw.get("title") == "kept unknown field"
    assert [m.extra for m in again.messages] == [m.extra for m in original.messages]
    # And the export imports again to the same surface.
    (tmp_path / "second.jsonl").write_text(exported, encoding="utf-8")
    [second] = tavern.imports.import_paths([tmp_path / "second.jsonl"])
    assert ([m.content for m in tavern.playthroughs.messages(second.id)]
            == [m.content for m in tavern.playthroughs.messages(result.id)])


async def test_export_of_a_played_chat_lists_swipes_and_greetings(
        tavern: Tavern, model: ScriptedModel, mira: int) -> None:
    pid = tavern.playthroughs.new_playthrough(mira, user_name="Ann").id
    tavern.timeline.swipe(pid, +1)  # greeting 2 of 3
    model.enqueue("one", "two")
    async for _ in tavern.steps.send(pid, "hi"):
        pass
    async for _ in tavern.steps.regenerate(pid):
        pass
    tavern.timeline.swipe(pid, -1)
    chat = parse_chat_jsonl(tavern.chat_files.export_chat(pid).encode("utf-8"), "out.jsonl")
    assert chat.character_name == "Mira" and chat.user_name == "Ann"
    greeting, person, reply = chat.messages
    assert (greeting.swipes, greeting.swipe_id) == (["Hello, Ann.", "Good evening.", "Oh, a visitor!"], 1)
    assert (person.is_user, person.mes, person.swipes) == (True, "hi", ["hi"])
    assert (reply.swipes, reply.swipe_id, reply.mes) == (["one", "two"], 0, "one")


def test_malformed_lines_and_unknown_characters_are_named_and_store_nothing(tavern: Tavern, mira: int,
                                                                            tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(HEADER) + "\n" + json.dumps(MESSAGES[0]) + "\n{\"name\": \"Ann\", \"mes\": \n")
    [result] = tavern.imports.import_paths([bad])
    assert not result.ok and "bad.jsonl" in result.error and "line 3" in result.error
    stranger = write_chat(tmp_path / "stranger.jsonl", header={**HEADER, "character_name": "Nobody"})
    [result] = tavern.imports.import_paths([stranger])
    assert not result.ok and "Nobody" in result.error
    assert tavern.playthroughs.playthroughs() == []
    # --character picks the card when the file names another.
    [result] = tavern.imports.import_paths([stranger], character="Mira")
    assert result.ok


def test_out_of_range_swipe_id_is_clamped_with_a_warning(tavern: Tavern, mira: int, tmp_path: Path) -> None:
    line = _line("Mira", False, ["a", "b"], "b", 1)
    line["swipe_id"] = 7
    [result] = tavern.imports.import_paths([write_chat(tmp_path / "c.jsonl", [line])])
    assert result.ok and any("line 2" in w and "swipe_id 7" in w for w in result.warnings)
    assert [m.content for m in tavern.playthroughs.messages(result.id)] == ["b"]


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"TAVERN_HOME": str(home), "PATH": "/usr/bin:/bin"}
    return run_cli(args, env)


def test_cli_imports_swipes_shows_the_tree_and_exports(tmp_path: Path) -> None:
    home = tmp_path / "home"
    card = tmp_path / "mira.json"
    card.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0",
                                "data": {"name": "Mira", "first_mes": "Hello."}}))
    assert _cli("import", str(card), home=home).returncode == 0
    chat = write_chat(tmp_path / "chat.jsonl")
    done = _cli("import", str(chat), "--character", "Mira", "--json", home=home)
    assert done.returncode == 0, done.stderr
    pid = json.loads(done.stdout)[0]["id"]
    # A swipe with the offline demo model: a new sibling of the last reply.
    swiped = _cli("chat", "Mira", "--swipe", "--playthrough", str(pid), "--json", home=home)
    assert swiped.returncode == 0, swiped.stderr
    assert json.loads(swiped.stdout.strip().splitlines()[-1])["swipe"] == "3/3"
    tree = json.loads(_cli("tree", str(pid), "--json", home=home).stdout)
    last = [v for v in tree["variants"] if v["active"]][-1]
    assert (last["sibling"], last["siblings"], last["role"]) == (3, 3, "assistant")
    assert [list(r) for r in tree["path"]][-1] == [last["session_id"], last["seq"]]
    out = tmp_path / "out.jsonl"
    assert _cli("export", str(pid), "--jsonl", str(out), home=home).returncode == 0
    exported = parse_chat_jsonl(out.read_bytes(), "out.jsonl")
    assert exported.messages[-1].swipes[:2] == ["Likewise.", "The pleasure is mine."]
    assert exported.messages[-1].swipe_id == 2
    text = _cli("tree", str(pid), home=home).stdout
    assert "They call me Mira." in text and "2/3" in text
    # Edit and delete by the ref the tree prints; the tree still lists the original.
    third = next(v for v in tree["variants"] if v["preview"] == "They call me Mira.")
    ref = f"{third['session_id']}:{third['seq']}"
    assert _cli("edit", str(pid), ref, "--text", "Call me Mira.", home=home).returncode == 0
    shown = json.loads(_cli("show", str(pid), "--json", home=home).stdout)["messages"]
    assert [m["content"] for m in shown][2] == "Call me Mira." and shown[2]["origin"] == "operator"
    done = _cli("delete", str(pid), ref, "--to-end", home=home)
    assert done.returncode == 0 and "hid 4 messages" in done.stdout  # the edit, the hidden line, the last two
    assert [m["content"] for m in json.loads(_cli("show", str(pid), "--json", home=home).stdout)["messages"]] == [
        "Oh, a visitor!", "Hi! Who are you?"]
    bad = _cli("edit", str(pid), "nope", "--text", "x", home=home)
    assert bad.returncode == 2 and "SESSION:SEQ" in bad.stderr
    # The chat now ends with the person's line: --reply answers it without saying more.
    answered = _cli("chat", "Mira", "--reply", "--playthrough", str(pid), home=home)
    assert answered.returncode == 0, answered.stderr
    shown = json.loads(_cli("show", str(pid), "--json", home=home).stdout)["messages"]
    assert [m["role"] for m in shown] == ["assistant", "user", "assistant"]
    assert shown[1]["content"] == "Hi! Who are you?"
    again = _cli("chat", "Mira", "--reply", "--playthrough", str(pid), home=home)
    assert again.returncode != 0 and "does not end with your message" in again.stderr


def test_the_same_chat_file_imports_once(tavern: Tavern, mira: int, tmp_path: Path) -> None:
    source = write_chat(tmp_path / "chat.jsonl")
    [first] = tavern.imports.import_paths([source])
    [again] = tavern.imports.import_paths([source])
    assert again.duplicate and again.id == first.id and len(tavern.playthroughs.playthroughs()) == 1
    # Lists count what the chat shows, the hidden is_system line included.
    assert tavern.playthroughs.playthrough(first.id).message_count == len(tavern.playthroughs.messages(first.id)) == 6


def test_an_imported_chat_was_last_played_when_its_newest_message_was_sent(tavern: Tavern, mira: int,
                                                                           tmp_path: Path) -> None:
    # SillyTavern lists chats by their last message's date; an old chat imported today is not
    # "played today". The newest send_date in MESSAGES is the system line's, 2024-07-12 01:40 UTC.
    [result] = tavern.imports.import_paths([write_chat(tmp_path / "chat.jsonl")])
    assert tavern.playthroughs.playthrough(result.id).updated_at == datetime(2024, 7, 12, 1, 40, tzinfo=UTC)
    # a chat without readable dates was last played when it was imported
    undated = [{k: v for k, v in m.items() if k not in ("send_date", "swipe_info")} for m in MESSAGES]
    before = datetime.now(UTC)
    [plain] = tavern.imports.import_paths([write_chat(tmp_path / "undated.jsonl", undated)])
    assert tavern.playthroughs.playthrough(plain.id).updated_at >= before
    assert [p.id for p in tavern.playthroughs.playthroughs()] == [plain.id, result.id]  # the newest first


async def test_the_trace_marks_the_imported_lines_it_sent_and_only_those(tavern: Tavern, model: ScriptedModel,
                                                                         mira: int, tmp_path: Path) -> None:
    [result] = tavern.imports.import_paths([write_chat(tmp_path / "chat.jsonl")])
    model.enqueue("Shall we?")
    async for _ in tavern.steps.send(result.id, "Let's go."):
        pass
    [trace] = tavern.traces.traces(result.id)
    shown = tavern.traces.trace(trace.id)
    sent = shown["record"]["messages"]
    marked = [sent[i] for i in shown["imported"]]
    # The five visible lines of the file (the system line is hidden), never the input just typed.
    assert [m["source"] for m in marked] == ["history"] * 5
    assert sent[-1]["source"] == "input" and len(sent) - 1 not in shown["imported"]
    out = io.StringIO()
    assert main(["--db", tavern.settings.db_url, "trace", "show", trace.id], out=out, err=io.StringIO()) == 0
    assert out.getvalue().count("(imported)") == 5
