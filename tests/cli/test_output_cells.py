"""The list commands pad names by terminal cells, not characters: a CJK character takes two cells
(Unicode East Asian Width W/F), a combining mark none, so `tavern sessions` lines up 青空 理 (the
corpus's MVU card) with the others."""

from __future__ import annotations

from datetime import UTC, datetime

from tavern_tui.cli.commands.library import _session_line
from tavern_tui.cli.output import cells, ljust
from tavern_tui.views import PlaythroughView


def test_cells_counts_wide_characters_twice_and_combining_marks_not_at_all() -> None:
    assert cells("青空 理") == 7 and cells("Seraphina") == 9 and cells("Cafe\u0301") == 4
    assert ljust("青空 理", 10) == "青空 理   " and ljust("Seraphina", 4) == "Seraphina"


def test_session_lines_line_up_whatever_the_script_of_the_name() -> None:
    when = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)
    lines = [_session_line(PlaythroughView(pid, 1, name, "User", pid, when, when, 3))
             for pid, name in ((2, "青空 理"), (3, "Coding Sensei"))]
    assert [cells(line.split(" 3 messages")[0]) for line in lines] == [cells(lines[1].split(" 3 messages")[0])] * 2
