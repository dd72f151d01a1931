"""The caches behind the `prompt_build` figures (issue 16 §6): a preview reads the log at one pinned
version, folds are kept per log version and per surface list, and none of them serves a stale build."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tavern_tui.assembly.memo import SKIP, per_list, per_prefix
from tavern_tui.config import Settings
from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.engine.state import VARIABLES_PART, StagedWrites
from tavern_tui.engine.step import Generation
from tavern_tui.providers.demo import DemoProvider
from tavern_tui.service import Tavern
from tavern_tui.store.store import Store


def _msg(content: str) -> NewEvent:
    return NewEvent(EventKind.USER_MESSAGE, "user", {"content": content})


def _append_elsewhere(store: Store, session: int, text: str) -> None:
    """An append from another thread (another window or command on the same database)."""
    worker = threading.Thread(target=store.events.append, args=(session, [_msg(text)]))
    worker.start()
    worker.join()


def _tavern(db: Path) -> Tavern:
    return Tavern(Settings(db_url=f"sqlite:///{db}", max_context=32768, max_tokens=300), provider=DemoProvider(delay=0))


def _seraphina(tavern: Tavern, corpus_dir: Path) -> int:
    """A playthrough of the corpus's Seraphina card, as Ann: its id."""
    [card] = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])
    return tavern.playthroughs.new_playthrough(card.id or 0, user_name="Ann").id


def test_a_pinned_version_holds_until_the_block_ends_or_this_thread_appends(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'pin.db'}")
    try:
        log = store.events
        session = log.create_session()
        log.append(session, [_msg("one")])
        start = log.version()
        assert len(log.surface_events(session)) == 1  # read (and kept) at `start`
        with log.pinned_version() as pinned:
            assert pinned == start
            _append_elsewhere(store, session, "two")
            assert log.version() == start  # another thread's append shows at the next build
            with log.pinned_version() as inner:
                assert inner == start  # nested blocks share the outer one's
            assert len(log.surface_events(session)) == 1  # the kept surface: still the pinned version's
            log.append(session, [_msg("three")])  # this thread changes the log: read again
            after = log.version()
            assert after != start and after[0] == start[0] + 2
            assert [e.content for e in log.surface_events(session)] == ["one", "two", "three"]
        assert log.version() == after
    finally:
        store.close()


def test_the_surface_snapshot_is_one_object_per_version(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'snap.db'}")
    try:
        log = store.events
        session = log.create_session()
        log.append(session, [_msg("one")])
        first = log.surface_snapshot(session)
        assert log.surface_snapshot(session) is first and isinstance(first, tuple)
        assert log.surface_events(session) == list(first) and log.surface_events(session) is not first
        _append_elsewhere(store, session, "two")
        assert [e.content for e in log.surface_snapshot(session)] == ["one", "two"]
    finally:
        store.close()


def test_per_list_keeps_a_value_for_the_same_list_only() -> None:
    calls: list[int] = []

    def walk(items: list[int]) -> int:
        calls.append(1)
        return sum(items)

    items = [1, 2, 3]
    assert per_list(items, "test.sum", lambda: walk(items)) == 6
    assert per_list(items, "test.sum", lambda: walk(items)) == 6 and len(calls) == 1
    items.append(4)  # a longer list is another list
    assert per_list(items, "test.sum", lambda: walk(items)) == 10 and len(calls) == 2
    other = [1, 2, 3, 4]  # equal, not the same object
    assert per_list(other, "test.sum", lambda: walk(other)) == 10 and len(calls) == 3


def test_per_prefix_converts_only_what_follows_the_same_objects() -> None:
    seen: list[str] = []

    def convert(item: str) -> object:
        seen.append(item)
        return SKIP if item.startswith("-") else item.upper()

    first = ["a", "-b", "c"]
    assert per_prefix(first, "test.upper", convert) == ("A", "C") and seen == first
    grown = [*first, "d", "-e"]  # the same objects, two more
    seen.clear()
    assert per_prefix(grown, "test.upper", convert) == ("A", "C", "D") and seen == ["d", "-e"]
    changed = [grown[0], "x", *grown[2:]]  # an edit in the middle: not a prefix, converted again
    seen.clear()
    assert per_prefix(changed, "test.upper", convert) == ("A", "X", "C", "D") and seen == changed
    seen.clear()  # another key (e.g. other names to write) converts everything again
    assert per_prefix(changed, "test.upper", convert, key="other") == ("A", "X", "C", "D") and seen == changed


def test_a_pin_scope_is_one_token_per_pinned_block_and_ends_with_this_threads_append(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'scope.db'}")
    try:
        log = store.events
        session = log.create_session()
        assert log.pin_scope() is None
        with log.pinned_version():
            scope = log.pin_scope()
            with log.pinned_version():
                assert scope is not None and log.pin_scope() is scope  # nested: the outer block's
            log.append(session, [_msg("one")])
            assert log.pin_scope() is None  # this thread changed the log: nothing kept holds
        with log.pinned_version():
            assert log.pin_scope() not in (None, scope)  # a new build, a new token
        assert log.pin_scope() is None
    finally:
        store.close()


@pytest.fixture
def seraphina(tmp_path: Path, corpus_dir: Path) -> Iterator[tuple[Tavern, int]]:
    """(a tavern on tmp_path / "t.db" with the demo provider, its Seraphina playthrough's id)."""
    tavern = _tavern(tmp_path / "t.db")
    try:
        yield tavern, _seraphina(tavern, corpus_dir)
    finally:
        tavern.close()


def test_a_steps_preparation_reads_the_mvu_material_once(seraphina: tuple[Tavern, int]) -> None:
    # Initialising MVU and the head both need the card's books and macros: read once per build.
    tavern, pid = seraphina
    material = tavern.mvu.material
    reads: list[int] = []
    read = material._material
    material._material = lambda playthrough_id: reads.append(playthrough_id) or read(playthrough_id)  # type: ignore[method-assign]
    tavern.steps._prepare_step(pid, Generation(), "Hello.")
    assert reads == [pid]
    tavern.steps._prepare_step(pid, Generation(), "Hello.")  # the next build reads it again
    assert reads == [pid, pid]


def test_a_preview_after_appends_from_elsewhere_sees_them(seraphina: tuple[Tavern, int], tmp_path: Path) -> None:
    # Every cache a preview reads (surface, local variables, inbox queue, MVU head, walks over the
    # surface) is keyed by the log's version: what another window stores shows in the next preview.
    tavern, pid = seraphina
    session = tavern.playthroughs.playthrough(pid).session_id
    before = tavern.steps.preview(pid, "Hello.")
    assert tavern.variables.session_variables(session) == {}
    _append_elsewhere(tavern.store, session, "A line from another window.")
    writes = StagedWrites()
    writes.stage(VARIABLES_PART, {"local": {"set": {"mood": "calm"}}})
    commit = writes.event("operator")
    assert commit is not None
    worker = threading.Thread(target=tavern.store.events.append, args=(session, [commit]))
    worker.start()
    worker.join()
    after = tavern.steps.preview(pid, "Hello.")
    contents = [m["content"] for m in after["messages"]]
    assert contents[-2:] == ["A line from another window.", "Hello."]
    fresh = _tavern(tmp_path / "t.db")
    try:  # a service with nothing cached builds the same request
        assert fresh.steps.preview(pid, "Hello.") == after
    finally:
        fresh.close()
    assert before["messages"][-1]["content"] == "Hello."
    assert tavern.variables.session_variables(session) == {"mood": "calm"}
    mine = tavern.variables.session_variables(session)
    mine["mood"] = "changed by a build"  # a caller staging into it leaves the kept fold alone
    assert tavern.variables.session_variables(session) == {"mood": "calm"}
