"""A playthrough started from a message of another is titled after its parent ("<title> (branch)")."""

from __future__ import annotations

from pathlib import Path

from tavern_tui.service import Tavern
from tavern_tui.service.playthroughs import MAX_TITLE
from tavern_tui.service.timeline import branch_title
from tests.conftest import ScriptedModel


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


async def test_a_branch_is_titled_after_its_parent(tavern: Tavern, model: ScriptedModel, corpus_dir: Path) -> None:
    [card] = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])
    pid = tavern.playthroughs.new_playthrough(card.id).id
    model.enqueue("The glade is quiet.")
    await drain(tavern.steps.send(pid, "Where am I?"))
    reply = tavern.playthroughs.messages(pid)[-1]
    parent_title = tavern.playthroughs.playthrough(pid).chat_title
    assert parent_title == "Where am I?"  # untitled: its first line
    branch = tavern.timeline.branch_playthrough(pid, reply.ref)
    assert branch.chat_title == "Where am I? (branch)"
    # A branch of the branch is not marked twice; a given title is used as given.
    assert tavern.timeline.branch_playthrough(branch.id, reply.ref).chat_title == "Where am I? (branch)"
    tavern.playthroughs.rename(pid, "Night at the glade")
    assert tavern.timeline.branch_playthrough(pid, reply.ref).chat_title == "Night at the glade (branch)"


def test_a_long_title_is_cut_to_fit() -> None:
    title = branch_title("x" * MAX_TITLE)
    assert len(title) == MAX_TITLE and title.endswith("x… (branch)")
    assert branch_title("Tea") == "Tea (branch)"
