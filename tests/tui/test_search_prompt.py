"""A search hit names its playthrough's number: a branch made into its own playthrough shares
the first lines (and so the default title) of the one it came from, and the trial found their
hits drawn identically."""

from __future__ import annotations

from tavern_tui.tui.screens.search import result_prompt
from tavern_tui.views.playthroughs import SearchResultView


def _hit(playthrough_id: int, on_head: bool) -> SearchResultView:
    return SearchResultView(playthrough_id, 3, "Seraphina", "I sit up slowly. Where am I?", (4, 7), "user", "User",
                            "I sit up slowly. Where am I?", False, on_head)


def test_hits_of_a_playthrough_and_its_branch_differ_by_number() -> None:
    first, branch = result_prompt(_hit(1, True), "where"), result_prompt(_hit(2, True), "where")
    assert first.plain.split("\n")[0] == "Seraphina · #1 I sit up slowly. Where am I? · this branch"
    assert branch.plain.split("\n")[0] == "Seraphina · #2 I sit up slowly. Where am I? · this branch"
    assert first.plain.split("\n")[1] == "User: I sit up slowly. Where am I?"
