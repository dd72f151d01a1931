"""Names that can be told apart (issue 20 item 7): world books, presets and characters that
share a name are listed with their file and id, and a CLI argument that matches several is
refused with the matches listed (`--id`, or the id, picks one); never picked silently. A
world book takes its file's name, as SillyTavern's `/api/worldinfo/import` names it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tavern_tui.cli import main
from tavern_tui.errors import Ambiguous
from tavern_tui.service import Tavern
from tavern_tui.views import distinct_labels


def cli(db_url: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(["--db", db_url, *args], out, err), out.getvalue(), err.getvalue()


def two_copies(corpus_file: Path, tmp_path: Path, name: str, change: dict) -> list[Path]:
    """The corpus file under `name` in two folders; the second with `change` merged in (other bytes)."""
    paths = []
    for index, folder in enumerate(("a", "b")):
        (tmp_path / folder).mkdir()
        obj = json.loads(corpus_file.read_text(encoding="utf-8"))
        if index:
            obj.update(change)
        (tmp_path / folder / name).write_text(json.dumps(obj), encoding="utf-8")
        paths.append(tmp_path / folder / name)
    return paths


def test_two_books_with_one_name(tavern: Tavern, db_url: str, corpus_dir: Path, tmp_path: Path) -> None:
    paths = two_copies(corpus_dir / "worldbooks" / "honkai_chub_st_hybrid.json", tmp_path, "honkai.json",
                       {"description": "the second copy"})
    first, second = tavern.imports.import_paths(paths)
    assert (first.name, second.name) == ("honkai", "honkai")  # the file's name, not the JSON's "Honkai Impact RPG"
    code, _, err = cli(db_url, "lore", "bind", "honkai", "--global")
    assert code != 0 and "2 world books are named 'honkai'" in err
    assert f"#{first.id} from honkai.json" in err and f"#{second.id} from honkai.json" in err and "--id" in err
    assert all(not b.bindings for b in tavern.lore.world_books())  # nothing was bound
    code, out, err = cli(db_url, "lore", "bind", "--id", str(second.id), "--global")
    assert code == 0 and out == "honkai bound to global\n", err
    assert [b.id for b in tavern.lore.world_books() if b.bindings] == [second.id]
    code, out, _ = cli(db_url, "lore", "list")
    assert f"honkai (honkai.json #{first.id})" in out and f"honkai (honkai.json #{second.id})" in out
    with pytest.raises(Ambiguous) as caught:
        tavern.lore.find_world_book("HONKAI")
    assert set(caught.value.ids) == {first.id, second.id}


def test_two_presets_with_one_name(tavern: Tavern, db_url: str, corpus_dir: Path, tmp_path: Path) -> None:
    paths = two_copies(corpus_dir / "presets" / "st_openai_default_staging.json", tmp_path, "warm.json",
                       {"temperature": 0.5})
    first, second = tavern.imports.import_paths(paths)
    assert first.ok and second.ok and first.name == second.name
    pid_code, _, err = cli(db_url, "preview", "1", "--preset", first.name)
    assert pid_code != 0 and f"2 presets are named {first.name!r}" in err
    code, out, _ = cli(db_url, "presets")
    assert f"{first.name} (warm.json #{first.id})" in out and f"{first.name} (warm.json #{second.id})" in out
    with pytest.raises(Ambiguous):
        tavern.presets.find_preset(first.name)
    assert tavern.presets.find_preset(str(second.id)).id == second.id


def test_two_characters_with_one_name(tavern: Tavern, db_url: str, tmp_path: Path) -> None:
    card = {"spec": "chara_card_v2", "spec_version": "2.0",
            "data": {"name": "Mira", "first_mes": "Hello.", "description": "Mira keeps the lighthouse."}}
    (tmp_path / "mira.json").write_text(json.dumps(card), encoding="utf-8")
    card["data"]["description"] = "Mira sails."
    (tmp_path / "mira_sailor.json").write_text(json.dumps(card), encoding="utf-8")
    first, second = tavern.imports.import_paths([tmp_path / "mira.json", tmp_path / "mira_sailor.json"])
    code, _, err = cli(db_url, "new", "Mira")
    assert code != 0 and "2 characters are named 'Mira'" in err
    assert "from mira.json" in err and "from mira_sailor.json" in err
    assert tavern.openings.drafts() == [] and tavern.playthroughs.playthroughs() == []
    code, _, err = cli(db_url, "chat", "mira", "--say", "hi")
    assert code != 0 and "2 characters are named 'mira'" in err and tavern.playthroughs.playthroughs() == []
    code, _, err = cli(db_url, "new", str(second.id))
    assert code == 0, err
    assert [d.character_id for d in tavern.openings.drafts()] == [second.id]
    labels = distinct_labels(tavern.library.characters())
    assert labels == {first.id: f"Mira (mira.json #{first.id})", second.id: f"Mira (mira_sailor.json #{second.id})"}
