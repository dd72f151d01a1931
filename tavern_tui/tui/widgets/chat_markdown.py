"""Markdown for chat text, where a single line break is shown as a break.

SillyTavern renders messages with showdown's `simpleLineBreaks`: each line of an action line
then a dialogue line stays on its own row. CommonMark would join them into one paragraph (a
"soft break" is a space). Here the parsed tokens are changed instead of the text: a soft break
only occurs inside paragraph-like inline content, so code fences, indented code, lists and
tables are left as they are, and a reply that streams in is treated like a stored one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from rich.markdown import Markdown as RichMarkdown
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


class ChatRichMarkdown(RichMarkdown):
    """Rich's `Markdown` renderable with single line breaks kept (the stored messages' body)."""

    def __init__(self, markup: str, **kwargs: Any) -> None:
        super().__init__(markup, **kwargs)
        break_lines(self.parsed)
