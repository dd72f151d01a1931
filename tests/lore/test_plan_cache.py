"""The scan plan is cached per (book objects, names, plan settings, index factory): a cached plan
must never be reused when any of them changes; lazily formatted decision details read as strings."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle

from tavern_tui.lore.matching import IndexCache, ReferenceIndex
from tavern_tui.lore.prepare import build_plan, clear_plan_cache
from tavern_tui.lore.result import Decision, Reason
from tavern_tui.lore.settings import WorldInfoSettings

from ._util import book, context, entry, fired, run


def _edited(b, uid, **changes):
    """A new book object with one entry replaced (how the service hands over an edited book)."""
    return dataclasses.replace(b, entries=[dataclasses.replace(e, **changes) if e.uid == uid else e
                                           for e in b.entries])


def test_same_book_object_reuses_the_plan() -> None:
    b = book(entry(1, ["dragon"]), entry(2, ["wyvern"]))
    factory = IndexCache(ReferenceIndex)
    settings = WorldInfoSettings()
    first = build_plan([b], context("x"), settings, factory)
    assert build_plan([b], context("other text"), settings, factory) is first
    assert build_plan([b], context("x"), settings, IndexCache(ReferenceIndex)) is not first  # another factory


def test_edited_entry_key_is_seen_by_the_next_activation() -> None:
    factory = IndexCache(ReferenceIndex)
    b = book(entry(1, ["dragon"]), entry(2, ["wyvern"]))
    ctx = context("a wyvern and a griffin")
    assert fired(run(b, ctx, index_factory=factory)) == {2}
    b2 = _edited(b, 1, key=["griffin"])
    assert fired(run(b2, ctx, index_factory=factory)) == {1, 2}
    b3 = _edited(b2, 2, key=["dragon"])
    assert fired(run(b3, ctx, index_factory=factory)) == {1}
    assert fired(run(b, ctx, index_factory=factory)) == {2}  # the old object still means the old book


def test_edited_content_and_order_are_seen() -> None:
    factory = IndexCache(ReferenceIndex)
    b = book(entry(1, ["dragon"], content="old"), entry(2, ["dragon"], content="two", order=50))
    ctx = context("dragon")
    result = run(b, ctx, index_factory=factory)
    assert [a.content for a in result.activated] == ["old", "two"]
    b2 = _edited(_edited(b, 1, content="new"), 2, order=500)
    assert [a.content for a in run(b2, ctx, index_factory=factory).activated] == ["two", "new"]


def test_entries_added_or_removed_in_place_are_seen() -> None:
    factory = IndexCache(ReferenceIndex)
    b = book(entry(1, ["dragon"]))
    ctx = context("dragon and griffin")
    assert fired(run(b, ctx, index_factory=factory)) == {1}
    b.entries.append(entry(2, ["griffin"]))
    assert fired(run(b, ctx, index_factory=factory)) == {1, 2}
    b.entries = [entry(3, ["griffin"])]
    assert fired(run(b, ctx, index_factory=factory)) == {3}


def test_clear_plan_cache_sees_an_in_place_key_edit() -> None:
    factory = IndexCache(ReferenceIndex)
    b = book(entry(1, ["dragon"]))
    ctx = context("griffin")
    assert fired(run(b, ctx, index_factory=factory)) == set()
    b.entries[0].key = ["griffin"]  # unsupported without clearing: books are immutable once handed over
    clear_plan_cache()
    assert fired(run(b, ctx, index_factory=factory)) == {1}


def test_changed_names_are_not_served_from_the_cache() -> None:
    factory = IndexCache(ReferenceIndex)
    b = book(entry(1, ["{{char}}"], content="about {{user}}"))
    result = run(b, context("Bob waves", char_name="Bob", user_name="Ann"), index_factory=factory)
    assert fired(result) == {1} and result.activated[0].content == "about Ann"
    assert fired(run(b, context("Bob waves", char_name="Carl"), index_factory=factory)) == set()
    result = run(b, context("Carl waves", char_name="Carl", user_name="Dee"), index_factory=factory)
    assert fired(result) == {1} and result.activated[0].content == "about Dee"


def test_changed_settings_are_not_served_from_the_cache() -> None:
    factory = IndexCache(ReferenceIndex)
    b = book(entry(1, ["Dragon"]), entry(2, ["fire breath"]))
    ctx = context("a dragon with firebreath")
    assert fired(run(b, ctx, WorldInfoSettings(case_sensitive=False), index_factory=factory)) == {1}
    assert fired(run(b, ctx, WorldInfoSettings(case_sensitive=True), index_factory=factory)) == set()
    ctx = context("dragons")
    assert fired(run(b, ctx, WorldInfoSettings(match_whole_words=True), index_factory=factory)) == set()
    assert fired(run(b, ctx, WorldInfoSettings(match_whole_words=False), index_factory=factory)) == {1}


def test_changed_strategy_reorders() -> None:
    from tavern_tui.lore.context import SourcedBook

    factory = IndexCache(ReferenceIndex)
    glob = book(entry(1, ["dragon"], content="global", order=10), name="g")
    char = book(entry(2, ["dragon"], content="character", order=10), name="c")
    books = [SourcedBook(glob, "global"), SourcedBook(char, "character")]
    ctx = context("dragon")
    first = run(books, ctx, WorldInfoSettings(character_strategy=1), index_factory=factory)
    second = run(books, ctx, WorldInfoSettings(character_strategy=2), index_factory=factory)
    assert [d.uid for d in first.decisions] == [2, 1]
    assert [d.uid for d in second.decisions] == [1, 2]


def test_lazy_no_match_detail_reads_as_a_string() -> None:
    b = book(entry(1, ["dragon", "wyrm"]), entry(2, ["griffin"]))
    result = run(b, context("a griffin"))
    d = result.decision("book", 1)
    assert d.reason == Reason.NO_MATCH
    assert isinstance(d.detail, str) and "['dragon', 'wyrm']" in d.detail and "the last" in d.detail
    assert json.loads(json.dumps(d.to_json()))["detail"] == d.detail
    assert pickle.loads(pickle.dumps(d)) == d
    assert copy.deepcopy(d) == d and dataclasses.replace(d) == d
    assert dataclasses.asdict(d)["detail"] == d.detail
    rebuilt = Decision(**{f.name: getattr(d, f.name) for f in dataclasses.fields(Decision)})
    assert rebuilt == d and repr(rebuilt) == repr(d)
    d.detail = "changed"
    assert d.detail == "changed"
