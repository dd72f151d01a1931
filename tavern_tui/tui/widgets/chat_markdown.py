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
from textual.await_complete import AwaitComplete
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownBlock


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
    """Textual's `Markdown` widget parsing with `chat_parser` (also what a `MarkdownStream` writes).

    A message body (class `message-body`) draws its last block without a bottom margin: the
    message's own margin spaces it from the next one. This is set on the last block itself after
    each update or append, not by a `:last-child` rule: such a rule marks every block as
    order-styled, and then each block a streamed reply mounts restyles all the blocks before it
    (quadratic in the reply's length; most of the event loop at 200 tokens a second).
    """

    def __init__(self, markdown: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("parser_factory", chat_parser)
        super().__init__(markdown, **kwargs)
        self._trimmed: MarkdownBlock | None = None

    def update(self, markdown: str) -> AwaitComplete:
        """Replace the document (Textual's `Markdown.update`), then trim the last block's margin."""
        return self._then_trim(super().update(markdown))

    def append(self, markdown: str) -> AwaitComplete:
        """Append to the document (Textual's `Markdown.append`), then trim the last block's margin."""
        return self._then_trim(super().append(markdown))

    def _then_trim(self, done: AwaitComplete) -> AwaitComplete:
        async def run() -> None:
            await done
            self._trim_last_block()

        return AwaitComplete(run())

    def _trim_last_block(self) -> None:
        if not self.has_class("message-body"):
            return
        last = next((c for c in reversed(self.children) if isinstance(c, MarkdownBlock)), None)
        if last is self._trimmed:
            return
        if self._trimmed is not None and self._trimmed.parent is self:
            self._trimmed.styles.clear_rule("margin")
        self._trimmed = last
        if last is not None:
            top, right, _bottom, left = last.styles.margin
            last.styles.margin = (top, right, 0, left)


class ChatRichMarkdown(RichMarkdown):
    """Rich's `Markdown` renderable with single line breaks kept (the stored messages' body)."""

    def __init__(self, markup: str, **kwargs: Any) -> None:
        super().__init__(markup, **kwargs)
        break_lines(self.parsed)
