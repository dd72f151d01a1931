"""The service facade on a real SQLite file: card import, playthroughs, sending, reopening."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from sqlalchemy import text

from tavern_tui.config import Settings
from tavern_tui.engine.step import StepSettled
from tavern_tui.engine.stream import TextDelta
from tavern_tui.errors import NotFound, TavernError
from tavern_tui.formats.png import write_card_chunks
from tavern_tui.providers.demo import DemoProvider
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

# shared/corpus/FACTS.md: name → (greetings = first_mes + alternate_greetings, lorebook entries or None)
CORPUS_CARDS = {
    "seraphina_chara_ccv3.png": ("Seraphina", 1, 4, "chara_card_v3"),
    "coding_sensei_v2.png": ("Coding Sensei", 1, None, "chara_card_v2"),
    "capogpt_v2_pure.png": ("CapoGPT", 1, None, "chara_card_v2"),
    "shodan_v2_pure.png": ("Shodan", 1, None, "chara_card_v2"),
    "skynet_v1_legacy.png": ("Skynet", 1, None, "chara_card_v1"),
    "ai_v3_with_book.json": ("爱", 1, 27, "chara_card_v3"),
}


def _db_snapshot(tavern: Tavern) -> list[tuple]:
    assert tavern.store is not None
    with tavern.store.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text("SELECT id, name, original_sha256 FROM characters ORDER BY id"))]


def test_importing_the_corpus_folder_stores_every_card_with_facts_values(tavern: Tavern, corpus_dir: Path) -> None:
    results = tavern.imports.import_paths([corpus_dir / "cards"])
    assert [Path(r.path).name for r in results] == sorted(CORPUS_CARDS)
    assert all(r.ok and not r.duplicate and r.kind == "character" for r in results)
    views = {c.source_name: c for c in tavern.library.characters()}
    for file, (name, greetings, entries, spec) in CORPUS_CARDS.items():
        view = views[file]
        assert (view.name, view.greetings, view.book_entries, view.spec) == (name, greetings, entries, spec), file
    assert views["coding_sensei_v2.png"].tags == ("coding", "utility", "assistant")
    assert views["coding_sensei_v2.png"].creator == "RossAscends"
    assert views["capogpt_v2_pure.png"].creator == "Cow"
    # The original bytes are kept exactly.
    assert tavern.store is not None
    with tavern.store.unit_of_work() as uow:
        original = uow.characters.original(views["shodan_v2_pure.png"].id)
    assert hashlib.sha256(original).hexdigest() == "6820e06397da3fab38944abc7e5c42d3ab634aa8404ba0b9fe0adde6d61e001d"


def test_importing_the_same_file_twice_stores_it_once(tavern: Tavern, corpus_dir: Path) -> None:
    first = tavern.imports.import_paths([corpus_dir / "cards" / "skynet_v1_legacy.png"])[0]
    again = tavern.imports.import_paths([corpus_dir / "cards" / "skynet_v1_legacy.png"])[0]
    assert again.duplicate and again.id == first.id
    assert len(tavern.library.characters()) == 1


def test_broken_files_get_clear_errors_and_leave_the_database_unchanged(tavern: Tavern, corpus_dir: Path,
                                                                     tmp_path: Path) -> None:
    tavern.imports.import_paths([corpus_dir / "cards" / "skynet_v1_legacy.png"])
    before = _db_snapshot(tavern)
    png = (corpus_dir / "cards" / "coding_sensei_v2.png").read_bytes()
    cases = {
        "plain.png": (b"hello, I am not an image", "not a PNG or JSON card"),
        "nochunk.png": (write_card_chunks(png, None, None), "no character card chunk"),
        "noname.json": (json.dumps({"spec": "chara_card_v2", "spec_version": "2.0",
                                    "data": {"description": "x"}}).encode(), "name"),
        "notjson.json": (b'{"name": "Half', "JSON"),
        "truncated.png": (png[: len(png) // 2], "truncated"),
    }
    for file, (data, expected) in cases.items():
        path = tmp_path / file
        path.write_bytes(data)
        result = tavern.imports.import_paths([path])[0]
        assert result.error is not None and not result.ok, file
        assert str(path) in result.error and expected.lower() in result.error.lower(), result.error
    assert _db_snapshot(tavern) == before


def test_bad_base64_in_the_card_chunk_names_the_chunk(tavern: Tavern, corpus_dir: Path, tmp_path: Path) -> None:
    from tavern_tui.formats.png import encode_text_chunk

    png = write_card_chunks((corpus_dir / "cards" / "coding_sensei_v2.png").read_bytes(), None, None)
    broken = png[:-12] + encode_text_chunk("chara", b"@@@ not base64 @@@") + png[-12:]
    path = tmp_path / "bad64.png"
    path.write_bytes(broken)
    result = tavern.imports.import_paths([path])[0]
    assert result.error is not None and "chara" in result.error and "base64" in result.error.lower()
    assert tavern.library.characters() == []


def test_a_png_with_a_null_book_and_alternate_greetings_imports(
        tavern: Tavern, corpus_dir: Path, tmp_path: Path) -> None:
    png = (corpus_dir / "cards" / "coding_sensei_v2.png").read_bytes()
    card = {"spec": "chara_card_v2", "spec_version": "2.0",
            "data": {"name": "Tess", "first_mes": "Hi {{user}}", "alternate_greetings": ["Yo", "Hey"],
                     "character_book": None}}
    path = tmp_path / "tess.png"
    path.write_bytes(write_card_chunks(png, json.dumps(card), None))
    result = tavern.imports.import_paths([path])[0]
    assert result.ok
    view = tavern.library.character(result.id or 0)
    assert (view.name, view.greetings, view.book_entries) == ("Tess", 3, None)


def test_new_playthrough_opens_with_the_greeting_as_an_engine_opening_reference(
        tavern: Tavern, corpus_dir: Path) -> None:
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "coding_sensei_v2.png"])[0].id
    assert cid is not None
    playthrough = tavern.playthroughs.new_playthrough(cid, user_name="Ada")
    messages = tavern.playthroughs.messages(playthrough.id)
    assert len(messages) == 1
    greeting = messages[0]
    assert ((greeting.role, greeting.origin, greeting.natural, greeting.source)
            == ("assistant", "engine", False, "opening"))
    assert len(greeting.content) > 0 and "{{user}}" not in greeting.content and "{{char}}" not in greeting.content
    assert greeting.speaker == "Coding Sensei"


async def test_send_stores_user_and_agent_messages_and_sends_the_card_prompt(tavern: Tavern, model: ScriptedModel,
                                                                           corpus_dir: Path) -> None:
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
    assert cid is not None
    playthrough = tavern.playthroughs.new_playthrough(cid, user_name="Ada")
    model.enqueue("*She smiles.* Welcome, Ada.")
    deltas = []
    settled = None
    async for update in tavern.steps.send(playthrough.id, "Where am I?"):
        if isinstance(update, TextDelta):
            deltas.append(update.text)
        elif isinstance(update, StepSettled):
            settled = update
    assert "".join(deltas) == "*She smiles.* Welcome, Ada."
    assert settled is not None and settled.event.kind == "assistant/message"
    messages = tavern.playthroughs.messages(playthrough.id)
    assert [(m.role, m.origin, m.content) for m in messages[1:]] == [
        ("user", "customer", "Where am I?"), ("assistant", "agent", "*She smiles.* Welcome, Ada.")]
    sent = model.requests[0].messages
    assert sent[0]["role"] == "system"
    assert sent[0]["content"].startswith("Write Seraphina's next reply in a fictional chat between Seraphina and Ada.")
    assert "{{char}}" not in sent[0]["content"] and "{{user}}" not in sent[0]["content"]
    assert [m["role"] for m in sent] == ["system", "assistant", "user"]
    assert tavern.playthroughs.playthroughs()[0].id == playthrough.id


async def test_reopening_the_database_shows_earlier_playthroughs_newest_first(db_url: str, corpus_dir: Path) -> None:
    first = Tavern(Settings(db_url=db_url), provider=DemoProvider(delay=0))
    ids = [r.id for r in first.imports.import_paths([corpus_dir / "cards"])]
    older = first.playthroughs.new_playthrough(ids[0] or 0)
    newer = first.playthroughs.new_playthrough(ids[1] or 0)
    async for _ in first.steps.send(older.id, "hello again"):
        pass  # playing the older one moves it to the top
    first.close()
    second = Tavern(Settings(db_url=db_url), provider=DemoProvider(delay=0))
    try:
        listed = second.playthroughs.playthroughs()
        assert [p.id for p in listed] == [older.id, newer.id]
        assert [m.role for m in second.playthroughs.messages(older.id)] == ["assistant", "user", "assistant"]
        assert second.playthroughs.messages(older.id)[1].content == "hello again"
    finally:
        second.close()


async def test_empty_message_and_unknown_ids_are_refused(tavern: Tavern, corpus_dir: Path) -> None:
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "skynet_v1_legacy.png"])[0].id or 0
    playthrough = tavern.playthroughs.new_playthrough(cid)
    with pytest.raises(TavernError, match="empty"):
        async for _ in tavern.steps.send(playthrough.id, "   "):
            pass
    with pytest.raises(NotFound):
        tavern.playthroughs.playthrough(999)
    with pytest.raises(NotFound, match="Nobody"):
        tavern.library.find_character("Nobody")
    assert tavern.library.find_character("skynet").name == "Skynet"
    assert tavern.library.find_character(str(cid)).name == "Skynet"


def test_presets_import_as_presets_and_are_refused_as_cards(tavern: Tavern, corpus_dir: Path) -> None:
    results = tavern.imports.import_paths([corpus_dir / "presets"])
    assert [r.kind for r in results] == ["preset"] * 4 and all(r.ok for r in results)
    # Prompt counts from shared/corpus/SOURCES.md.
    assert {p.name: p.prompts for p in tavern.presets.presets()} == {
        "st_openai_default_staging": 12, "nemo_vivarium_v1_0_beta": 16, "atelier_1_2": 88,
        "nemoengine_5_4_tutorial": 186}
    assert tavern.library.characters() == [] and tavern.lore.world_books() == []
    default = tavern.presets.find_preset("st_openai_default_staging")
    assert default.order_source == "100001"
    assert all(r.duplicate for r in tavern.imports.import_paths([corpus_dir / "presets"]))
    card_result = tavern.library.import_card_bytes((corpus_dir / "presets" / "atelier_1_2.json").read_bytes(),
                                                   "atelier_1_2.json")
    assert card_result.error == "atelier_1_2.json: this is a chat-completion preset file, not a character card"


def test_world_books_import_by_content_with_facts_counts(tavern: Tavern, corpus_dir: Path) -> None:
    # The Agnai memory book and the Chub export carry `name` and `description`, like a V1 card,
    # and must not become characters (shared/corpus/FACTS.md gives the counts and names).
    results = tavern.imports.import_paths([corpus_dir / "worldbooks"])
    assert [(Path(r.path).name, r.kind, r.ok) for r in results] == [
        ("eldoria_st_release_oldformat.json", "world_book", True), ("eldoria_st_staging.json", "world_book", True),
        ("hogwarts_agnai_memory.json", "world_book", True), ("honkai_chub_st_hybrid.json", "world_book", True)]
    books = {b.source_name: b for b in tavern.lore.world_books()}
    assert {name: b.entries for name, b in books.items()} == {
        "eldoria_st_release_oldformat.json": 4, "eldoria_st_staging.json": 4,
        "hogwarts_agnai_memory.json": 4, "honkai_chub_st_hybrid.json": 34}
    # Named after the file, as SillyTavern's /api/worldinfo/import names them (not the JSON's `name`).
    assert books["honkai_chub_st_hybrid.json"].name == "honkai_chub_st_hybrid"
    assert books["hogwarts_agnai_memory.json"].name == "hogwarts_agnai_memory"
    assert tavern.library.characters() == []
    honkai = tavern.lore.world_book(books["honkai_chub_st_hybrid.json"].id)
    assert [e.uid for e in honkai.entries if e.constant] == [13]
    assert [e.uid for e in honkai.entries if e.disable] == [15]
    again = tavern.imports.import_paths([corpus_dir / "worldbooks" / "eldoria_st_staging.json"])[0]
    assert again.duplicate and again.id == books["eldoria_st_staging.json"].id


def test_binding_a_world_book_checks_scope_and_target(tavern: Tavern, corpus_dir: Path) -> None:
    book = tavern.imports.import_paths([corpus_dir / "worldbooks" / "eldoria_st_staging.json"])[0].id or 0
    character = tavern.imports.import_paths([corpus_dir / "cards" / "skynet_v1_legacy.png"])[0].id or 0
    assert tavern.lore.bind_world_book(book, "character", character) is True
    assert tavern.lore.bind_world_book(book, "character", character) is False
    assert tavern.lore.bind_world_book(book, "global") is True
    with pytest.raises(TavernError, match="unknown binding scope"):
        tavern.lore.bind_world_book(book, "everywhere", 1)
    with pytest.raises(TavernError, match="global binding takes no target"):
        tavern.lore.bind_world_book(book, "global", 3)
    with pytest.raises(NotFound):
        tavern.lore.bind_world_book(book, "playthrough", 999)
    assert tavern.lore.unbind_world_book(book, "global") is True
    assert tavern.lore.unbind_world_book(book, "global") is False
    assert tavern.lore.world_books()[0].entries == 4  # unbinding never deletes


def test_an_empty_folder_is_named_in_the_error(tavern: Tavern, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    results = tavern.imports.import_paths([tmp_path / "empty"])
    assert [r.error for r in results] == [
        f"{tmp_path / 'empty'}: no .png, .json, .charx or .jsonl files in this folder"]


async def test_demo_replies_are_marked_and_never_reach_a_real_model(db_url: str, corpus_dir: Path) -> None:
    offline = Tavern(Settings(db_url=db_url), provider=DemoProvider(delay=0))
    cid = offline.imports.import_paths([corpus_dir / "cards" / "skynet_v1_legacy.png"])[0].id or 0
    pid = offline.playthroughs.new_playthrough(cid).id
    async for _ in offline.steps.send(pid, "status?"):
        pass
    offline.close()
    real = ScriptedModel(delay=0)
    online = Tavern(Settings(db_url=db_url), provider=real)
    try:
        shown = online.playthroughs.messages(pid)
        assert [(m.role, m.origin, m.source) for m in shown[1:]] == [("user", "customer", None),
                                                                     ("assistant", "engine", "placeholder")]
        assert shown[2].content.startswith("[demo reply")
        async for _ in online.steps.send(pid, "status now?"):
            pass
        sent = real.requests[0].messages
        assert [m["role"] for m in sent] == ["system", "assistant", "user", "user"]
        assert not any("[demo reply" in m["content"] for m in sent)
        # ... and the request says so: the one demo reply is named among the adjustments.
        note = "1 offline demo reply left out of the history (a placeholder's text is never sent to a model)"
        assert note in online.steps.preview(pid)["adjustments"]
    finally:
        online.close()


def test_editing_a_world_book_saves_a_new_version_without_touching_bindings(tavern: Tavern, corpus_dir: Path) -> None:
    book_id = tavern.imports.import_paths([corpus_dir / "worldbooks" / "eldoria_st_staging.json"])[0].id or 0
    assert tavern.lore.bind_world_book(book_id, "global")
    book = tavern.lore.world_book(book_id)
    book.entries[0].key.append("grove")
    book.entries[1].disable = True
    tavern.lore.save_world_book(book_id, book)
    again = tavern.lore.world_book(book_id)
    assert "grove" in again.entries[0].key and again.entries[1].disable is True
    assert tavern.lore.world_books()[0].bindings == ("global",)
    book.entries[2].uid = book.entries[3].uid  # two entries with one uid cannot be saved
    from tavern_tui.errors import FormatError

    with pytest.raises(FormatError, match="uid"):
        tavern.lore.save_world_book(book_id, book)
    assert [e.uid for e in tavern.lore.world_book(book_id).entries] == [0, 1, 2, 3]
