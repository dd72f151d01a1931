"""Chats (issue 20 item 4): titles, rename, archive, and search across every message, on SQLite
(FTS5) and, with TAVERN_TEST_PG_URL, on PostgreSQL (full-text GIN index): the `db_url` fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.errors import TavernError
from tavern_tui.service import Tavern
from tavern_tui.service.chats import snippet
from tests.conftest import ScriptedModel

CARD = {"spec": "chara_card_v2", "spec_version": "2.0",
        "data": {"name": "Mira", "first_mes": "The lighthouse hums.", "description": "Mira keeps the lighthouse."}}


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


@pytest.fixture
def mira(tavern: Tavern, tmp_path: Path) -> int:
    path = tmp_path / "mira.json"
    path.write_text(json.dumps(CARD))
    [result] = tavern.imports.import_paths([path])
    return result.id  # type: ignore[return-value]


async def test_a_word_in_an_old_branch_is_found_and_opens_on_that_branch(
        tavern: Tavern, model: ScriptedModel, mira: int) -> None:
    pid = tavern.playthroughs.new_playthrough(mira).id
    model.enqueue("The lamp needs oil.", "A cormorant nests under the gallery.", "Fog tonight.")
    await drain(tavern.steps.send(pid, "What needs doing?"))
    await drain(tavern.steps.send(pid, "Anything alive up there?"))
    # Swipe the last reply: the cormorant line is now on an old branch, not on the active path.
    await drain(tavern.steps.regenerate(pid))
    assert "cormorant" not in " ".join(m.content for m in tavern.playthroughs.messages(pid))
    [hit] = tavern.chats.search("CORMORANT nests")
    assert (hit.playthrough_id, hit.role, hit.speaker, hit.on_head) == (pid, "assistant", "Mira", False)
    assert "A cormorant nests under the gallery." in hit.snippet
    opened = tavern.chats.open_result(hit)
    assert opened.id == pid
    assert tavern.playthroughs.messages(pid)[-1].content == "A cormorant nests under the gallery."
    # A prefix of the last word matches as you type; a word that is nowhere finds nothing.
    assert [h.ref for h in tavern.chats.search("cormor")] == [hit.ref]
    assert tavern.chats.search("albatross") == [] and tavern.chats.search("  !!  ") == []


async def test_edits_are_found_and_archived_chats_only_with_all(tavern: Tavern, model: ScriptedModel,
                                                                mira: int) -> None:
    first = tavern.playthroughs.new_playthrough(mira).id
    second = tavern.playthroughs.new_playthrough(mira).id
    model.enqueue("Noted.", "Noted again.")
    await drain(tavern.steps.send(first, "The keeper's ledger is blue."))
    await drain(tavern.steps.send(second, "The ledger burned."))
    line = next(m for m in tavern.playthroughs.messages(second) if m.content == "The ledger burned.")
    tavern.timeline.edit_message(second, line.ref, "The ledger was stolen by gulls.")
    assert [h.playthrough_id for h in tavern.chats.search("gulls")] == [second]
    assert {h.playthrough_id for h in tavern.chats.search("ledger")} == {first, second}
    tavern.playthroughs.archive(second)
    assert [p.id for p in tavern.playthroughs.playthroughs(mira)] == [first]
    assert {h.playthrough_id for h in tavern.chats.search("ledger")} == {first}
    assert {h.playthrough_id for h in tavern.chats.search("ledger", include_archived=True)} == {first, second}
    assert tavern.chats.search("ledger", character="Mira", include_archived=True)[0].archived is True
    tavern.playthroughs.archive(second, archived=False)
    assert {p.id for p in tavern.playthroughs.playthroughs(mira)} == {first, second}
    # Archiving deleted nothing: the chat reads as before.
    assert tavern.playthroughs.messages(second)[-1].content == "Noted again."


async def test_titles_default_to_the_first_line_or_the_date_and_rename_changes_them(
        tavern: Tavern, model: ScriptedModel, mira: int) -> None:
    view = tavern.playthroughs.new_playthrough(mira)
    created = view.created_at
    assert view.chat_title == f"{created.day} {created:%b %Y}"
    await drain(tavern.steps.send(view.id, "\n  Up the   spiral stairs we go, counting every one of the 212 steps\n"))
    assert tavern.playthroughs.playthrough(view.id).chat_title == "Up the spiral stairs we go, counting every one…"
    renamed = tavern.playthroughs.rename(view.id, "  The long   climb ")
    assert renamed.chat_title == "The long climb"
    assert tavern.playthroughs.rename(view.id, "").chat_title.startswith("Up the spiral stairs")
    with pytest.raises(TavernError, match="at most 200"):
        tavern.playthroughs.rename(view.id, "x" * 201)


def test_a_snippet_is_cut_around_the_first_word_found() -> None:
    text = "word " * 60 + "needle in the haystack " + "hay " * 60
    shown = snippet(text, "Needle")
    assert shown.startswith("…") and shown.endswith("…") and "needle in the haystack" in shown
    assert len(shown) <= 122
