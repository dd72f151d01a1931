"""The step's lease is released before the settled reply's MVU commit and belief learning run
(seed 000 "One step": settle ends the step): another window may start a step while they work, and
is no longer told the chat is busy. Before, both ran inside the lease (learning with the model
extractor is a second provider call)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tavern_tui.engine.step import StepBusy
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel


async def test_state_and_learning_run_after_the_step_is_free(tavern: Tavern, model: ScriptedModel,
                                                            corpus_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
    assert cid is not None
    pid = tavern.playthroughs.new_playthrough(cid).id
    session = tavern.playthroughs.playthrough(pid).session_id
    free: list[tuple[str, bool]] = []

    def step_is_free(where: str) -> None:
        try:
            claim = tavern.store.claims.claim(session, 75.0)
        except StepBusy:
            free.append((where, False))
            return
        tavern.store.claims.release(claim.token)
        free.append((where, True))

    real_commit = tavern.mvu.commit_reply

    def commit_reply(*args: object, **kwargs: object) -> object:
        step_is_free("mvu")
        return real_commit(*args, **kwargs)

    async def consolidate(playthrough_id: int) -> None:
        await asyncio.to_thread(step_is_free, "learning")

    monkeypatch.setattr(tavern.mvu, "commit_reply", commit_reply)
    monkeypatch.setattr(tavern.steps, "_consolidate_quietly", consolidate)
    model.enqueue("*Seraphina smiles.* Rest now.")
    updates = [u async for u in tavern.steps.send(pid, "Where am I?")]
    assert type(updates[-1]).__name__ == "StepSettled"  # still the last update, after both ran
    assert free == [("mvu", True), ("learning", True)]
    assert [m.content for m in tavern.playthroughs.messages(pid)][-2:] == ["Where am I?",
                                                                         "*Seraphina smiles.* Rest now."]
