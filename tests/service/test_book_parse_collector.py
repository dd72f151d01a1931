"""A stored world book is parsed with the cyclic garbage collector paused (its objects all stay
alive; collections on the way free nothing), and the collector is left as it was: on again after
the parse, still off when the start-up hold had turned it off."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

import tavern_tui.formats.worldinfo as worldinfo
from tavern_tui.service import Tavern


@pytest.mark.parametrize("collector_on", [True, False])
def test_the_collector_is_paused_for_a_parse_and_left_as_it_was(tavern: Tavern, corpus_dir: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                collector_on: bool) -> None:
    path = corpus_dir / "worldbooks" / "eldoria_st_staging.json"
    imported = tavern.lore.import_world_book_bytes(path.read_bytes(), path.name)
    assert imported.ok, imported.error
    seen: list[bool] = []
    parse = worldinfo.parse_world_book

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return parse(*args, **kwargs)

    monkeypatch.setattr(worldinfo, "parse_world_book", watched)
    was = gc.isenabled()
    try:
        gc.enable() if collector_on else gc.disable()
        tavern.lore.world_book(imported.id or 0, editable=False)  # a fresh service: parsed here
        assert (seen, gc.isenabled()) == ([False], collector_on)
    finally:
        gc.enable() if was else gc.disable()
