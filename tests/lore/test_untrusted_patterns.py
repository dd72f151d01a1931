"""A regex key from an imported file cannot hang an activation; a timeout is explained."""

from __future__ import annotations

import time
from functools import partial

from tavern_tui.lore.matching import ReferenceIndex
from tavern_tui.lore.model import SelectiveLogic

from ._util import book, context, entry, fired, reason, run

EVIL = "/(a|aa)+$/"  # exponential backtracking on "aaaa…b"
SLOW = "a" * 60 + "b"


def test_pathological_primary_key_times_out_and_says_so() -> None:
    started = time.monotonic()
    result = run(book(entry(1, [EVIL])), context(SLOW), index_factory=partial(ReferenceIndex, regex_timeout=0.01))
    assert time.monotonic() - started < 2
    decision = result.decision("book", 1)
    assert decision.reason.value == "regex_timeout" and decision.timed_out_keys == (EVIL,)
    assert "timed out" in decision.detail


def test_another_matching_key_still_fires() -> None:
    result = run(book(entry(1, [EVIL, "aaa"], match_whole_words=False)), context(SLOW),
                 index_factory=partial(ReferenceIndex, regex_timeout=0.01))
    assert fired(result) == {1}


def test_secondary_timeout_blocks_only_when_the_outcome_depends_on_it() -> None:
    factory = partial(ReferenceIndex, regex_timeout=0.01)
    depends = entry(1, ["b"], keysecondary=[EVIL], selective_logic=SelectiveLogic.NOT_ANY, match_whole_words=False)
    decided = entry(2, ["b"], keysecondary=[EVIL, "aaa"], selective_logic=SelectiveLogic.AND_ANY,
                    match_whole_words=False)
    result = run(book(depends, decided), context(SLOW), index_factory=factory)
    assert reason(result, 1) == "regex_timeout" and fired(result) == {2}


def test_hostile_keys_across_a_book_share_one_step_budget_and_the_rest_are_skipped_and_named() -> None:
    # Issue 23 item 8: 200 hostile keys, each within its own limit, once made every step take
    # 11-12 s. With a step budget of 0.05 s and 0.01 s per search, at most a handful run; the
    # others are skipped, each decision naming its key and why, and the result says so.
    from tavern_tui.lore.activation import activate
    from tavern_tui.lore.context import SourcedBook
    from tavern_tui.lore.settings import WorldInfoSettings

    keys = [f"/(a|aa)+{i}?$/" for i in range(200)]  # distinct keys, each backtracking on "aaaa…b"
    hostile = book(*(entry(i, [key]) for i, key in enumerate(keys)), entry(999, ["aaa"], match_whole_words=False))
    result = activate([SourcedBook(hostile, "global")], context(SLOW), WorldInfoSettings(),
                      index_factory=partial(ReferenceIndex, regex_timeout=0.01), regex_budget=0.05)
    assert fired(result) == {999}  # a plain key still works
    budget = result.regex_budget
    assert budget["exhausted"] is True and budget["seconds"] == 0.05
    # 0.05 s at 0.01 s a search: 5 whole timeouts and at most one cut short; every other search skipped
    # (the count is of searches: a key is asked about once per scan loop).
    assert budget["timeouts"] <= 6 and budget["skipped"] >= 200 - 6
    timeouts = [d for d in result.decisions if d.reason.value == "regex_timeout"]
    assert sorted(d.uid for d in timeouts) == list(range(200))
    skipped = [d for d in timeouts if "was skipped: the step's regex time budget was used up" in d.detail]
    assert len(skipped) >= 200 - 6 and all(d.timed_out_keys == (keys[d.uid],) for d in timeouts)
    # The next step starts with a full budget.
    again = activate([SourcedBook(hostile, "global")], context("nothing slow here"), WorldInfoSettings(),
                     index_factory=partial(ReferenceIndex, regex_timeout=0.01), regex_budget=0.05)
    assert again.regex_budget["exhausted"] is False and again.regex_budget["skipped"] == 0
