"""The message count lists show (home, `tavern sessions`) counts what the chat shows: a deleted
message is not counted, an edit counts once, a summary once for all it replaced."""

from __future__ import annotations

from pathlib import Path

from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel


async def test_a_deleted_message_leaves_the_count_and_an_edit_keeps_it(tavern: Tavern, model: ScriptedModel,
                                                                       corpus_dir: Path) -> None:
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
    assert cid is not None
    pid = tavern.playthroughs.new_playthrough(cid).id
    for line in ("one", "two"):
        model.enqueue(f"reply to {line}")
        async for _ in tavern.steps.send(pid, line):
            pass
    assert tavern.playthroughs.playthrough(pid).message_count == 5  # greeting + two exchanges
    shown = tavern.playthroughs.messages(pid)
    tavern.timeline.edit_message(pid, shown[1].ref, "one, edited")
    assert tavern.playthroughs.playthrough(pid).message_count == 5
    tavern.timeline.delete_message(pid, shown[2].ref)
    assert len(tavern.playthroughs.messages(pid)) == 4
    assert tavern.playthroughs.playthrough(pid).message_count == 4
