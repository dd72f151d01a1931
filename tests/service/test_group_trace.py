"""Each member's step of a group round is a normal step with its own trace; the
trace says which member it was written for (its reply's speaker). A one-character chat's
requests name nobody."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.service import Tavern
from tests.support.loopback import LoopbackServer, sse_chunks_for


@pytest.fixture
async def looped(server: LoopbackServer, db_url: str, corpus_dir: Path) -> AsyncIterator[Tavern]:
    settings = Settings(db_url=db_url, provider=ProviderSettings(base_url=server.base_url, model="loop-1", timeout=10))
    service = Tavern(settings)
    results = service.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png",
                                            corpus_dir / "cards" / "shodan_v2_pure.png"])
    assert all(r.ok for r in results)
    try:
        yield service
    finally:
        await service.aclose()


async def test_each_request_of_a_round_names_its_member(looped: Tavern, server: LoopbackServer) -> None:
    _group, playthrough = looped.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy="list")
    server.enqueue_sse(sse_chunks_for("Welcome."))
    server.enqueue_sse(sse_chunks_for("Insect."))
    async for _ in looped.groups.play_round(playthrough.id, "Hello."):
        pass
    traces = looped.traces.traces(playthrough.id)
    assert [t.speaker for t in traces] == ["Seraphina", "Shodan"]
    assert [t.to_json()["speaker"] for t in traces] == ["Seraphina", "Shodan"]
    assert looped.traces.trace(traces[1].id)["view"]["speaker"] == "Shodan"

    solo = looped.playthroughs.new_playthrough(looped.library.find_character("Shodan").id)
    server.enqueue_sse(sse_chunks_for("Alone."))
    async for _ in looped.steps.send(solo.id, "Hi."):
        pass
    assert [t.speaker for t in looped.traces.traces(solo.id)] == [None]
