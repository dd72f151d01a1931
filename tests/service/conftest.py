"""Fixtures shared by the service tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.service import Tavern
from tests.support.loopback import LoopbackServer


@pytest.fixture
def service(server: LoopbackServer, db_url: str) -> Iterator[Tavern]:
    """The service on the loopback endpoint, nothing imported."""
    tavern = Tavern(Settings(db_url=db_url, provider=ProviderSettings(base_url=server.base_url, model="loop-1",
                                                                      timeout=10)))
    yield tavern
    tavern.close()


@pytest.fixture
async def looped(server: LoopbackServer, db_url: str, corpus_dir: Path) -> AsyncIterator[Tavern]:
    """The service on the loopback endpoint with Seraphina and Shodan imported (a group's two members)."""
    settings = Settings(db_url=db_url, provider=ProviderSettings(base_url=server.base_url, model="loop-1", timeout=10))
    service = Tavern(settings)
    results = service.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png",
                                            corpus_dir / "cards" / "shodan_v2_pure.png"])
    assert all(r.ok for r in results)
    try:
        yield service
    finally:
        await service.aclose()
