"""A message's single line breaks are shown as breaks (SillyTavern renders chat messages with
showdown's `simpleLineBreaks: true`; plain CommonMark would join the lines into one paragraph).
A fresh-user trial pasted three lines and saw them shown as one."""

from __future__ import annotations

from rich.console import Console
from rich.markdown import Markdown

from tavern_tui.tui.widgets.message_box import keep_line_breaks


def shown(text: str) -> list[str]:
    console = Console(width=60, record=True, color_system=None)
    console.print(Markdown(keep_line_breaks(text)))
    return [line.rstrip() for line in console.export_text().splitlines() if line.strip()]


def test_single_breaks_are_kept_and_paragraphs_stay_paragraphs() -> None:
    assert shown("line one\nline two\nline three") == ["line one", "line two", "line three"]
    assert keep_line_breaks("a\nb\n\nc") == "a  \nb\n\nc"  # a blank line is a paragraph break already


def test_code_fences_and_texts_without_breaks_are_left_alone() -> None:
    fenced = "```\nx = 1\ny = 2\n```\nafter\nthat"
    assert keep_line_breaks(fenced) == "```\nx = 1\ny = 2\n```\nafter  \nthat"
    assert keep_line_breaks("one line") == "one line"
    assert keep_line_breaks("ends with a hard break  \nnext") == "ends with a hard break  \nnext"
