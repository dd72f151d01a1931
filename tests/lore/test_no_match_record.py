"""A request header's world-info record lists the entries whose keys did not match by book and
uid, in uid order; runs of consecutive integer uids are written `[first, last]` so a big book's
record stays small, and every reader counts the same entries (old plain lists read as before)."""

from __future__ import annotations

import io
from typing import Any

from tavern_tui.assembly.worldinfo import decisions_record
from tavern_tui.cli.commands.trace import _write_world_info
from tavern_tui.lore.result import compact_uids, count_uids

from ._util import book, context, entry, run


def _read(items: list[Any]) -> list[int | str]:
    """The uids a compact list stands for, read as the record's docstring says."""
    out: list[int | str] = []
    for item in items:
        out.extend(range(item[0], item[1] + 1) if isinstance(item, list) else [item])
    return out


def test_runs_of_three_or_more_consecutive_uids_become_first_last_pairs() -> None:
    uids: list[int | str] = [*range(20, 26), "lore-x", 13, 12, *range(0, 5), 31, "a"]  # scan order
    compact = compact_uids(uids)
    assert compact == [[0, 4], 12, 13, [20, 25], 31, "a", "lore-x"]
    assert sorted(map(str, _read(compact))) == sorted(map(str, uids)) and count_uids(compact) == len(uids) == 16


def test_a_header_record_of_a_big_book_lists_its_misses_in_runs() -> None:
    entries = [entry(uid, [f"key{uid}"], f"content {uid}") for uid in range(1, 201)]
    result = run(book(*entries), context("only key7 and key150 are here"))
    record = decisions_record(result)
    assert {d["uid"] for d in record["fired"]} == {7, 150}
    assert record["no_match"] == {"book": [[1, 6], [8, 149], [151, 200]]}
    assert _read(record["no_match"]["book"]) == sorted(result.no_match_uids()["book"])


def test_misses_in_a_scan_order_other_than_the_uids_still_make_runs() -> None:
    # SillyTavern scans by `order` (highest first): here the reverse of the uids.
    entries = [entry(uid, [f"key{uid}"], f"content {uid}", order=uid) for uid in range(1, 101)]
    result = run(book(*entries), context("key50"))
    assert result.no_match_uids()["book"][:3] == [100, 99, 98]
    assert decisions_record(result)["no_match"] == {"book": [[1, 49], [51, 100]]}


def test_the_trace_command_counts_compact_and_plain_records_alike() -> None:
    plain = [u for u in range(1, 201) if u not in (7, 150)]  # a header stored before runs were written
    for no_match in ({"book": [[1, 6], [8, 149], [151, 200]]}, {"book": plain}):
        out = io.StringIO()
        _write_world_info({"fired": [], "skipped": [], "no_match": no_match}, out)
        assert out.getvalue() == "world info: 198 entries had no key match\n"
