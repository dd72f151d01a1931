"""The composed service: `playthroughs.resolve` and `playthroughs.apply_selection` (the workflows
`tavern chat` and the home screen share), and how `Tavern` composes its per-area services."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tavern_tui.errors import NotFound, TavernError
from tavern_tui.service import Tavern
from tavern_tui.service.lore import WorldInfoService
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.timeline import TimelineService

SERVICE_DIR = Path(__file__).resolve().parents[2] / "tavern_tui" / "service"


def _import(tavern: Tavern, corpus_dir: Path) -> dict[str, int]:
    """Name → id of the corpus cards, one world book and one preset, by kind ("book" for the book)."""
    results = tavern.imports.import_paths([corpus_dir / "cards", corpus_dir / "worldbooks" / "eldoria_st_staging.json",
                                           corpus_dir / "presets" / "st_openai_default_staging.json"])
    assert all(r.ok for r in results)
    ids = {r.name: r.id or 0 for r in results}
    book = next(r for r in results if r.kind == "world_book")
    return {**ids, "book": book.id or 0}


def test_resolve_picks_the_latest_playthrough_or_starts_one(tavern: Tavern, corpus_dir: Path) -> None:
    ids = _import(tavern, corpus_dir)
    notes: list[str] = []
    started = tavern.playthroughs.resolve("seraphina", notes=notes)
    assert started.character_id == ids["Seraphina"]
    assert notes == [f"started playthrough {started.id} with Seraphina"]
    again: list[str] = []
    assert tavern.playthroughs.resolve(ids["Seraphina"], notes=again).id == started.id  # by id: the latest
    assert again == []
    fresh = tavern.playthroughs.resolve("Seraphina", new=True)
    assert fresh.id != started.id and fresh.character_id == ids["Seraphina"]
    assert tavern.playthroughs.resolve("Seraphina").id == fresh.id  # the newest is the latest now
    assert tavern.playthroughs.resolve("Seraphina", playthrough=started.id).id == started.id
    assert [p.id for p in tavern.playthroughs.playthroughs(ids["Seraphina"])] == [fresh.id, started.id]


def test_resolve_refuses_another_characters_playthrough_and_unknown_names(tavern: Tavern, corpus_dir: Path) -> None:
    _import(tavern, corpus_dir)
    theirs = tavern.playthroughs.resolve("Skynet")
    with pytest.raises(TavernError, match=f"playthrough {theirs.id} belongs to Skynet, not Seraphina"):
        tavern.playthroughs.resolve("Seraphina", playthrough=theirs.id)
    with pytest.raises(NotFound, match="no character named 'Nobody'"):
        tavern.playthroughs.resolve("Nobody")
    assert [p.character_name for p in tavern.playthroughs.playthroughs()] == ["Skynet"]


def test_apply_selection_binds_and_says_what_it_bound(tavern: Tavern, corpus_dir: Path) -> None:
    ids = _import(tavern, corpus_dir)
    pid = tavern.playthroughs.resolve("Seraphina").id
    book_name = tavern.lore.find_world_book(str(ids["book"])).name
    notes = tavern.playthroughs.apply_selection(pid, preset="st_openai_default_staging", lore=[book_name],
                                                strategy="compat")
    assert notes == [f"bound preset st_openai_default_staging to playthrough {pid} (remembered)",
                     f"bound world book {book_name} to playthrough {pid} (remembered)",
                     f"applied strategy compat v1 to playthrough {pid} (remembered)"]
    view = tavern.playthroughs.playthrough(pid)
    assert (view.preset_id, view.strategy) == (ids["st_openai_default_staging"], "compat")
    assert [b.bindings for b in tavern.lore.world_books() if b.name == book_name] == [(f"playthrough:{pid}",)]
    assert tavern.playthroughs.apply_selection(pid) == []


def test_apply_selection_with_an_unknown_name_binds_nothing(tavern: Tavern, corpus_dir: Path) -> None:
    ids = _import(tavern, corpus_dir)
    pid = tavern.playthroughs.resolve("Seraphina").id
    before = tavern.playthroughs.playthrough(pid)
    with pytest.raises(NotFound, match="unknown strategy 'nope'"):
        tavern.playthroughs.apply_selection(pid, preset="st_openai_default_staging", strategy="nope")
    after = tavern.playthroughs.playthrough(pid)
    assert (after.preset_id, after.strategy) == (before.preset_id, before.strategy) == (None, before.strategy)
    assert ids["st_openai_default_staging"] > 0


def test_the_facade_composes_one_service_per_area_that_share_one_context(tavern: Tavern) -> None:
    assert isinstance(tavern.playthroughs, PlaythroughService)
    assert isinstance(tavern.lore, WorldInfoService) and isinstance(tavern.timeline, TimelineService)
    # Each service holds the services it calls, not the facade: the same objects the facade exposes.
    assert tavern.steps.timeline is tavern.timeline and tavern.traces.timeline is tavern.timeline
    assert tavern.timeline.playthroughs is tavern.playthroughs and tavern.steps.lore is tavern.lore
    services = [tavern.library, tavern.persona, tavern.lore, tavern.presets, tavern.strategies, tavern.playthroughs,
                tavern.timeline, tavern.steps, tavern.traces, tavern.chat_files]
    assert {id(s.ctx) for s in services} == {id(tavern.ctx)}
    assert tavern.ctx.store is tavern.store and tavern.ctx.provider is tavern.provider


def test_no_service_module_imports_the_facade() -> None:
    for path in sorted(SERVICE_DIR.glob("*.py")):
        if path.name in ("facade.py", "__init__.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not imported & {"tavern_tui.service", "tavern_tui.service.facade"}, path.name


def test_check_selection_looks_up_without_binding(tavern: Tavern, corpus_dir: Path) -> None:
    ids = _import(tavern, corpus_dir)
    pid = tavern.playthroughs.resolve("Seraphina").id
    book_name = tavern.lore.find_world_book(str(ids["book"])).name
    preset, books = tavern.playthroughs.check_selection(preset="st_openai_default_staging", lore=[book_name],
                                                        strategy="compat")
    assert (preset.id if preset else None, [b.id for b in books]) == (ids["st_openai_default_staging"], [ids["book"]])
    assert tavern.playthroughs.playthrough(pid).preset_id is None
    assert [b.bindings for b in tavern.lore.world_books()] == [()]
    with pytest.raises(NotFound, match="no preset named 'missing'"):
        tavern.playthroughs.check_selection(preset="missing")
