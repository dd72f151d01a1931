"""Buckets by position, in SillyTavern's order (digest §b.5.8), and scan order across books."""

from __future__ import annotations

from tavern_tui.lore.context import SourcedBook
from tavern_tui.lore.model import Position, Role
from tavern_tui.lore.settings import WorldInfoSettings

from ._util import book, entry, run


def constant(uid: str, order: int, position: Position, **fields: object):
    return entry(uid, [], content=uid, constant=True, order=order, position=position, **fields)


def test_before_and_after_are_joined_in_ascending_order() -> None:
    result = run(book(constant("o5", 5, Position.BEFORE_CHAR), constant("o1", 1, Position.BEFORE_CHAR),
                      constant("o3", 3, Position.BEFORE_CHAR), constant("a9", 9, Position.AFTER_CHAR),
                      constant("a2", 2, Position.AFTER_CHAR)))
    assert result.buckets.before == "o1\no3\no5"
    assert result.buckets.after == "a2\na9"


def test_equal_order_keeps_activation_order_reversed_by_the_prepend() -> None:
    # Sorted by order (stable: activation order), each prepended: later activations come first.
    result = run(book(constant("first", 7, Position.BEFORE_CHAR), constant("second", 7, Position.BEFORE_CHAR)))
    assert [a.uid for a in result.activated] == ["first", "second"]
    assert result.buckets.before == "second\nfirst"


def test_authors_note_and_example_buckets_are_ascending_lists() -> None:
    result = run(book(constant("t20", 20, Position.AN_TOP), constant("t10", 10, Position.AN_TOP),
                      constant("b5", 5, Position.AN_BOTTOM), constant("e2", 2, Position.EM_TOP),
                      constant("e1", 1, Position.EM_TOP), constant("f3", 3, Position.EM_BOTTOM)))
    b = result.buckets
    assert (b.an_top, b.an_bottom, b.examples_top, b.examples_bottom) == (["t10", "t20"], ["b5"], ["e1", "e2"], ["f3"])


def test_at_depth_entries_are_grouped_by_depth_and_role() -> None:
    result = run(book(
        constant("d10", 10, Position.AT_DEPTH, depth=4),
        constant("d20", 20, Position.AT_DEPTH, depth=4),
        constant("u15", 15, Position.AT_DEPTH, depth=2, role=Role.USER),
        constant("a12", 12, Position.AT_DEPTH, depth=4, role=Role.ASSISTANT),
    ))
    at = result.buckets.at_depth
    assert list(at) == [(4, Role.SYSTEM), (2, Role.USER), (4, Role.ASSISTANT)]  # first seen from the top order
    assert at[(4, Role.SYSTEM)] == "d10\nd20" and at[(2, Role.USER)] == "u15" and at[(4, Role.ASSISTANT)] == "a12"


def test_outlets_are_joined_highest_order_first() -> None:
    result = run(book(constant("w1", 1, Position.OUTLET, outlet_name="weather"),
                      constant("w9", 9, Position.OUTLET, outlet_name="weather"),
                      constant("w5", 5, Position.OUTLET, outlet_name="weather"),
                      constant("m1", 1, Position.OUTLET, outlet_name="Mood"),
                      constant("nameless", 3, Position.OUTLET)))
    assert result.buckets.outlets == {"weather": "w9\nw5\nw1", "Mood": "m1"}
    assert "nameless" in {a.uid for a in result.activated}  # activated, just not emitted


def test_empty_content_is_activated_but_not_emitted() -> None:
    result = run(book(entry(1, [], content="", constant=True), constant("x", 1, Position.BEFORE_CHAR)))
    assert {a.uid for a in result.activated} == {1, "x"} and result.buckets.before == "x"


def _scan_order(result) -> list[str]:
    return [f"{d.book}:{d.uid}" for d in result.decisions]


def _sources():
    return [
        SourcedBook(book(entry("c10", [], order=10), entry("c50", [], order=50), name="char"), "character"),
        SourcedBook(book(entry("g30", [], order=30), entry("g40", [], order=40), name="global"), "global"),
        SourcedBook(book(entry("p2", [], order=2), name="persona"), "persona"),
        SourcedBook(book(entry("h1", [], order=1), name="chat"), "chat"),
    ]


def test_scan_order_chat_then_persona_then_character_first_by_default() -> None:
    result = run(_sources())
    assert _scan_order(result) == ["chat:h1", "persona:p2", "char:c50", "char:c10", "global:g40", "global:g30"]


def test_scan_order_global_first_and_evenly() -> None:
    assert _scan_order(run(_sources(), settings=WorldInfoSettings(character_strategy=2))) == [
        "chat:h1", "persona:p2", "global:g40", "global:g30", "char:c50", "char:c10"]
    assert _scan_order(run(_sources(), settings=WorldInfoSettings(character_strategy=0))) == [
        "chat:h1", "persona:p2", "char:c50", "global:g40", "global:g30", "char:c10"]


def test_a_book_in_several_sources_is_scanned_once_under_the_global_one() -> None:
    shared = book(entry("s", [], order=1), name="shared")
    result = run([SourcedBook(shared, "chat"), SourcedBook(shared, "global"), SourcedBook(shared, "character")])
    assert _scan_order(result) == ["shared:s"]
    assert result.activated == [] and result.decisions[0].reason.value == "no_keys"


def test_bare_books_count_as_global() -> None:
    result = run([book(entry("g", [], order=5), name="bare"),
                  SourcedBook(book(entry("c", [], order=1), name="char"), "character")])
    assert _scan_order(result) == ["char:c", "bare:g"]
