"""Display text of a message after its display scripts: the HTML as readable text, with each scripted page folded.

A card's display script may draw a whole HTML page (a status bar) that its own `<script>` fills from the
variables at run time (JS-Slash-Runner runs it in an iframe). A terminal runs no page script, so the page's
text is its static defaults (好感度 0, 09:00), often taller than the screen. Such a page becomes a *panel*:
one marker line, then its readable text, then a closing marker, so the transcript can show the line alone
(expandable) under the message's own words and ctrl+g stays the place for the live state. Other consumers
(`tavern show`) read the same text as plain lines.

A card may also carry a plain-text variant of its status bar, usually disabled (e.g. "状态栏-纯文本", whose
`{{get_message_variable::…}}` macros read the message's variables). We honour `disabled` as SillyTavern does
and do not switch variants: the folded page line points at ctrl+g, which shows the live state.

Static pages (no `<script>`) and script snippets outside a page are converted as before, the latter with
`SCRIPTED_PAGE_NOTE` before them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

from tavern_tui.scripts.html_text import html_to_text

SCRIPTED_PAGE_NOTE = ("(a page script fills in this panel and a terminal does not run it, so its values may be the "
                      "page's defaults: ctrl+g shows the live state)")
PANEL_MARK = "\u2063"
"""INVISIBLE SEPARATOR: a line starting with it (and more text) opens a panel, a line of it alone closes it."""

_PAGE_START = re.compile(r"<!doctype|<html|<script", re.IGNORECASE)
_DOC_START = re.compile(r"<!doctype|<html[\s>]", re.IGNORECASE)
_DOC_END = re.compile(r"</html\s*>", re.IGNORECASE)
_FENCE_OPEN = re.compile(r"(?:^|\n)[ \t]*(```|~~~)[^\n`]*\s*$")
_FENCE_CLOSE = re.compile(r"\s*(```|~~~)[ \t]*(?=\n|$)")  # used with match(): anchored at pos


@dataclass(frozen=True)
class Part:
    """A piece of display text: the message's own text (`title` ""), or a folded panel (its line, its text)."""

    text: str
    title: str = ""

    @property
    def is_panel(self) -> bool:
        """Whether this part is a folded page."""
        return bool(self.title)


class _Title(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.inside = False
        self.title = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.inside = tag == "title" and not self.title

    def handle_endtag(self, tag: str) -> None:
        self.inside = False

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.title += data


def page_title(page: str) -> str:
    """The `<title>` of an HTML page, whitespace collapsed ("" when it has none)."""
    parser = _Title()
    parser.feed(page[:200_000])
    return " ".join(parser.title.split())


def panel_line(title: str) -> str:
    """The one line a folded page shows: "[status panel 角色状态: ctrl+g shows the live state]"."""
    name = f"status panel {title}" if title else "status panel"
    return f"[{name}: ctrl+g shows the live state]"


def _note_page_script(text: str) -> str:
    # A script snippet outside a whole page: its text stays, with the note before it.
    if "<script" not in text.lower():
        return text
    start = _PAGE_START.search(text)
    at = start.start() if start else 0
    before = text[:at].rstrip()
    if before.endswith("```"):  # JS-Slash-Runner renders a fenced page as its iframe: the note goes before the fence
        at = len(before) - 3
        return f"{text[:at]}{SCRIPTED_PAGE_NOTE}\n\n{text[at:]}"
    return f"{text[:at]}<p>{SCRIPTED_PAGE_NOTE}</p>{text[at:]}"


def _scripted_pages(text: str) -> list[tuple[int, int, str]]:
    """(start, end, page) of each whole HTML page that carries a `<script>`, its fence included."""
    found, pos = [], 0
    while (start := _DOC_START.search(text, pos)) is not None:
        end_match = _DOC_END.search(text, start.start())
        end = end_match.end() if end_match else len(text)
        page = text[start.start():end]
        outer_start, outer_end = start.start(), end
        fence = _FENCE_OPEN.search(text, 0, start.start())
        if fence is not None:
            closing = _FENCE_CLOSE.match(text, end)
            if closing is not None and closing.group(1) == fence.group(1):
                outer_start, outer_end = fence.start(), closing.end()
        if "<script" in page.lower():
            found.append((outer_start, outer_end, page))
        pos = end
    return found


def display_text(text: str) -> str:
    """What the transcript shows for a text the display scripts changed: each scripted page folded into a
    panel (see the module docstring), the rest with its HTML as readable text (`html_to_text`)."""
    pages = _scripted_pages(text)
    if not pages:
        return html_to_text(_note_page_script(text))
    pieces, last = [], 0
    for start, end, page in pages:
        pieces.append(html_to_text(_note_page_script(text[last:start])).strip("\n"))
        body = html_to_text(page).strip("\n")
        pieces.append(f"{PANEL_MARK}{panel_line(page_title(page))}\n{SCRIPTED_PAGE_NOTE}\n{body}\n{PANEL_MARK}")
        last = end
    pieces.append(html_to_text(_note_page_script(text[last:])).strip("\n"))
    return "\n\n".join(piece for piece in pieces if piece.strip())


def split_panels(text: str) -> list[Part]:
    """`text` (as `display_text` makes it) in order: the message's own text, and each panel. A text
    without panels is one part; an unclosed panel runs to the end."""
    if PANEL_MARK not in text:
        return [Part(text)]
    parts: list[Part] = []
    lines: list[str] = []
    title = ""
    for line in text.split("\n"):
        if not title and line.startswith(PANEL_MARK) and line.strip(PANEL_MARK).strip():
            if "\n".join(lines).strip():
                parts.append(Part("\n".join(lines).strip("\n")))
            lines, title = [], line.strip(PANEL_MARK).strip()
        elif title and line == PANEL_MARK:
            parts.append(Part("\n".join(lines), title))
            lines, title = [], ""
        else:
            lines.append(line)
    if title:
        parts.append(Part("\n".join(lines), title))
    elif "\n".join(lines).strip():
        parts.append(Part("\n".join(lines).strip("\n")))
    return parts
