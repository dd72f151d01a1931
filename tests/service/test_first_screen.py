"""The home screen's first list, read before the service opens (`service.first_screen`, with the
standard library's sqlite3), is what `LibraryService` gives for the same database: the corpus
cards, hand-made edge cards, an archived one, an edited revision, and the last played character.
A database not created yet lists nothing; anything it cannot read that way (another database, a
folder, a schema behind) gives None."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.service import Tavern
from tavern_tui.service.first_screen import FirstScreen, first_screen
from tavern_tui.store.first_screen import sqlite_file
from tests.conftest import ScriptedModel

EDGE_CARDS = {
    # V1: the top-level object is the data; numeric tags, no creator.
    "v1.json": {"name": "Vee", "description": "Old format.", "first_mes": "Hi.", "tags": [3, "old"]},
    # V2 with a book of no entries (0, not None) and alternate greetings.
    "empty_book.json": {"spec": "chara_card_v2", "spec_version": "2.0",
                        "data": {"name": "Bea", "first_mes": "One.", "alternate_greetings": ["Two.", "Three."],
                                 "creator": "someone", "character_book": {"entries": []}}},
    # Same name as another: listed by name, then id.
    "vee_again.json": {"name": "Vee", "description": "Another Vee.", "first_mes": "Hello."},
}


@pytest.fixture
def library(tmp_path: Path, corpus_dir: Path) -> tuple[Tavern, str]:
    url = f"sqlite:///{tmp_path / 'tavern.sqlite3'}"
    tavern = Tavern(Settings(db_url=url), provider=ScriptedModel(delay=0))
    paths = [*sorted((corpus_dir / "cards").iterdir()), corpus_dir / "stateful" / "qingkong_li_mvu.png"]
    for name, card in EDGE_CARDS.items():
        (tmp_path / name).write_text(json.dumps(card), encoding="utf-8")
        paths.append(tmp_path / name)
    results = tavern.imports.import_paths(paths)
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    yield tavern, url
    tavern.close()


def test_the_first_list_is_the_librarys(library: tuple[Tavern, str]) -> None:
    tavern, url = library
    assert first_screen(url) is not None and first_screen(url).last_played is None  # type: ignore[union-attr]
    characters = tavern.library.characters()
    by_name = {c.name: c for c in characters}
    tavern.library.archive_character(by_name["Shodan"].id)
    edited = tavern.library.card_view(by_name["Bea"].id)
    tavern.library.edit_card(edited.character.id, {"description": "Edited."}, expected_revision=0)
    tavern.playthroughs.new_playthrough(by_name["Seraphina"].id)
    tavern.playthroughs.new_playthrough(by_name["Vee"].id)

    found = first_screen(url)
    assert found is not None
    assert list(found.characters) == tavern.library.characters()
    assert found.last_played == tavern.library.last_played_character() == by_name["Vee"].id
    bea = next(c for c in found.characters if c.name == "Bea")
    # Read from the card itself (EDGE_CARDS), not from either path's output.
    assert (bea.greetings, bea.creator, bea.description, bea.revision, bea.book_entries) == (
        3, "someone", "Edited.", 1, 0)
    assert "Shodan" not in [c.name for c in found.characters]
    assert next(c for c in found.characters if c.source_name == "v1.json").tags == ("old",)  # strings only
    # FACTS.md: greetings (first_mes + alternates), book entries, creator and tags of the corpus cards.
    facts = {c.name: (c.greetings, c.book_entries) for c in found.characters}
    assert (facts["Seraphina"], facts["爱"], facts["青空 理"], facts["Coding Sensei"]) == ((1, 4), (1, 27), (4, 7),
                                                                                        (1, None))
    sensei = next(c for c in found.characters if c.name == "Coding Sensei")
    assert (sensei.creator, sensei.tags) == ("RossAscends", ("coding", "utility", "assistant"))


def test_anything_else_is_read_after_the_service_opens(tmp_path: Path, library: tuple[Tavern, str]) -> None:
    _tavern, url = library
    assert first_screen("postgresql://u@localhost/tavern") is None
    assert first_screen("sqlite://") is None and first_screen("sqlite:///:memory:") is None
    # A first start: nothing imported yet, and the file is left for the service to create.
    assert first_screen(f"sqlite:///{tmp_path / 'new' / 'tavern.sqlite3'}") == FirstScreen((), None)
    assert not (tmp_path / "new").exists()
    assert first_screen(f"sqlite:///{tmp_path}") is None  # a folder, not a database file
    assert sqlite_file("sqlite:////var/x.db") == Path("/var/x.db")
    assert sqlite_file("sqlite:///x.db?mode=ro") is None
    behind = tmp_path / "behind.sqlite3"
    path = sqlite_file(url)
    assert path is not None
    with sqlite3.connect(path) as source, sqlite3.connect(behind) as copy:
        source.backup(copy)  # the WAL's pages too
    with sqlite3.connect(behind) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0018'")
    assert first_screen(f"sqlite:///{behind}") is None  # the service migrates it first


def test_reading_the_first_list_loads_no_database_library(library: tuple[Tavern, str]) -> None:
    _tavern, url = library
    code = ("import sys\nfrom tavern_tui.service.first_screen import first_screen\n"
            f"assert first_screen({url!r}).characters\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'alembic', 'textual'}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
