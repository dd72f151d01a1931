"""Characters as a library (issue 20 item 5) and the new user's path of items 1-4: archive, the
whole card (creator notes shown, never sent), an edit as a new revision (the original bytes
stay, the next step reads it), export as SillyTavern writes a card (format-digest §a.2, §a.4:
`chara` V2 then `ccv3` V3 tEXt chunks before IEND, the validator's required fields), and the
card's own lorebook edited as a new revision."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.errors import Conflict, FormatError, NotFound
from tavern_tui.formats.cards import parse_card
from tavern_tui.formats.png import read_text_chunks, walk_chunks
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

NOTES = "Creator's secret: the lighthouse is a boat."
CARD = {"spec": "chara_card_v2", "spec_version": "2.0",
        "data": {"name": "Mira", "first_mes": "The lighthouse hums.", "description": "Mira keeps the lighthouse.",
                 "creator_notes": NOTES, "tags": ["Coast", "slow burn"], "creator": "tester",
                 "extensions": {"depth_prompt": {"prompt": "Stay calm.", "depth": 4, "role": "system"},
                                "x_unknown": {"kept": True}},
                 "character_book": {"name": "Mira's Book", "extensions": {}, "entries": [
                     {"id": 0, "keys": ["lamp"], "content": "The lamp burns whale oil.", "enabled": True,
                      "insertion_order": 100, "extensions": {}}]}}}

# ST TavernCardValidator.js (format-digest §a.2): what `data` must hold, with its type.
REQUIRED = {"name": str, "description": str, "personality": str, "scenario": str, "first_mes": str,
            "mes_example": str, "creator_notes": str, "system_prompt": str, "post_history_instructions": str,
            "alternate_greetings": list, "tags": list, "creator": str, "character_version": str, "extensions": dict}


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


@pytest.fixture
def mira(tavern: Tavern, tmp_path: Path) -> int:
    path = tmp_path / "mira.json"
    path.write_bytes(json.dumps(CARD).encode("utf-8"))
    [result] = tavern.imports.import_paths([path])
    assert result.ok, result.error
    return result.id  # type: ignore[return-value]


def original_sha(tavern: Tavern, character_id: int) -> str:
    with tavern.store.unit_of_work(write=False) as uow:
        return hashlib.sha256(uow.characters.original(character_id)).hexdigest()


async def test_archiving_a_character_hides_it_and_deletes_nothing(tavern: Tavern, model: ScriptedModel,
                                                                  mira: int) -> None:
    pid = tavern.playthroughs.new_playthrough(mira).id
    model.enqueue("Aye.")
    await drain(tavern.steps.send(pid, "Hello keeper."))
    view = tavern.library.archive_character(mira)
    assert view.archived
    assert mira not in [c.id for c in tavern.library.characters()]
    assert mira in [c.id for c in tavern.library.characters(include_archived=True)]
    # Nothing deleted: the chat, the card and a lookup by name still work.
    assert [m.content for m in tavern.playthroughs.messages(pid)][-2:] == ["Hello keeper.", "Aye."]
    assert tavern.library.find_character("mira").id == mira
    assert tavern.library.card_view(mira).fields["creator_notes"] == NOTES
    assert not tavern.library.archive_character(mira, False).archived
    assert mira in [c.id for c in tavern.library.characters()]


def test_the_card_view_shows_every_field_tags_book_and_extensions(tavern: Tavern, mira: int) -> None:
    card = tavern.library.card_view(mira)
    assert card.fields["creator_notes"] == NOTES and card.fields["first_mes"] == "The lighthouse hums."
    assert set(card.fields) >= {"name", "description", "personality", "scenario", "mes_example", "system_prompt",
                                "post_history_instructions", "creator", "character_version"}
    assert card.tags == ("Coast", "slow burn")
    assert card.book == ("Mira's Book", 1)
    assert set(card.extensions) == {"depth_prompt", "x_unknown"}
    assert card.to_json()["creator_notes"] == NOTES and card.to_json()["revision"] == 0


def test_creator_notes_and_tags_are_never_sent(tavern: Tavern, mira: int) -> None:
    pid = tavern.playthroughs.new_playthrough(mira).id
    request = json.dumps(tavern.steps.preview(pid, "Hi"), ensure_ascii=False)
    assert "Mira keeps the lighthouse." in request  # the description is sent …
    assert NOTES not in request and "slow burn" not in request  # … creator notes and tags never (spec_v2)


async def test_an_edit_is_a_new_revision_the_next_step_reads(tavern: Tavern, model: ScriptedModel,
                                                              mira: int) -> None:
    pid = tavern.playthroughs.new_playthrough(mira).id
    before = original_sha(tavern, mira)
    model.enqueue("One.", "Two.")
    await drain(tavern.steps.send(pid, "First."))
    view = tavern.library.edit_card(mira, {"description": "Mira now sails the lighthouse.", "tags": ["Sea"]},
                                    expected_revision=0)
    assert view.revision == 1 and view.tags == ("Sea",)
    await drain(tavern.steps.send(pid, "Second."))
    traces = tavern.traces.traces(pid)
    revisions = [tavern.traces.trace(t.id)["resources"].get("character_revision") for t in traces]
    assert sorted(revisions) == [0, 1]  # the first step read revision 0, the one after the edit revision 1
    assert "Mira now sails the lighthouse." in json.dumps(tavern.steps.preview(pid, "x"))
    assert "Mira keeps the lighthouse." not in json.dumps(tavern.steps.preview(pid, "x"))
    # The imported file's bytes never change; both revisions are kept.
    assert original_sha(tavern, mira) == before
    card = tavern.library.card_view(mira)
    assert [(r, why) for r, why, _ in card.revisions] == [(0, "imported"), (1, "edited")]


def test_a_bad_edit_stores_nothing(tavern: Tavern, mira: int) -> None:
    with pytest.raises(FormatError, match="unknown card field 'avatar'"):
        tavern.library.edit_card(mira, {"avatar": "x.png"})
    with pytest.raises(FormatError, match="name cannot be empty"):
        tavern.library.edit_card(mira, {"name": "  "})
    with pytest.raises(FormatError, match="tags takes a list of texts"):
        tavern.library.edit_card(mira, {"tags": "Sea"})
    tavern.library.edit_card(mira, {"scenario": "Night."})
    with pytest.raises(Conflict):
        tavern.library.edit_card(mira, {"scenario": "Day."}, expected_revision=0)
    with pytest.raises(NotFound):
        tavern.library.edit_card(9999, {"scenario": "Day."})
    card = tavern.library.card_view(mira)
    assert card.character.revision == 1 and card.fields["scenario"] == "Night."


def _chunks(png: bytes) -> list[tuple[str, dict]]:
    texts, _ = read_text_chunks(png, "out.png")
    return [(k, json.loads(base64.b64decode(v))) for k, v in texts if k in ("chara", "ccv3")]


def _check_against_the_spec(card: dict, spec: str, version: str) -> None:
    assert card["spec"] == spec and card["spec_version"] == version
    for field, kind in REQUIRED.items():
        assert isinstance(card["data"][field], kind), field
    book = card["data"]["character_book"]
    assert isinstance(book["extensions"], dict) and isinstance(book["entries"], list)


def test_export_png_is_a_card_sillytavern_reads(tavern: Tavern, mira: int, tmp_path: Path) -> None:
    tavern.library.edit_card(mira, {"personality": "Patient."})
    png = tavern.library.export_card(mira, "png", now=1_764_000_000)
    # ST write(): chara (V2) then ccv3 (V3), right before IEND.
    chunks = walk_chunks(png, "out.png")
    assert chunks[-1].type == "IEND"
    assert [k for k, _ in _chunks(png)] == ["chara", "ccv3"]
    assert all(c.type == "tEXt" for c in chunks[-3:-1])
    (_, chara), (_, ccv3) = _chunks(png)
    _check_against_the_spec(chara, "chara_card_v2", "2.0")
    _check_against_the_spec(ccv3, "chara_card_v3", "3.0")
    assert ccv3["data"]["group_only_greetings"] == [] and ccv3["data"]["modification_date"] == 1_764_000_000
    # Re-imported with our own importer: the edited revision, its book and extensions came along.
    again = parse_card(png, "out.png")
    assert again.chunk == "ccv3" and again.data["personality"] == "Patient."
    assert again.data["creator_notes"] == NOTES
    assert again.data["extensions"]["x_unknown"] == {"kept": True}
    assert [e["content"] for e in again.data["character_book"]["entries"]] == ["The lamp burns whale oil."]
    path = tmp_path / "mira.png"
    path.write_bytes(png)
    [result] = tavern.imports.import_paths([path])
    assert result.ok and not result.duplicate and result.name == "Mira"


def test_export_json_is_st_s_v2_shape(tavern: Tavern, mira: int) -> None:
    card = json.loads(tavern.library.export_card(mira, "json"))
    _check_against_the_spec(card, "chara_card_v2", "2.0")
    # The V1 mirror ST writes beside `data` (charaFormatData); `data` wins on import.
    assert card["name"] == "Mira" and card["creatorcomment"] == NOTES and card["tags"] == ["Coast", "slow burn"]
    again = parse_card(json.dumps(card).encode(), "mira.json")
    assert again.data["character_book"]["name"] == "Mira's Book" and again.data["creator_notes"] == NOTES


def test_a_png_card_exports_in_its_own_picture(tavern: Tavern, corpus_dir: Path) -> None:
    [result] = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])
    original = (corpus_dir / "cards" / "seraphina_chara_ccv3.png").read_bytes()
    png = tavern.library.export_card(result.id, "png")  # type: ignore[arg-type]
    image = [c for c in walk_chunks(original, "o") if c.type == "IDAT"]
    assert [c.data for c in walk_chunks(png, "e") if c.type == "IDAT"] == [c.data for c in image]
    assert parse_card(png, "e.png").data["first_mes"] == parse_card(original, "o.png").data["first_mes"]


def test_the_cards_own_book_is_edited_as_a_new_revision(tavern: Tavern, mira: int) -> None:
    before = original_sha(tavern, mira)
    found = tavern.lore.card_book(mira)
    assert found is not None
    book, revision = found
    assert revision == 0 and [e.content for e in book.entries] == ["The lamp burns whale oil."]
    book.entries[0].content = "The lamp burns seal oil."
    view = tavern.lore.save_card_book(mira, book, expected_revision=0)
    assert view.bindings == ("card",) and view.entries == 1
    card = tavern.library.card_view(mira)
    assert card.character.revision == 1 and [r for r, *_ in card.revisions] == [0, 1]
    assert original_sha(tavern, mira) == before
    pid = tavern.playthroughs.new_playthrough(mira).id
    request = json.dumps(tavern.steps.preview(pid, "Is the lamp lit?"))
    assert "seal oil" in request and "whale oil" not in request
    exported = json.loads(tavern.library.export_card(mira, "json"))
    assert exported["data"]["character_book"]["entries"][0]["content"] == "The lamp burns seal oil."
    with pytest.raises(Conflict):
        tavern.lore.save_card_book(mira, book, expected_revision=0)


async def test_the_last_played_character_is_the_one_whose_playthrough_moved_last(
        tavern: Tavern, model: ScriptedModel, mira: int, tmp_path: Path) -> None:
    assert tavern.library.last_played_character() is None  # nothing played yet
    oren_card = {**CARD, "data": {**CARD["data"], "name": "Oren"}}
    (tmp_path / "oren.json").write_text(json.dumps(oren_card), encoding="utf-8")
    [oren] = tavern.imports.import_paths([tmp_path / "oren.json"])
    mira_chat = tavern.playthroughs.new_playthrough(mira).id
    tavern.playthroughs.new_playthrough(oren.id or 0)
    assert tavern.library.last_played_character() == oren.id  # started last
    model.enqueue("The lamp is lit.")
    await drain(tavern.steps.send(mira_chat, "Light the lamp."))
    assert tavern.library.last_played_character() == mira  # Mira's chat moved since


async def test_new_user_three_drafts_two_discarded_one_played_renamed_found_after_a_restart(
        db_url: str, mira: int, tavern: Tavern, model: ScriptedModel) -> None:
    """Issue 20, "tried as a new user would", on the real store (a database file, two runs)."""
    drafts = [tavern.openings.new_draft(mira) for _ in range(3)]
    for draft in drafts[:2]:
        tavern.openings.discard(draft.id)
    assert [d.id for d in tavern.openings.drafts(mira)] == [drafts[2].id]
    model.enqueue("The gulls are loud tonight.")
    started: list[int] = []
    async for _ in tavern.openings.send_first(drafts[2].id, "Where are the pelicans?",
                                              started=lambda v: started.append(v.id)):
        pass
    [pid] = started
    assert tavern.openings.drafts(mira) == []
    assert [p.id for p in tavern.playthroughs.playthroughs(mira)] == [pid]
    assert tavern.playthroughs.rename(pid, "Pelican watch").chat_title == "Pelican watch"
    tavern.close()

    again = Tavern(Settings(db_url=db_url), provider=ScriptedModel(delay=0))
    try:
        [hit] = again.chats.search("pelicans")
        assert (hit.playthrough_id, hit.chat_title, hit.role, hit.on_head) == (pid, "Pelican watch", "user", True)
        [reply] = again.chats.search("gulls loud")
        assert reply.speaker == "Mira"
        assert again.chats.open_result(hit).id == pid
    finally:
        again.close()


def test_cli_card_character_and_export(tavern: Tavern, db_url: str, mira: int, tmp_path: Path) -> None:
    """`tavern card`, `tavern character list|archive|unarchive|edit` and `tavern export --png/--json`
    (run in-process through `cli.main`, on the test's database)."""
    import io

    from tavern_tui.cli import main

    def run(*args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(["--db", db_url, *args], out, err)
        return code, out.getvalue(), err.getvalue()

    code, text, _ = run("card", "Mira")
    assert code == 0 and NOTES in text and "## creator_notes  (not sent)" in text and "Coast, slow burn" in text
    code, text, _ = run("card", "Mira", "--json")
    assert json.loads(text)["book"] == {"name": "Mira's Book", "entries": 1}
    code, text, _ = run("character", "edit", "Mira", "--set", "tags", "Sea, Night", "--set", "scenario", "Storm.")
    assert code == 0 and "revision 1" in text
    assert tavern.library.card_view(mira).tags == ("Sea", "Night")
    code, _, err = run("character", "edit", "Mira", "--set", "avatar", "x")
    assert code != 0 and "unknown card field 'avatar'" in err
    assert run("character", "list", "--tag", "sea")[1].startswith(f"{mira}: Mira")
    assert run("character", "archive", "Mira")[0] == 0
    assert "Mira" not in run("character", "list")[1] and "(archived)" in run("character", "list", "--all")[1]
    assert run("character", "unarchive", str(mira))[0] == 0
    out_png, out_json = tmp_path / "m.png", tmp_path / "m.json"
    assert run("export", "Mira", "--png", str(out_png))[0] == 0
    assert run("export", "Mira", "--json", str(out_json))[0] == 0
    assert parse_card(out_png.read_bytes(), "m.png").data["scenario"] == "Storm."
    assert parse_card(out_json.read_bytes(), "m.json").data["tags"] == ["Sea", "Night"]
    code, _, err = run("export", "Mira", "--jsonl", "-")
    assert code != 0 and "--jsonl exports a playthrough" in err
