"""The message surface: derive_messages, inspect/page, origin helpers (seed 000 §1, seed 001)."""

from __future__ import annotations

import pytest

from tavern_tui.engine.events import EventKind, NewEvent, Origin, effective_origin, is_agent, is_customer, parse_origin
from tavern_tui.engine.log import (
    SYSTEM_PROMPT_SOURCE,
    SurfaceFold,
    derive_messages,
    fold_surface,
    inspect,
    page,
    replacement_event,
    surface_of,
)
from tavern_tui.engine.memory import MemoryLog
from tavern_tui.errors import OriginError


def _log_with(*events: NewEvent) -> tuple[MemoryLog, int]:
    log = MemoryLog()
    sid = log.create_session()
    log.append(sid, list(events))
    return log, sid


def test_surface_keeps_only_message_kinds_and_the_newest_system_section_first() -> None:
    log, sid = _log_with(
        NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant", {"content": "greeting"}, Origin.ENGINE, "opening"),
        NewEvent(EventKind.INBOX_SPLICED, "user", {"op": "insert", "messages": [{"role": "user", "content": "hi"}]}),
        NewEvent(EventKind.INBOX_SPLICED, None, {"op": "claim", "count": 1}),
        NewEvent(EventKind.SYSTEM_MESSAGE, "system", {"content": "old system"}, source=SYSTEM_PROMPT_SOURCE),
        NewEvent(EventKind.USER_MESSAGE, "user", {"content": "hi"}),
        NewEvent(EventKind.REQUEST_HEADER, None, {"model": "m"}),
        NewEvent(EventKind.STREAM_CHECKPOINT, None, {"content": "Hel"}),
        NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant", {"content": "Hello"}),
        NewEvent(EventKind.SYSTEM_MESSAGE, "system", {"content": "new system"}, source=SYSTEM_PROMPT_SOURCE),
        NewEvent(EventKind.USER_MESSAGE, "user", {"content": "again"}),
        NewEvent(EventKind.ASSISTANT_ATTEMPT, "assistant", {"content": "", "error": {"category": "server"}}),
        NewEvent(EventKind.ASSISTANT_ATTEMPT, "assistant", {"content": "Partial", "cancelled": True}),
    )
    surface = derive_messages(log, sid)
    assert [(m.role, m.content) for m in surface] == [
        ("system", "new system"), ("assistant", "greeting"), ("user", "hi"), ("assistant", "Hello"),
        ("user", "again"), ("assistant", "Partial")]
    assert surface[-1].partial and not surface[3].partial
    assert surface[0].ref == (sid, 9)
    assert [m.to_request() for m in surface[1:3]] == [{"role": "assistant", "content": "greeting"},
                                                       {"role": "user", "content": "hi"}]


def test_a_fold_goes_on_from_any_point_as_deriving_the_whole_surface_again() -> None:
    # The step derives its history at the claim and goes on from it after the opening stored its
    # system section and input: at every split, the same surface as one derivation of it all.
    log, sid = _log_with(
        NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant", {"content": "greeting"}, Origin.ENGINE, "opening"),
        NewEvent(EventKind.SYSTEM_MESSAGE, "system", {"content": "s1"}, source=SYSTEM_PROMPT_SOURCE),
        NewEvent(EventKind.USER_MESSAGE, "user", {"content": "hi"}),
        NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant", {"content": "Hello"}),
        NewEvent(EventKind.USER_MESSAGE, "user", {"content": "typo"}),
    )
    log.append(sid, [replacement_event([(sid, 5)], {"role": "user", "content": "fixed"}),
                     NewEvent(EventKind.ASSISTANT_ATTEMPT, "assistant", {"content": "", "error": {"category": "x"}}),
                     NewEvent(EventKind.SYSTEM_MESSAGE, "system", {"content": "s2"}, source=SYSTEM_PROMPT_SOURCE),
                     NewEvent(EventKind.USER_MESSAGE, "user", {"content": "again"})])
    log.append(sid, [replacement_event([(sid, 3), (sid, 4)], None)])
    events = log.surface_events(sid)
    whole = surface_of(events)
    assert [m.content for m in whole] == ["s2", "greeting", "fixed", "again"]
    for split in range(len(events) + 1):
        first = SurfaceFold().add(events[:split])
        before = first.result()
        assert first.copy().add(events[split:]).result() == whole
        assert first.result() == before  # the copy went on; the fold it came from did not move


def test_a_surface_that_extends_one_folded_before_is_folded_from_there_and_equals_a_whole_fold() -> None:
    # `fold_surface` goes on from a cached fold whose events are the same objects: the result must
    # be what a fold of everything gives, and what a caller adds to its fold must not reach the cache.
    log, sid = _log_with(*(NewEvent(EventKind.USER_MESSAGE if i % 2 else EventKind.ASSISTANT_MESSAGE,
                                    "user" if i % 2 else "assistant", {"content": f"m{i}"}) for i in range(1, 301)))
    before = log.surface_events(sid)
    assert [m.content for m in fold_surface(before).result()] == [f"m{i}" for i in range(1, 301)]
    log.append(sid, [replacement_event([(sid, 2), (sid, 3)], {"role": "assistant", "content": "merged"}),
                     NewEvent(EventKind.USER_MESSAGE, "user", {"content": "new"})])
    after = log.surface_events(sid)
    assert after[:300] == before and all(a is b for a, b in zip(after, before, strict=False))
    folded = fold_surface(after)
    assert folded.result() == SurfaceFold().add(after).result()
    assert [m.content for m in folded.result()][:3] == ["m1", "merged", "m4"]
    folded.messages.clear()  # the caller's fold is its own
    assert fold_surface(after).result() == SurfaceFold().add(after).result()
    assert fold_surface(before).result() == SurfaceFold().add(before).result()


def test_through_seq_pins_an_earlier_surface() -> None:
    log, sid = _log_with(*(NewEvent(EventKind.USER_MESSAGE, "user", {"content": str(i)}) for i in range(1, 6)))
    assert [m.content for m in derive_messages(log, sid, through_seq=3)] == ["1", "2", "3"]


def test_page_reads_a_stable_bounded_slice_of_a_snapshot() -> None:
    log, sid = _log_with(*(NewEvent(EventKind.USER_MESSAGE, "user", {"content": str(i)}) for i in range(1, 11)))
    snap = inspect(log, sid)
    assert snap.through_seq == 10
    log.append(sid, [NewEvent(EventKind.USER_MESSAGE, "user", {"content": "late"})])
    last = page(log, snap, offset=-3, limit=3)
    assert (last.offset, last.total, [m.content for m in last.messages]) == (7, 10, ["8", "9", "10"])
    first = page(log, snap, offset=0, limit=4)
    assert [m.content for m in first.messages] == ["1", "2", "3", "4"]
    beyond = page(log, snap, offset=50, limit=4)
    assert beyond.messages == [] and beyond.offset == 10


@pytest.mark.parametrize(("role", "origin", "person", "model"), [
    ("user", None, True, False),
    ("user", "customer", True, False),
    ("user", "agent", False, False),  # impersonation: a user line the model wrote
    ("user", "engine", False, False),  # context delivered as a user message
    ("assistant", None, False, True),
    ("assistant", "engine", False, False),  # the greeting
    ("assistant", "operator", False, False),  # a reply the person rewrote
])
def test_origin_helpers_follow_seed_001(role: str, origin: str | None, person: bool, model: bool) -> None:
    assert is_customer(role, origin) is person
    assert is_agent(role, origin) is model


def test_origin_absent_means_natural_producer_and_unknown_is_refused() -> None:
    assert effective_origin("user", None) is Origin.CUSTOMER
    assert effective_origin("assistant", "") is Origin.AGENT
    assert effective_origin("assistant", "engine") is Origin.ENGINE
    assert parse_origin(" Operator ") is Origin.OPERATOR
    with pytest.raises(OriginError) as info:
        parse_origin("human")
    assert "'human'" in str(info.value) and "customer, agent, engine, operator" in str(info.value)


def test_canonical_json_writes_non_finite_numbers_as_null_as_javascript_does() -> None:
    # A SillyTavern chat may hold `1e999` (JS reads Infinity; JSON.stringify writes null). The log's
    # text must stay valid JSON: SQLite's json functions (the search trigger) refuse `Infinity`.
    import json as _json

    from tavern_tui.engine.events import canonical_json

    text = canonical_json({"b": [float("inf"), {"c": float("nan")}], "a": -float("inf"), "d": 1.5})
    assert text == '{"a":null,"b":[null,{"c":null}],"d":1.5}'
    assert _json.loads(text, parse_constant=lambda name: pytest.fail(f"non-JSON token {name}"))
