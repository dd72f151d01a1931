"""The person's typed text is never lost when a step cannot be prepared: a card, book or template
that breaks the build (here: the build raises RecursionError and MemoryError, as 300 nested
`{{if}}` and an exhausted memory did in the reliability trial) leaves the text queued in the inbox,
durable, says so in one clear error, and the next step sends it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavern_tui.errors import TavernError
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel


@pytest.mark.parametrize("failure", [RecursionError("maximum recursion depth exceeded"), MemoryError()])
async def test_a_build_that_breaks_keeps_the_typed_text_queued_and_the_next_step_sends_it(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path, monkeypatch: pytest.MonkeyPatch,
        failure: Exception) -> None:
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
    assert cid is not None
    pid = tavern.playthroughs.new_playthrough(cid).id
    working = tavern.steps._assembler

    def broken(*args: object, **kwargs: object) -> object:
        raise failure

    monkeypatch.setattr(tavern.steps, "_assembler", broken)
    with pytest.raises(TavernError, match="your message is kept in the queue") as refused:
        async for _ in tavern.steps.send(pid, "I wake up under the oak."):
            pass
    assert type(failure).__name__ in str(refused.value) and "Traceback" not in str(refused.value)
    assert model.requests == [] and len(tavern.playthroughs.messages(pid)) == 1  # nothing sent, greeting only
    assert [item.text for item in tavern.inbox.pending(pid)] == ["I wake up under the oak."]
    monkeypatch.setattr(tavern.steps, "_assembler", working)
    model.enqueue("*Seraphina smiles.* You are awake.")
    async for _ in tavern.steps.run_queued(pid):
        pass
    assert [m.content for m in tavern.playthroughs.messages(pid)][1:] == [
        "I wake up under the oak.", "*Seraphina smiles.* You are awake."]
    assert tavern.inbox.pending(pid) == []


@pytest.mark.parametrize("base_url", ["localhost:5001/v1", "ftp://127.0.0.1/v1", "http:///v1"])
async def test_an_unusable_endpoint_admits_nothing_and_keeps_the_text_queued(
        db_url: str, model: ScriptedModel, corpus_dir: Path, base_url: str) -> None:
    from tavern_tui.config import Settings
    from tavern_tui.providers.base import ProviderSettings

    tavern = Tavern(Settings(db_url=db_url, provider=ProviderSettings(base_url=base_url, model="m")), provider=model)
    try:
        cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
        assert cid is not None
        pid = tavern.playthroughs.new_playthrough(cid).id
        with pytest.raises(TavernError, match="must start with http:// or https:// and name a host") as refused:
            async for _ in tavern.steps.send(pid, "Hello?"):
                pass
        assert "your message is kept in the queue" in str(refused.value)
        assert model.requests == [] and len(tavern.playthroughs.messages(pid)) == 1
        assert [item.text for item in tavern.inbox.pending(pid)] == ["Hello?"]
    finally:
        tavern.close()
