"""HTML that regex scripts put into messages (status bars, cards), as readable terminal text.

SillyTavern shows such HTML rendered in the browser (a fenced block holding a whole document is
run in an iframe by JS-Slash-Runner). A terminal cannot: we keep the words and the structure —
one line per block element, `• ` per list item, ` | ` between table cells, a blank line around
headings — and drop tags, `<style>`, `<script>`, `<head>`, form controls and comments.
Parsing is Python's `html.parser` (tolerant of broken markup), never regexes over tags.
Text outside any element keeps its own line breaks (it is the message's Markdown).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_BLOCK = frozenset({"address", "article", "aside", "blockquote", "body", "center", "dd", "details", "dialog", "div",
                    "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "html", "li",
                    "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "thead", "tfoot", "tr",
                    "ul", "h1", "h2", "h3", "h4", "h5", "h6", "title", "label", "option", "progress", "meter"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6", "title"})
_SKIP = frozenset({"style", "script", "template", "noscript", "svg", "canvas", "iframe", "head", "button",
                   "select"})
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                   "wbr"})
_INLINE = frozenset({"a", "abbr", "b", "big", "cite", "code", "data", "del", "em", "font", "i", "ins", "kbd", "mark",
                     "q", "s", "small", "span", "strong", "sub", "sup", "td", "th", "time", "tt", "u", "var",
                     "caption"})
_KNOWN = _BLOCK | _INLINE | _SKIP | _VOID
# A quick look for tag names (the parser decides what they are): "<!doctype", "<div …>", "</p>".
_TAG_NAME = re.compile(r"<(!doctype|/?[a-z][a-z0-9]*)(?=[\s/>])", re.IGNORECASE)
_FENCED_HTML = re.compile(r"^(```|~~~)[^\n]*\n(\s*<(?:!doctype|html)[\s\S]*?)\n?\1[ \t]*$",
                          re.IGNORECASE | re.MULTILINE)
_SPACES = re.compile(r"[ \t\r\f\v\n]+")
MAX_HTML = 2_000_000
"""Characters converted at most; a longer text is shown as it is."""


def looks_like_html(text: str) -> bool:
    """Whether `text` holds at least one HTML element's tag (pseudo tags such as `<user>` or
    `<UpdateVariable>` do not count: a browser shows their content and so do we)."""
    if "<" not in text:
        return False
    return any(m.group(1).lower().lstrip("/") in _KNOWN or m.group(1).lower() == "!doctype"
               for m in _TAG_NAME.finditer(text))


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.line = ""
        self.depth = 0  # open elements: text inside them is HTML text (whitespace collapses)
        self.skip = 0
        self.skip_tag: list[str] = []
        self.pre = 0
        self.cells = 0
        self.after_block = False

    def _break(self, blank: bool = False) -> None:
        if self.line.strip():
            self.lines.append(self.line.rstrip())
        self.line = ""
        self.after_block = True
        if blank and self.lines and self.lines[-1] != "":
            self.lines.append("")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.skip:
            if tag == self.skip_tag[-1] and tag not in _VOID:
                self.skip += 1
            return
        if tag in _SKIP:
            self.skip, self.skip_tag = 1, [tag]
            return
        if tag not in _KNOWN:
            return  # an unknown element: the tag goes, its content stays (as a browser shows it)
        if tag not in _VOID:
            self.depth += 1
        if tag == "br":
            self._break()
        elif tag == "hr":
            self._break()
            self.lines.append("───")
        elif tag in _HEADINGS:
            self._break(blank=True)
        elif tag in _BLOCK:
            self._break()
        if tag == "li":
            self.line = "• "
        elif tag == "tr":
            self.cells = 0
        elif tag in ("td", "th"):
            if self.cells:
                self.line += " | "
            self.cells += 1
        elif tag == "pre":
            self.pre += 1
        elif tag == "img":
            alt = dict(attrs).get("alt")
            if alt:
                self.line += f"[{alt}]"

    def handle_endtag(self, tag: str) -> None:
        if self.skip:
            if tag == self.skip_tag[-1]:
                self.skip -= 1
            return
        if tag in _VOID or tag not in _KNOWN:
            return
        self.depth = max(0, self.depth - 1)
        if tag == "pre":
            self.pre = max(0, self.pre - 1)
        if tag in _HEADINGS:
            self._break(blank=True)
        elif tag in _BLOCK:
            self._break()

    def handle_data(self, data: str) -> None:
        if self.skip:
            return
        if self.depth == 0 or self.pre:
            # Text outside elements (the message's own Markdown) and <pre> keep their breaks;
            # the line break right after a block element is the one that block already ended.
            if self.after_block and not self.line and data.startswith("\n"):
                data = data[1:]
            self.after_block = False
            parts = data.split("\n")
            self.line += parts[0]
            for part in parts[1:]:
                self.lines.append(self.line.rstrip())
                self.line = part
            return
        self.after_block = False
        text = _SPACES.sub(" ", data)
        if not self.line.strip() and not self.line.endswith("• "):
            text = text.lstrip()
        self.line += text

    def result(self) -> str:
        self._break()
        out: list[str] = []
        for line in self.lines:
            if line == "" and (not out or out[-1] == ""):
                continue
            out.append(line)
        while out and out[-1] == "":
            out.pop()
        return "\n".join(out)


def html_to_text(text: str) -> str:
    """`text` with its HTML turned into readable lines (see the module docstring). A text without
    tags, or longer than `MAX_HTML`, is returned unchanged. A fenced block whose content is an
    HTML document is unwrapped first (it is a rendered frame in SillyTavern, not code)."""
    if len(text) > MAX_HTML or not looks_like_html(text):
        return text
    text = _FENCED_HTML.sub(lambda m: m.group(2), text)
    parser = _Text()
    parser.feed(text)
    parser.close()
    return parser.result()
