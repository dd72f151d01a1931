"""`open_step` on the store reads the session's own events backwards from the head (issue 22:
opening a long chat must not read its whole surface), and `open_step_in` reads a surface already
read backwards too; both decide as the rule of `recover_interrupted` read forwards over the whole
surface does (`_forward`, kept here as the reference: a header opens a step, its checkpoints
follow it, a settlement closes it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.engine.log import SUMMARY_SOURCE
from tavern_tui.engine.step import open_step, recover_interrupted
from tavern_tui.engine.step.recovery import open_step_in
from tavern_tui.engine.trace import TRACE_REQUEST
from tavern_tui.store.store import Store


def _user(i: int) -> NewEvent:
    return NewEvent(EventKind.USER_MESSAGE, "user", {"content": f"u{i}"})


def _reply(i: int) -> NewEvent:
    return NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant", {"content": f"a{i}"})


def _checkpoint(text: str) -> NewEvent:
    return NewEvent(EventKind.STREAM_CHECKPOINT, None, {"content": text, "reasoning": ""})


def _forward(surface: list, session_id: int) -> tuple[list, object] | None:
    """The reference: (the open step's checkpoint refs, its last activity), or None."""
    header, checkpoints = None, []
    for event in (e for e in surface if e.session_id == session_id):
        if event.kind == EventKind.REQUEST_HEADER:
            header, checkpoints = event, []
        elif event.kind == EventKind.STREAM_CHECKPOINT:
            checkpoints.append(event)
        elif event.kind in (EventKind.ASSISTANT_MESSAGE, EventKind.ASSISTANT_ATTEMPT, EventKind.USER_MESSAGE) or (
                event.kind == EventKind.SURFACE_REPLACED and event.source == SUMMARY_SOURCE
                and event.body.get("request")):
            header, checkpoints = None, []
    if header is None:
        return None
    return [e.ref for e in checkpoints], (checkpoints[-1] if checkpoints else header).created_at


HEADER = NewEvent(EventKind.REQUEST_HEADER, None, {})
TRACE = NewEvent(TRACE_REQUEST, None, {"request": "r"})


class NoSurface:
    """The store's log with the whole-surface read refused: the bounded path must not need it."""

    def __init__(self, log: object) -> None:
        self._log = log

    def newest_own_events(self, *args: object) -> object:
        return self._log.newest_own_events(*args)  # type: ignore[attr-defined]

    def surface_events_of(self, *args: object) -> object:
        return self._log.surface_events_of(*args)  # type: ignore[attr-defined]

    def surface_events(self, *args: object) -> object:
        raise AssertionError("the whole surface was read")


def _history(n: int) -> list[NewEvent]:
    return [e for i in range(n) for e in (_user(i), _reply(i))]


CASES = {
    "settled after a long chat": _history(300),
    "open with checkpoints after a long chat": [*_history(300), _user(300), HEADER, _checkpoint("A"), _checkpoint("B")],
    "open, no checkpoint yet": [*_history(3), _user(3), HEADER],
    "open with more checkpoints than one batch": [*_history(2), _user(2), HEADER,
                                                  *[_checkpoint(str(i)) for i in range(100)]],
    "settled, trace rows after the reply": [*_history(2), _user(2), HEADER, _checkpoint("A"), _reply(2), TRACE, TRACE],
    "impersonation settles the header": [*_history(2), HEADER, _user(9)],
    "summary with a request settles": [*_history(2), HEADER, NewEvent(
        EventKind.SURFACE_REPLACED, None, {"targets": [], "message": None, "request": "r"}, source=SUMMARY_SOURCE)],
    "header only": [HEADER],
    "empty": [],
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_bounded_reading_decides_as_the_whole_surface_does(tmp_path: Path, name: str) -> None:
    store = Store(f"sqlite:///{tmp_path / 'open.db'}")
    try:
        log = store.events
        sid = log.create_session()
        if CASES[name]:
            log.append(sid, CASES[name])
        surface = log.surface_events(sid)
        expected = _forward(surface, sid)
        for found in (open_step_in(surface, sid), open_step(NoSurface(log), sid)):  # type: ignore[arg-type]
            assert (None if found is None else ([e.ref for e in found.checkpoints], found.last_activity)) == expected
    finally:
        store.close()


def test_a_fork_sees_only_its_own_events(tmp_path: Path) -> None:
    # A header open in the parent before the fork point is the parent's business, not the fork's.
    store = Store(f"sqlite:///{tmp_path / 'fork.db'}")
    try:
        log = store.events
        parent = log.create_session()
        log.append(parent, [*_history(5), _user(5), HEADER, _checkpoint("A")])
        child = log.create_session(parent_id=parent, fork_seq=log.head_seq(parent))
        assert open_step(log, parent) is not None
        assert open_step(log, child) is None
        log.append(child, [HEADER, _checkpoint("x")])
        step = open_step(NoSurface(log), child)  # type: ignore[arg-type]
        assert step is not None and [e.body["content"] for e in step.checkpoints] == ["x"]
    finally:
        store.close()


def test_recovery_on_the_store_keeps_every_checkpoint_in_order(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'recover.db'}")
    try:
        log = store.events
        sid = log.create_session()
        log.append(sid, [*_history(50), _user(50), HEADER, *[_checkpoint(f"{i},") for i in range(40)]])
        attempt = recover_interrupted(log, sid, stale_after=0)
        assert attempt is not None and attempt.body["content"] == "".join(f"{i}," for i in range(40))
        assert attempt.body["recovered"] is True
        assert open_step(log, sid) is None
    finally:
        store.close()


def test_the_inbox_of_a_chat_that_never_queued_is_read_without_its_surface(tmp_path: Path) -> None:
    from tavern_tui.engine.inbox import PendingInputProjection, insert_splice, new_message, projection

    store = Store(f"sqlite:///{tmp_path / 'inbox.db'}")
    try:
        log = store.events
        sid = log.create_session()
        log.append(sid, _history(200))
        assert projection(NoSurface(log), sid) == PendingInputProjection(sid)  # type: ignore[arg-type]
        # Once something is queued (in the parent, before a fork), the whole rule applies.
        queue = projection(log, sid)
        log.append(sid, [insert_splice(queue, [new_message("later")], "next-turn")])
        child = log.create_session(parent_id=sid, fork_seq=log.head_seq(sid))
        read = projection(log, child)
        whole = PendingInputProjection.from_events(log.surface_events(child), child)
        assert [i.content for i in read.items] == [i.content for i in whole.items] == ["later"]
    finally:
        store.close()
