"""Markdown for chat text, where a single line break is shown as a break.

SillyTavern renders messages with showdown's `simpleLineBreaks`: each line of an action line
then a dialogue line stays on its own row. CommonMark would join them into one paragraph (a
"soft break" is a space). Here the parsed tokens are changed instead of the text: a soft break
only occurs inside paragraph-like inline content, so code fences, indented code, lists and
tables are left as they are, and a reply that streams in is treated like a stored one.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderResult
from rich.markdown import Markdown as RichMarkdown
from rich.segment import Segment
from rich.style import Style
from textual.widgets import Markdown


def break_lines(tokens: Iterable[Token]) -> None:
    """Turn every soft line break among `tokens`' inline children into a hard one (in place)."""
    for token in tokens:
        if token.type == "inline" and token.children:
            for child in token.children:
                if child.type == "softbreak":
                    child.type = "hardbreak"


def hard_breaks(md: MarkdownIt) -> None:
    """A markdown-it plugin: single line breaks in the text become hard breaks."""

    def rule(state: StateCore) -> None:
        break_lines(state.tokens)

    md.core.ruler.push("hard_breaks", rule)


def chat_parser() -> MarkdownIt:
    """The parser Textual's `Markdown` uses by default ("gfm-like"), with `hard_breaks`."""
    return MarkdownIt("gfm-like").use(hard_breaks)


class ChatMarkdown(Markdown):
    """Textual's `Markdown` widget parsing with `chat_parser` (also what a `MarkdownStream` writes):
    a reply's reasoning, which streams into its collapsed section. A reply's own text is Rich
    Markdown (`ChatRichMarkdown`; streaming, `reply_stream.StreamBody`)."""

    def __init__(self, markdown: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("parser_factory", chat_parser)
        super().__init__(markdown, **kwargs)


@cache
def rich_parser() -> MarkdownIt:
    """The parser Rich's `Markdown` builds for every instance (CommonMark with strikethrough and
    tables), built once: it keeps no state between parses."""
    return MarkdownIt().enable("strikethrough").enable("table")


class ChatRichMarkdown(RichMarkdown):
    """Rich's `Markdown` renderable with single line breaks kept (the stored messages' body).

    Rich's own `__init__` builds a new markdown-it parser each time (~1.3 ms, 15-20 % of paging
    in 20 messages); this one parses with `rich_parser` and sets the same attributes Rich's
    does (a test compares them, so a Rich release that adds one is caught), and keeps its last
    drawing (`__rich_console__`)."""

    def __init__(self, markup: str, code_theme: str = "monokai", justify: JustifyMethod | None = None,
                 style: str | Style = "none", hyperlinks: bool = True, inline_code_lexer: str | None = None,
                 inline_code_theme: str | None = None) -> None:
        self.markup = markup
        self.parsed = rich_parser().parse(markup)
        self.code_theme = code_theme
        self.justify = justify
        self.style = style
        self.hyperlinks = hyperlinks
        self.inline_code_lexer = inline_code_lexer
        self.inline_code_theme = inline_code_theme or code_theme
        break_lines(self.parsed)
        self._drawn: tuple[tuple[object, ...], list[Segment]] | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """Rich's drawing, kept for the last console and options it was drawn with: Textual draws a
        message body again on every layout pass of the transcript (a page-in redraws every box on
        it, ~0.2 ms each), and the result depends only on these (the widget's own style is applied
        to the lines after)."""
        key = (id(console), options.max_width, options.min_width, options.justify, options.overflow,
               options.no_wrap, options.ascii_only, options.legacy_windows, options.encoding, options.highlight,
               options.markup)
        drawn = self._drawn
        if drawn is None or drawn[0] != key:
            drawn = self._drawn = (key, list(console.render(_Drawing(self), options)))
        yield from drawn[1]


class _Drawing:
    """A `ChatRichMarkdown` drawn by Rich's own `Markdown.__rich_console__` (what its cache keeps)."""

    def __init__(self, markdown: ChatRichMarkdown) -> None:
        self.markdown = markdown

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        return RichMarkdown.__rich_console__(self.markdown, console, options)
