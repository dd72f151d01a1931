"""Within one pinned build (a step's preparation, a preview) the playthrough's view and MVU's
material are read once and then reused; outside a build, and after this thread appends in one,
every read sees the store as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavern_tui.engine.events import EventKind, NewEvent, Origin
from tavern_tui.engine.step import Generation
from tavern_tui.service import Tavern
from tavern_tui.service.playthroughs import PlaythroughService


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    counted: list[int] = []
    real = PlaythroughService._read_playthrough

    def counting(self: PlaythroughService, playthrough_id: int):  # noqa: ANN202
        counted.append(playthrough_id)
        return real(self, playthrough_id)

    monkeypatch.setattr(PlaythroughService, "_read_playthrough", counting)
    return counted


def _seraphina(tavern: Tavern, corpus_dir: Path) -> int:
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
    assert cid is not None
    return tavern.playthroughs.new_playthrough(cid).id


def test_a_pinned_build_reads_the_view_once_and_an_append_ends_the_reuse(tavern: Tavern, corpus_dir: Path,
                                                                          reads: list[int]) -> None:
    pid = _seraphina(tavern, corpus_dir)
    log = tavern.ctx.store.events
    reads.clear()
    tavern.playthroughs.playthrough(pid)
    tavern.playthroughs.playthrough(pid)
    assert reads == [pid, pid]  # no build: each call reads
    reads.clear()
    with tavern.one_version():
        first = tavern.playthroughs.playthrough(pid)
        again = tavern.playthroughs.playthrough(pid)
        assert again is first and reads == [pid]
        session = first.session_id
        log.append(session, [NewEvent(EventKind.USER_MESSAGE, "user", {"content": "hello"}, Origin.CUSTOMER)])
        after = tavern.playthroughs.playthrough(pid)  # this thread wrote: the build reads again
    assert reads == [pid, pid] and after.message_count == first.message_count + 1
    with tavern.one_version():  # a new build does not see the last one's reads
        tavern.playthroughs.playthrough(pid)
    assert reads == [pid, pid, pid]


def test_a_step_preparation_reads_the_view_once(tavern: Tavern, corpus_dir: Path, reads: list[int]) -> None:
    pid = _seraphina(tavern, corpus_dir)
    reads.clear()
    tavern.steps._prepare_step(pid, Generation(), "hi")
    assert reads == [pid]  # its own, MVU's initialisation and MVU's bound state share one read


def test_a_step_preparation_finds_the_books_once(tavern: Tavern, corpus_dir: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from tavern_tui.service.lore import WorldInfoService

    pid = _seraphina(tavern, corpus_dir)
    found: list[list[str]] = []
    real = WorldInfoService._effective_books

    def counting(self: WorldInfoService, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        books = real(self, *args, **kwargs)
        found.append([b.book.name for b in books])
        return books

    monkeypatch.setattr(WorldInfoService, "_effective_books", counting)
    tavern.steps._prepare_step(pid, Generation(), "hi")
    assert len(found) == 1  # MVU's material and the assembler share one read
    assert found[0] == ["Eldoria"]  # FACTS.md: Seraphina's embedded book


def test_a_step_preparation_reads_the_personas_once(tavern: Tavern, corpus_dir: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pid = _seraphina(tavern, corpus_dir)
    registry = type(tavern.persona)
    reads: list[str] = []
    real_all, real_one = registry._read_personas, registry._read_persona

    def all_read(self):  # noqa: ANN001, ANN202
        reads.append("all")
        return real_all(self)

    def one_read(self, persona):  # noqa: ANN001, ANN202
        reads.append(f"one {persona}")
        return real_one(self, persona)

    monkeypatch.setattr(registry, "_read_personas", all_read)
    monkeypatch.setattr(registry, "_read_persona", one_read)
    tavern.steps._prepare_step(pid, Generation(), "hi")
    assert reads.count("all") == 1 and len(reads) == len(set(reads))  # each read once
    outside = len(reads)
    tavern.persona.personas()
    tavern.persona.personas()
    assert reads[outside:] == ["all", "all"]  # outside a build every call reads
