"""Edges a new user hit (import kinds, persona files, selections that must change nothing when
they fail): each case names the file and reason, and nothing is half-stored."""

from __future__ import annotations

import io
import json
from pathlib import Path

from tavern_tui.cli import main
from tavern_tui.service import Tavern

CARD = {"spec": "chara_card_v2", "spec_version": "2.0",
        "data": {"name": "Mira", "first_mes": "Hello.", "description": "Mira keeps the lighthouse."}}


def run(db_url: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(["--db", db_url, *args], out, err), out.getvalue(), err.getvalue()


def test_an_unknown_json_object_is_named_as_such(tavern: Tavern, tmp_path: Path) -> None:
    (tmp_path / "obj.json").write_text(json.dumps({"foo": 1}))
    [result] = tavern.imports.import_paths([tmp_path / "obj.json"])
    assert not result.ok and "obj.json: not a file tavern-tui knows" in result.error
    (tmp_path / "personas.json").write_text(json.dumps({"personas": {}}))
    [result] = tavern.imports.import_paths([tmp_path / "personas.json"])
    assert result.kind == "persona" and "the backup holds no persona" in result.error


def test_a_folder_import_reports_its_chat_files_too(tavern: Tavern, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "broken.jsonl").write_text("not json\n")
    (folder / "mira.json").write_text(json.dumps(CARD))
    results = tavern.imports.import_paths([folder])
    assert [Path(r.path).name for r in results] == ["broken.jsonl", "mira.json"]
    assert not results[0].ok and "line 1" in results[0].error and results[1].ok


def test_a_character_card_is_not_a_persona(tavern: Tavern, tmp_path: Path) -> None:
    result = tavern.persona.import_persona_bytes(json.dumps(CARD).encode(), "mira.json")
    assert not result.ok and "character card" in result.error
    v1 = {"name": "Mira", "description": "A keeper.", "first_mes": "Hi."}
    result = tavern.persona.import_persona_bytes(json.dumps(v1).encode(), "v1.json")
    assert not result.ok and "character card (first_mes)" in result.error
    assert tavern.persona.persona().version == 0


def test_the_same_persona_imported_twice_writes_one_version(tavern: Tavern, tmp_path: Path) -> None:
    backup = {"personas": {"a.png": "Robin"}, "persona_descriptions": {"a.png": {"description": "Robin sails."}}}
    data = json.dumps(backup).encode()
    first = tavern.persona.import_persona_bytes(data, "p.json")
    again = tavern.persona.import_persona_bytes(data, "p.json")
    assert first.ok and again.ok and again.duplicate and again.id == first.id == 1
    assert len(tavern.persona.persona_history()) == 1


def test_persona_lore_follows_the_imported_persona_and_binds_from_the_cli(tavern: Tavern, tmp_path: Path,
                                                                        db_url: str) -> None:
    for name in ("Harbor", "Forest"):
        (tmp_path / f"{name}.json").write_text(json.dumps({"entries": {"0": {"uid": 0, "key": [name.lower()],
                                                                             "content": f"The {name}."}}}))
    harbor, forest = tavern.imports.import_paths([tmp_path / "Harbor.json", tmp_path / "Forest.json"])
    for who, book in (("ann.png", "Harbor"), ("bo.png", "Forest")):
        backup = {"personas": {who: who[:-4]}, "persona_descriptions": {who: {"description": f"{who} x",
                                                                               "lorebook": book}}}
        assert tavern.persona.import_persona_bytes(json.dumps(backup).encode(), "p.json").ok
    # Two backups, two personas (issue 20 item 6): ann filled the empty first persona, bo is a new one.
    ann, bo = tavern.persona.find_persona("ann"), tavern.persona.find_persona("bo")
    assert {b.name for b in tavern.lore.world_books() if f"persona:{ann.id}" in b.bindings} == {"Harbor"}
    assert {b.name for b in tavern.lore.world_books() if f"persona:{bo.id}" in b.bindings} == {"Forest"}
    assert tavern.persona.persona(bo.id).lorebook == "Forest"
    code, out, _ = run(db_url, "lore", "unbind", "Forest", "--persona", "bo")
    assert code == 0
    code, out, _ = run(db_url, "lore", "bind", "Harbor", "--persona", "bo")  # one book a persona, as SillyTavern
    assert code == 0
    assert {b.name for b in tavern.lore.world_books() if f"persona:{bo.id}" in b.bindings} == {"Harbor"}


def test_chat_with_an_unknown_preset_creates_nothing(tavern: Tavern, tmp_path: Path, db_url: str) -> None:
    (tmp_path / "mira.json").write_text(json.dumps(CARD))
    tavern.imports.import_paths([tmp_path / "mira.json"])
    code, _, err = run(db_url, "chat", "Mira", "--new", "--say", "hi", "--preset", "Nope")
    assert code == 1 and "Nope" in err and "started playthrough" not in err
    code, _, err = run(db_url, "chat", "Mira", "--new", "--say", "hi", "--strategy", "nonsense")
    assert code == 1 and "unknown strategy 'nonsense'" in err
    assert tavern.playthroughs.playthroughs() == []


def test_preview_with_selection_flags_binds_nothing(tavern: Tavern, tmp_path: Path, db_url: str,
                                                    corpus_dir: Path) -> None:
    # Issue 20 item 3: preview is read-only; binding is `strategy apply`, `lore bind`, the panes.
    (tmp_path / "mira.json").write_text(json.dumps(CARD))
    [card] = tavern.imports.import_paths([tmp_path / "mira.json"])
    book, preset = tavern.imports.import_paths([corpus_dir / "worldbooks" / "eldoria_st_staging.json",
                                               corpus_dir / "presets" / "st_openai_default_staging.json"])
    pid = tavern.playthroughs.new_playthrough(card.id).id
    with tavern.store.unit_of_work(write=False) as uow:
        row_before = uow.playthroughs.get(pid)
    events_before = tavern.store.events.version()
    code, out, err = run(db_url, "preview", str(pid), "--strategy", "projection", "--preset", str(preset.id),
                         "--lore", str(book.id), "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["strategy"] == "projection" and shown["preset"]["id"] == preset.id
    assert [(b["name"], b["source"]) for b in shown["world_books"]][0] == (book.name, "chat")
    assert "remembered" not in err
    with tavern.store.unit_of_work(write=False) as uow:
        assert uow.playthroughs.get(pid) == row_before
        assert uow.bindings.books_for("playthrough", pid) == []
    assert tavern.store.events.version() == events_before


def test_a_world_book_with_a_broken_regex_key_imports_with_a_warning_naming_entry_and_field(
        tavern: Tavern, tmp_path: Path, db_url: str) -> None:
    # SillyTavern's parseRegexFromString returns null for "/([a-z/" (the RegExp throws), and
    # the key is then matched as plain text: the import keeps it, and says so.
    book = {"entries": {"0": {"uid": 7, "comment": "Caves", "key": ["cave", "/([a-z/"], "content": "Dark caves."},
                        "1": {"uid": 8, "key": ["bats"], "keysecondary": ["/x{2,1}/"], "content": "Bats."}}}
    (tmp_path / "caves.json").write_text(json.dumps(book))
    [result] = tavern.imports.import_paths([tmp_path / "caves.json"])
    assert result.ok and len(result.warnings) == 2
    first, second = result.warnings
    assert first.startswith("entry 7 (Caves) key[1] '/([a-z/': not a valid regex (")
    assert first.endswith("matched as plain text, as SillyTavern does")
    assert second.startswith("entry 8 keysecondary[0] '/x{2,1}/': not a valid regex (")
    # The tester's reason for a miss names the broken key too.
    code, out, _ = run(db_url, "lore", "test", str(tmp_path / "caves.json"), "--input", "a dark place", "--json")
    assert code == 0
    decision = next(d for d in json.loads(out) if d["uid"] == 7)
    assert not decision["fired"] and "'/([a-z/' is not a valid regex" in decision["detail"]
    # …and a plain-text occurrence of the broken key still fires it, as in SillyTavern.
    code, out, _ = run(db_url, "lore", "test", str(tmp_path / "caves.json"), "--input", "see /([a-z/ here", "--json")
    decision = next(d for d in json.loads(out) if d["uid"] == 7)
    assert decision["fired"] and decision["matched_key"] == "/([a-z/"


def test_an_unknown_name_suggests_the_stored_ones(tavern: Tavern, corpus_dir: Path, db_url: str) -> None:
    # A SillyTavern book is named after its file: "Eldoria" finds eldoria_st_staging.
    tavern.imports.import_paths([corpus_dir / "worldbooks" / "eldoria_st_staging.json",
                         corpus_dir / "cards" / "seraphina_chara_ccv3.png"])
    code, _, err = run(db_url, "lore", "bind", "Eldoria", "--global")
    assert code != 0 and "no world book named 'Eldoria'; did you mean 'eldoria_st_staging'?" in err
    code, _, err = run(db_url, "chat", "Serafina", "--say", "hi")
    assert code != 0 and "did you mean 'Seraphina'?" in err
    code, _, err = run(db_url, "lore", "bind", "Zanzibar", "--global")
    assert code != 0 and "no world book named 'Zanzibar'; import one with `tavern import FILE`" in err


def test_a_folder_import_ends_with_a_summary(tmp_path: Path, db_url: str) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "mira.json").write_text(json.dumps(CARD))
    (folder / "broken.json").write_text("{not json")
    (folder / "readme.txt").write_text("notes")
    code, out, err = run(db_url, "import", str(folder))
    assert code == 1 and "broken.json" in err
    assert out.splitlines()[-1] == ("1 imported, 1 failed "
                                    "(in folders, only .png, .json, .charx and .jsonl files are read)")


def test_lore_test_takes_a_cards_own_lorebook(db_url: str, corpus_dir: Path, tmp_path: Path) -> None:
    # FACTS.md: Seraphina's card carries "Eldoria", 4 entries; entry 1's keys include "shadowfang".
    card = str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")
    code, out, _ = run(db_url, "lore", "test", card, "--input", "tell me about the shadowfang", "--json")
    assert code == 0
    decisions = json.loads(out)
    assert len(decisions) == 4 and {d["book"] for d in decisions} == {"Eldoria"}
    assert next(d for d in decisions if d["uid"] == 1)["fired"]
    (tmp_path / "plain.json").write_text(json.dumps(CARD))
    code, _, err = run(db_url, "lore", "test", str(tmp_path / "plain.json"), "--input", "x")
    assert code != 0 and "the card 'Mira' has no lorebook (character_book)" in err
