"""The plan's precomputed bookkeeping and the no-match record, against the straightforward way.

Rule: `prepare.make_plan` derives per-entry and per-plan data once (decision templates, key
ids, positions per (book, uid), owners of each key per shape), and a step's trace record lists
the entries whose keys did not match (`ActivationResult.no_match_uids`, built without making
their decisions). On generated books (duplicate uids, blank and macro keys, groups, timed
entries, decorators, extra sources, odd placement values, two books interleaved by order) each
must equal what the plain per-entry computation gives, and FastIndex must decide as
ReferenceIndex does.
"""

from __future__ import annotations

import random
from dataclasses import MISSING, fields

import pytest

from tavern_tui.lore.activation import activate
from tavern_tui.lore.context import ActivationContext, ScanMessage, SourcedBook
from tavern_tui.lore.fastindex import FastIndex
from tavern_tui.lore.matching import IndexCache, ReferenceIndex
from tavern_tui.lore.model import Position, Role, SelectiveLogic, WorldBook, WorldInfoEntry
from tavern_tui.lore.prepare import Plan, build_plan, clear_plan_cache
from tavern_tui.lore.result import ActivationResult, Decision, Reason
from tavern_tui.lore.settings import WorldInfoSettings

_WORDS = "dragon castle river night king queen sword stone road forest fire light dark".split()
_NAMES = ["Alda", "Brin", "Cora", "Dain", "Elka", "Fenn", "Gale", "Hask", "Ivo", "Jora"]


def _entry(rng: random.Random, uid: int | str) -> WorldInfoEntry:
    keys = [rng.choice(_NAMES + _WORDS) if rng.random() < 0.15 else f"rare{rng.randint(0, 300)}"
            for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.1:
        keys.append(rng.choice(["", "  ", "{{char}}", "<USER>", "/dr[a-z]gon/i", "/\\bk[a-z]+g\\b/"]))
    if rng.random() < 0.05:
        keys = [""]
    secondary = [rng.choice(_WORDS + ["", "{{user}}"]) for _ in range(rng.choice([0, 0, 0, 1, 2]))]
    content = " ".join(rng.choice(_WORDS + _NAMES) for _ in range(rng.randint(0, 6)))
    if rng.random() < 0.05:
        content = rng.choice(["@@activate\n", "@@dont_activate\n", "@@@x\n"]) + content
    if rng.random() < 0.1:
        content += " {{char}} meets <USER>"
    return WorldInfoEntry(
        uid=uid, key=keys, keysecondary=secondary, content=content, comment=f"entry {uid}",
        selective=rng.random() < 0.9, selective_logic=rng.choice(list(SelectiveLogic)),
        order=rng.choice([100, 100.0, 5, 50, 200]),
        position=rng.choice([Position.BEFORE_CHAR, 0, Position.AT_DEPTH, 1]),
        depth=rng.choice([4, 4, 0, 2]), role=rng.choice([Role.SYSTEM, Role.USER, 2]),
        disable=rng.random() < 0.03, constant=rng.random() < 0.03, ignore_budget=rng.random() < 0.05,
        prevent_recursion=rng.random() < 0.1, exclude_recursion=rng.random() < 0.05,
        delay_until_recursion=rng.choice([0] * 15 + [1, 2]), group=rng.choice([""] * 8 + ["g1", "g1, g2", "g2 ,g3"]),
        scan_depth=rng.choice([None] * 6 + [1, 3]), case_sensitive=rng.choice([None, None, True]),
        match_whole_words=rng.choice([None, None, False]), match_scenario=rng.random() < 0.05,
        sticky=rng.choice([None] * 10 + [2]), cooldown=rng.choice([None] * 10 + [1]),
        delay=rng.choice([None] * 12 + [1]),
        triggers=rng.choice([[]] * 12 + [["continue"]]), use_probability=rng.random() < 0.9,
        probability=rng.choice([100, 100, 50]),
    )


def _books(seed: int) -> list[SourcedBook]:
    rng = random.Random(seed)
    first = WorldBook("first", [_entry(rng, uid) for uid in range(120)])
    first.entries.append(_entry(rng, 7))  # a uid twice in one book
    second = WorldBook("second", [_entry(rng, f"s{uid}") for uid in range(80)], scan_depth=2)
    return [SourcedBook(first, "global"), SourcedBook(second, "character")]


def _context(seed: int) -> ActivationContext:
    rng = random.Random(seed + 1000)
    messages = [ScanMessage(rng.choice(["User", "Alice"]),
                            " ".join(rng.choice(_WORDS + _NAMES + ["the", "a"]) for _ in range(rng.randint(3, 12))), i)
                for i in range(12)]
    return ActivationContext(messages=messages, input="Alda and the dragon", user_name="User", char_name="Alice",
                             scenario="the river at night")


_SETTINGS = WorldInfoSettings(depth=4, max_recursion_steps=3, recursive=True, use_group_scoring=True)


def _naive_no_match(result: ActivationResult) -> dict[str, list[int | str]]:
    out: dict[str, list[int | str]] = {}
    for decision in result.decisions:
        if decision.reason is Reason.NO_MATCH:
            out.setdefault(decision.book, []).append(decision.uid)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_no_match_record_and_decisions_equal_the_plain_ones(seed: int) -> None:
    books, ctx = _books(seed), _context(seed)
    clear_plan_cache()
    fast = activate(books, ctx, _SETTINGS, rng=lambda: 40.0, index_factory=IndexCache(FastIndex))
    record = fast.no_match_uids()
    ref = activate(books, ctx, _SETTINGS, rng=lambda: 40.0, index_factory=ReferenceIndex)
    assert [d.to_json() for d in fast.decisions] == [d.to_json() for d in ref.decisions]
    assert record == _naive_no_match(fast) == ref.no_match_uids()
    assert len(record) == 2 and all(record.values())  # both books have misses: the test reads two runs


def test_no_match_record_of_a_later_step_with_timed_state() -> None:
    books, ctx = _books(11), _context(11)
    factory = IndexCache(FastIndex)
    first = activate(books, ctx, _SETTINGS, rng=lambda: 40.0, index_factory=factory)
    later = ActivationContext(messages=[*ctx.messages, ScanMessage("User", "Cora by the castle", 12)],
                              input="Brin", user_name="User", char_name="Alice",
                              timed_state=first.new_timed_state)
    fast = activate(books, later, _SETTINGS, rng=lambda: 40.0, index_factory=factory)
    ref = activate(books, later, _SETTINGS, rng=lambda: 40.0, index_factory=ReferenceIndex)
    assert [d.to_json() for d in fast.decisions] == [d.to_json() for d in ref.decisions]
    assert fast.no_match_uids() == _naive_no_match(fast) == ref.no_match_uids()


_DEFAULTS = {f.name: f.default for f in fields(Decision) if f.default is not MISSING}


def _plain_template(entry: WorldInfoEntry, book: str) -> dict:
    template = {"book": book, "uid": entry.uid, "comment": entry.comment}
    for name in ("position", "depth", "role", "order"):
        value, default = getattr(entry, name), _DEFAULTS[name]
        if not (value is default or (type(value) is type(default) and value == default)):
            template[name] = value
    return template


@pytest.mark.parametrize("seed", range(3))
def test_plan_bookkeeping_equals_the_per_entry_computation(seed: int) -> None:
    clear_plan_cache()
    plan: Plan = build_plan(_books(seed), _context(seed), _SETTINGS, ReferenceIndex)
    entries = plan.entries
    for p in entries:
        template = _plain_template(p.entry, p.book)
        assert p.template == template
        assert [(k, type(v)) for k, v in p.template.items()] == [(k, type(v)) for k, v in template.items()]
        assert list(p.keyed) == [(t, k) for t, k in p.primary if k is not None]
        ids = [k for _, k in [*p.primary, *p.secondary] if k is not None]
        ids += [k for k in [*p.raw_primary, *p.raw_secondary] if k is not None]
        assert p.key_ids == tuple(dict.fromkeys(ids))
        assert set(p.key_ids) <= plan.shape_ids[p.shape]
        assert p.same_pos == tuple(q.pos for q in entries if q.key == p.key)
    assert plan.entry_keys == [p.key for p in entries]
    assert plan.key_pos == {p.key: p.same_pos for p in entries}
    assert plan.complex == [p.pos for p in entries if not p.simple]
    assert plan.by_key == {p.key: p.entry for p in entries}
    assert plan.delaying == {p.key: p.entry for p in entries if p.entry.delay}
    assert plan.delay_levels == tuple(sorted({p.delay_level for p in entries if p.delay_level}))
    assert plan.timing_keys == {p.key for p in entries if p.entry.sticky or p.entry.cooldown}
    assert (plan.ignoring_budget, plan.preventing, plan.grouping) == (
        any(p.entry.ignore_budget for p in entries), any(p.entry.prevent_recursion for p in entries),
        any(p.group_names for p in entries))
    simple = [p for p in entries if p.simple]
    assert plan.simple == {shape: [p for p in simple if p.shape is shape] for shape in plan.simple}
    assert plan.simple_pos == {shape: frozenset(p.pos for p in group) for shape, group in plan.simple.items()}
    for shape, (one, many) in plan.owner_pos.items():
        wanted: dict[int, list[int]] = {}
        for p in plan.simple[shape]:
            for k in dict.fromkeys(k for _, k in p.primary if k is not None):
                wanted.setdefault(k, []).append(p.pos)
        assert one == {k: pos[0] for k, pos in wanted.items() if len(pos) == 1}
        assert many == {k: tuple(pos) for k, pos in wanted.items() if len(pos) > 1}
