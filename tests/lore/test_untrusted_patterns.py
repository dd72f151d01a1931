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
