"""Home's facts of imported and compacted chats: how many messages were played and how many are
summarised, and which name new lines are written under (the persona's, the imported file's kept
for its old lines), with `play_as` to choose."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

SERAPHINA = "cards/seraphina_chara_ccv3.png"


def write_imported(path: Path, count: int) -> Path:
    """A SillyTavern chat with Seraphina, the person named "User" in the file, `count` lines."""
    header = {"user_name": "User", "character_name": "Seraphina", "create_date": "2024-3-12@10h00m00s",
              "chat_metadata": {}}
    lines = [{"name": "User" if n % 2 == 0 else "Seraphina", "is_user": n % 2 == 0, "is_system": False,
              "send_date": "2024-03-12T11:00:00.000Z", "mes": f"Line {n:04d}.", "extra": {}} for n in range(count)]
    path.write_text("\n".join(json.dumps(o) for o in [header, *lines]) + "\n", encoding="utf-8")
    return path


async def test_a_compacted_chat_counts_what_was_played_and_what_is_summarised(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path) -> None:
    [card] = tavern.imports.import_paths([corpus_dir / SERAPHINA])
    pid = tavern.playthroughs.new_playthrough(card.id, user_name="Ann").id
    session = tavern.playthroughs.playthrough(pid).session_id
    tavern.store.events.append(session, [
        NewEvent(EventKind.USER_MESSAGE if n % 2 == 0 else EventKind.ASSISTANT_MESSAGE,
                 "user" if n % 2 == 0 else "assistant", {"content": f"Line {n}."}) for n in range(1999)])
    model.enqueue("First recap.", "Second recap.")
    await tavern.compaction.compact(pid, keep=500)
    view = tavern.playthroughs.playthrough(pid)
    assert (view.message_count, view.played_count, view.summarised_count) == (501, 2000, 1500)
    await tavern.compaction.compact(pid, keep=10)  # a summary of the summary and 490 more
    view = tavern.playthroughs.playthrough(pid)
    assert (view.message_count, view.played_count, view.summarised_count) == (11, 2000, 1990)
    assert view.to_json()["played"] == 2000 and view.to_json()["summarised"] == 1990
    [listed] = tavern.playthroughs.playthroughs(card.id)
    assert (listed.played_count, listed.summarised_count) == (2000, 1990)


def test_an_imported_chat_plays_as_the_configured_name_and_keeps_its_own_for_old_lines(
        tavern: Tavern, corpus_dir: Path, tmp_path: Path) -> None:
    tavern.ctx.settings = dataclasses.replace(tavern.ctx.settings, user_name="Ada")
    tavern.imports.import_paths([corpus_dir / SERAPHINA])
    [chat] = tavern.imports.import_paths([write_imported(tmp_path / "Seraphina - 2024.jsonl", 20)])
    assert chat.ok
    view = tavern.playthroughs.playthrough(chat.id)
    assert (view.user_name, view.imported_user, view.played_count, view.summarised_count) == ("Ada", "User", 20, 0)
    assert [m.speaker for m in tavern.playthroughs.messages(chat.id)][:2] == ["User", "Seraphina"]
    # The person chooses the imported name for new lines, then back to the default.
    assert tavern.playthroughs.play_as(chat.id, "User").user_name == "User"
    assert tavern.playthroughs.playthrough(chat.id).user_name == "User"
    assert tavern.playthroughs.play_as(chat.id, "").user_name == "Ada"
    assert [m.speaker for m in tavern.playthroughs.messages(chat.id)][:2] == ["User", "Seraphina"]


def test_without_a_configured_name_an_imported_chat_keeps_the_files(tavern: Tavern, corpus_dir: Path,
                                                                    tmp_path: Path) -> None:
    tavern.imports.import_paths([corpus_dir / SERAPHINA])
    path = write_imported(tmp_path / "Seraphina - 2024.jsonl", 4)
    path.write_text(path.read_text().replace('"User"', '"Ann"'))
    [chat] = tavern.imports.import_paths([path])
    view = tavern.playthroughs.playthrough(chat.id)
    assert (view.user_name, view.imported_user) == ("Ann", "Ann")
