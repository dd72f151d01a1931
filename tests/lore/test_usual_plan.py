"""A usual book's plan, prepared a column at a time, against the entry-by-entry preparation.

Rule: `prepare.make_plan` prepares the entries of a book whose entries all use the global case
and whole-word settings, without group scoring, in C-level passes (`prepared.prepare_usual`,
after `keyregistry.preload_usual` looked up every key in scan order); any other book goes
entry by entry (`prepared.prepare_entry`). Both must give the same plan: the same key ids,
`Prepared` fields, shapes (one tuple per shape), indexes and tables, and so the same decisions.
The books are generated (blank, macro and regex keys, secondary keys, duplicate uids,
decorators, names in contents, groups, extra sources, scan depths, two books by order).
"""

from __future__ import annotations

import random
from dataclasses import fields
from typing import Any

import pytest

from tavern_tui.lore import prepare
from tavern_tui.lore.activation import activate
from tavern_tui.lore.context import SourcedBook
from tavern_tui.lore.fastindex import FastIndex
from tavern_tui.lore.matching import IndexCache, ReferenceIndex
from tavern_tui.lore.model import WorldBook, WorldInfoEntry
from tavern_tui.lore.prepare import Plan, build_plan, clear_plan_cache, make_plan
from tavern_tui.lore.prepared import Prepared, prepare_usual
from tavern_tui.lore.settings import WorldInfoSettings
from tests.lore.test_plan_bookkeeping import _context, _entry

_SETTINGS = WorldInfoSettings(depth=4, max_recursion_steps=3, recursive=True, case_sensitive=False,
                              match_whole_words=True)


def _usual_books(seed: int) -> list[SourcedBook]:
    """Generated books whose entries use the global case and whole-word settings (left unset, or
    set to the same values), without group scoring."""
    rng = random.Random(seed)

    def usual(uid: int | str) -> WorldInfoEntry:
        entry = _entry(rng, uid)
        entry.case_sensitive = rng.choice([None, None, False])
        entry.match_whole_words = rng.choice([None, None, True])
        entry.use_group_scoring = None
        if rng.random() < 0.05:
            entry.content = None  # type: ignore[assignment]
        if rng.random() < 0.05:
            entry.match_persona_description = True
        return entry

    first = WorldBook("first", [usual(uid) for uid in range(150)])
    first.entries.append(usual(7))  # a uid twice in one book
    second = WorldBook("second", [usual(f"s{uid}") for uid in range(90)], scan_depth=2)
    return [SourcedBook(first, "global"), SourcedBook(second, "character")]


def _one_by_one(books: list[SourcedBook], seed: int, monkeypatch: pytest.MonkeyPatch) -> Plan:
    with monkeypatch.context() as patched:
        patched.setattr(prepare, "preload_usual", lambda *args: None)
        return make_plan(books, _context(seed), _SETTINGS, ReferenceIndex)


@pytest.mark.parametrize("seed", range(8))
def test_a_usual_book_is_prepared_as_entry_by_entry(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    books = _usual_books(seed)
    columns: list[int] = []

    def counted(ordered: list[Any], *rest: Any) -> list[Prepared]:
        columns.append(len(ordered))
        return prepare_usual(ordered, *rest)

    monkeypatch.setattr(prepare, "prepare_usual", counted)
    plan = make_plan(books, _context(seed), _SETTINGS, ReferenceIndex)
    assert columns == [len(plan.entries)]  # the usual book took the column-wise way
    expected = _one_by_one(books, seed, monkeypatch)
    assert plan.keys == expected.keys  # the same ids for the same keys
    assert list(plan.indexes) == list(expected.indexes) and plan.shape_ids == expected.shape_ids
    names = [f.name for f in fields(Prepared)]
    for got, want in zip(plan.entries, expected.entries, strict=True):
        assert [getattr(got, n) for n in names] == [getattr(want, n) for n in names]
        assert [type(getattr(got, n)) for n in names] == [type(getattr(want, n)) for n in names]
        assert got.template == want.template and got.same_pos == want.same_pos
        assert any(got.shape is shape for shape in plan.indexes)  # one tuple per shape
    tables = ("by_key", "simple_pos", "complex", "delaying", "delay_levels", "ignoring_budget", "preventing",
              "grouping", "timing_keys", "owner_pos", "key_pos", "entry_keys")
    assert [getattr(plan, t) for t in tables] == [getattr(expected, t) for t in tables]
    assert {s: [p.pos for p in g] for s, g in plan.simple.items()} == {
        s: [p.pos for p in g] for s, g in expected.simple.items()}


@pytest.mark.parametrize("seed", range(4))
def test_a_usual_book_decides_as_the_reference(seed: int) -> None:
    books, ctx = _usual_books(seed), _context(seed)
    clear_plan_cache()
    assert build_plan(books, ctx, _SETTINGS, ReferenceIndex).entries  # (planned the usual way: above)
    fast = activate(books, ctx, _SETTINGS, rng=lambda: 40.0, index_factory=IndexCache(FastIndex))
    ref = activate(books, ctx, _SETTINGS, rng=lambda: 40.0, index_factory=ReferenceIndex)
    assert [d.to_json() for d in fast.decisions] == [d.to_json() for d in ref.decisions]
    assert any(d.fired for d in ref.decisions) and any(not d.fired for d in ref.decisions)
