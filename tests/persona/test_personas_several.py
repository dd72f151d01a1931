"""Several personas (issue 20 item 6): two persona documents, the default, a chat locked to
one (SillyTavern `public/scripts/personas.js` `loadPersonaForCurrentChat`: the chat's lock
first, then the default persona), a rename that relabels no old line (SillyTavern keeps each
message's `name`), a persona backup of three (`onPersonasRestoreInput` takes every key of
`personas` / `persona_descriptions`, skipping keys it has), `tavern new --persona`, and
nominations kept per persona."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tavern_tui.cli import main
from tavern_tui.errors import Ambiguous, NotFound
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

# The corpus's Seraphina card (FACTS.md: name "Seraphina"); the corpus has no chat log, so the
# imported chat is written here in SillyTavern's ≤1.12 JSONL shape (format-digest §d).
SERAPHINA = "cards/seraphina_chara_ccv3.png"


def cli(db_url: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(["--db", db_url, *args], out, err), out.getvalue(), err.getvalue()


@pytest.fixture
def seraphina(tavern: Tavern, corpus_dir: Path) -> int:
    [result] = tavern.imports.import_paths([corpus_dir / SERAPHINA])
    assert result.ok, result.error
    return result.id


async def say(tavern: Tavern, pid: int, text: str) -> None:
    async for _ in tavern.steps.send(pid, text):
        pass


def system_of(tavern: Tavern, pid: int) -> str:
    return tavern.steps.preview(pid, "Hi.")["messages"][0]["content"]


def test_two_personas_and_a_chat_locked_to_one(tavern: Tavern, seraphina: int) -> None:
    ann = tavern.persona.new_persona("Ann")
    bo = tavern.persona.new_persona("Bo")
    tavern.persona.edit_persona(ann.version, add="{{user}} is a cartographer.", persona=ann.id)
    tavern.persona.edit_persona(bo.version, add="{{user}} bakes bread.", persona=bo.id)
    tavern.persona.use_persona("Ann")
    free = tavern.playthroughs.new_playthrough(seraphina).id
    locked = tavern.playthroughs.new_playthrough(seraphina).id
    tavern.persona.use_persona("Bo", locked)
    assert "Ann is a cartographer." in system_of(tavern, free) and "bakes" not in system_of(tavern, free)
    assert "Bo bakes bread." in system_of(tavern, locked) and "cartographer" not in system_of(tavern, locked)
    assert (tavern.playthroughs.playthrough(free).user_name, tavern.playthroughs.playthrough(locked).user_name) \
        == ("Ann", "Bo")
    # A new default: the unlocked chat follows it, the locked one keeps its persona.
    tavern.persona.use_persona(str(bo.id))
    assert tavern.playthroughs.playthrough(free).user_name == "Bo"
    tavern.persona.use_persona("Ann", locked)
    tavern.persona.use_persona("Bo")
    assert tavern.playthroughs.playthrough(locked).user_name == "Ann" and tavern.persona.is_locked(locked)
    tavern.persona.unlock_persona(locked)
    assert tavern.playthroughs.playthrough(locked).user_name == "Bo" and not tavern.persona.is_locked(locked)
    assert [(v.name, v.default) for v in tavern.persona.personas()] == [("", False), ("Ann", False), ("Bo", True)]


async def test_a_switch_is_one_rotation_recorded_with_the_step(tavern: Tavern, seraphina: int) -> None:
    ann, bo = tavern.persona.new_persona("Ann"), tavern.persona.new_persona("Bo")
    tavern.persona.use_persona("Ann")
    pid = tavern.playthroughs.new_playthrough(seraphina).id
    await say(tavern, pid, "Hello.")
    tavern.persona.use_persona("Bo", pid)
    await say(tavern, pid, "Again.")
    first, second = [tavern.traces.trace(t.id)["persona"] for t in tavern.traces.traces(pid)]
    assert (first["persona"], first.get("rotation")) == (ann.id, None)
    assert second["persona"] == bo.id and second["rotation"]["from_persona"] == ann.id
    assert second["rotation"]["reason"] == "persona_changed"


async def test_a_rename_changes_no_old_line(tavern: Tavern, seraphina: int, tmp_path: Path) -> None:
    ann = tavern.persona.new_persona("Ann")
    tavern.persona.use_persona("Ann")
    pid = tavern.playthroughs.new_playthrough(seraphina).id
    await say(tavern, pid, "I am Ann.")
    tavern.persona.rename_persona("Ann", "Annika")
    await say(tavern, pid, "Now Annika.")
    users = [(m.speaker, m.content) for m in tavern.playthroughs.messages(pid) if m.role == "user"]
    assert users == [("Ann", "I am Ann."), ("Annika", "Now Annika.")]
    assert tavern.persona.find_persona(ann.id).name == "Annika"
    # Search and the tree name each line as the chat does (a trial saw the new name there).
    found = {(r.speaker, r.snippet) for r in tavern.chats.search("Ann") + tavern.chats.search("Annika")
             if r.role == "user"}
    assert found == {("Ann", "I am Ann."), ("Annika", "Now Annika.")}
    tree = {v.preview: v.speaker for v in tavern.timeline.timeline(pid).variants if v.role == "user"}
    assert tree == {"I am Ann.": "Ann", "Now Annika.": "Annika"}
    # An imported chat keeps the names its lines were written under (SillyTavern's `name`).
    header = {"user_name": "Rowan", "character_name": "Seraphina", "create_date": "2024-01-01@10h00m00s",
              "chat_metadata": {}}
    lines = [header, {"name": "Seraphina", "is_user": False, "is_system": False, "mes": "Welcome, traveller."},
             {"name": "Rowan", "is_user": True, "is_system": False, "mes": "Where am I?"}]
    path = tmp_path / "Seraphina - 2024-01-01.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    [imported] = tavern.imports.import_paths([path])
    assert imported.ok, imported.error
    tavern.persona.rename_persona("Annika", "Ann Again")
    assert [m.speaker for m in tavern.playthroughs.messages(imported.id) if m.role == "user"] == ["Rowan"]
    exported = [json.loads(x) for x in tavern.chat_files.export_chat(imported.id).splitlines() if x.strip()]
    assert [x["name"] for x in exported[1:] if x.get("is_user")] == ["Rowan"]
    # The request for an old line sends what it sent before (no `name` added to a line typed here).
    sent = tavern.steps.preview(pid, "x")["messages"]
    [old] = [m for m in sent if m["content"] == "I am Ann."]
    assert old["role"] == "user" and "name" not in old


def test_a_backup_of_three_imports_every_persona(tavern: Tavern, tmp_path: Path) -> None:
    backup = {"personas": {"1700000000000-Ann.png": "Ann", "1700000000001-Bo.png": "Bo", "user-default.png": "Cy"},
              "persona_descriptions": {
                  "1700000000000-Ann.png": {"description": "{{user}} maps coasts.", "position": 0, "depth": 2,
                                            "role": 0},
                  "1700000000001-Bo.png": {"description": "{{user}} bakes bread.", "position": 0},
                  "user-default.png": {"description": "", "position": 0}},
              "default_persona": "1700000000001-Bo.png"}
    path = tmp_path / "personas_20261203.json"
    path.write_text(json.dumps(backup), encoding="utf-8")
    [result] = tavern.imports.import_paths([path])
    assert result.ok and result.name == "Ann, Bo, Cy", result.error
    views = tavern.persona.personas()
    assert [(v.name, v.default, v.st_key) for v in views] == [
        ("Ann", False, "1700000000000-Ann.png"), ("Bo", True, "1700000000001-Bo.png"),
        ("Cy", False, "user-default.png")]
    assert [e.text for e in tavern.persona.persona(views[1].id).entries] == ["{{user}} bakes bread."]
    assert tavern.persona.persona(views[2].id).entries == ()
    # Restoring it again adds nothing: every key is there already (SillyTavern skips them too).
    [again] = tavern.imports.import_paths([path])
    assert again.ok and again.duplicate and len(tavern.persona.personas()) == 3
    assert sum("imported before" in w for w in again.warnings) == 3


async def test_nominations_go_to_the_persona_the_lines_were_written_under(tavern: Tavern, seraphina: int) -> None:
    ann, bo = tavern.persona.new_persona("Ann"), tavern.persona.new_persona("Bo")
    pid = tavern.playthroughs.new_playthrough(seraphina).id
    tavern.persona.use_persona("Bo", pid)
    for text in ("I love kites.", "I really love kites."):
        await say(tavern, pid, text)
    tavern.persona.use_persona("Ann", pid)  # later lines are Ann's; the kite lines stay Bo's
    await say(tavern, pid, "Hello there.")
    tavern.persona.consolidate(pid)
    [nomination] = tavern.persona.nominations()
    assert tavern.persona.belief_persona(nomination).id == bo.id
    assert tavern.persona.nominations(ann.id) == [] and tavern.persona.nominations(bo.id) == [nomination]
    doc = tavern.persona.affirm(nomination.id)
    assert doc.principal == bo.principal and any("kites" in e.text for e in doc.entries)
    assert not any("kites" in e.text for e in tavern.persona.persona(ann.id).entries)


def test_cli_persona_list_new_use_rename(tavern: Tavern, seraphina: int, db_url: str) -> None:
    assert cli(db_url, "persona", "new", "Ann")[0] == 0
    assert cli(db_url, "persona", "new", "Bo")[0] == 0
    pid = tavern.playthroughs.new_playthrough(seraphina).id
    code, out, err = cli(db_url, "persona", "use", "Bo", "--playthrough", str(pid))
    assert code == 0 and f"playthrough {pid} is locked to Bo" in out, err
    code, out, _ = cli(db_url, "persona", "use", "ann")
    assert code == 0 and "Ann is the default persona" in out
    code, out, _ = cli(db_url, "persona", "rename", "Bo", "Bea")
    assert code == 0 and "now Bea" in out
    listed = json.loads(cli(db_url, "persona", "list", "--json")[1])
    assert [(p["name"], p["default"]) for p in listed] == [("", False), ("Ann", True), ("Bea", False)]
    assert tavern.playthroughs.playthrough(pid).user_name == "Bea"
    code, _, err = cli(db_url, "persona", "use", "Nobody")
    assert code != 0 and "no persona named 'Nobody'" in err and "Ann" in err
    # Two personas may share a name; a name that matches both is refused, --id picks one.
    assert cli(db_url, "persona", "new", "Ann")[0] == 0
    code, _, err = cli(db_url, "persona", "use", "Ann")
    assert code != 0 and "2 personas are named 'Ann'" in err and "--id" in err
    second = max(p.id for p in tavern.persona.personas())
    assert cli(db_url, "persona", "use", "--id", str(second))[0] == 0
    assert tavern.persona.find_persona(None).id == second
    with pytest.raises(Ambiguous):
        tavern.persona.find_persona("ann")


def test_new_with_persona_picks_the_document_and_locks_at_the_first_send(tavern: Tavern, seraphina: int,
                                                                          model: ScriptedModel) -> None:
    bo = tavern.persona.new_persona("Bo")
    tavern.persona.edit_persona(bo.version, add="{{user}} bakes bread.", persona=bo.id)
    draft = tavern.openings.new_draft(seraphina, persona="Bo")
    assert draft.user_name == "Bo"
    assert "Bo bakes bread." in tavern.steps.preview_draft(draft.id, "Hi.")["messages"][0]["content"]
    view = tavern.openings.begin(draft.id, "Hi.")
    assert tavern.persona.is_locked(view.id) and tavern.persona.playthrough_persona(view.id).id == bo.id
    with pytest.raises(NotFound, match="no persona named 'Nobody'"):
        tavern.openings.new_draft(seraphina, persona="Nobody")
