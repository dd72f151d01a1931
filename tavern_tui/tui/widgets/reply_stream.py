"""Provides `StreamBody`, the body a reply streams into: finished blocks fold into still text,
only the last few are drawn again as text arrives.

Textual's `Markdown` widget is a widget per block (a list item is four), and a reply that streams
lays the chat screen out on every flush; each pass visits every mounted widget, so a long reply
made each flush slower than the last (a 1,500-token reply: ~120 widgets, most of the event loop
at 200 tokens a second; performance-anchors §7 B6). Here the reply is Rich Markdown,
as a stored message is (`MessageBody`): a widget per folded chunk of blocks plus one for the tail.
"""

from __future__ import annotations

import time

from markdown_it.token import Token
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import CodeBlock, Markdown
from rich.padding import Padding
from rich.segment import Segment, Segments
from rich.syntax import Syntax
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.visual import visualize
from textual.widgets import Static

from tavern_tui.tui.widgets.chat_markdown import ChatRichMarkdown

FOLD_AT = 2
"""Top-level blocks the live tail holds before all but its last fold into a still chunk. A block
is only folded once another has begun after it, so the text still to come cannot change it. The
tail is drawn again on every flush, so the fewer blocks it holds the cheaper a flush (at 200 tok/s
the loop measured 24-25 % busy with 2, 26-28 % with 4; `benchmarks` stream_render)."""

RESERVE_SECONDS = 0.8
"""When the live tail needs another line, it takes as many more as the reply has been writing in
this many seconds (blank until the text reaches them): each time the tail's height changes, Textual
lays the whole screen out twice (the tail, then every container whose size followed it), and at
200 tokens a second a new line came every other flush (B6, performance-anchors §7)."""

MAX_RESERVE = 5
"""At most this many blank lines wait below the text of a streaming reply."""


class _PlainCode(CodeBlock):
    """A code block drawn as Rich draws one of plain text (padding, wrapping, background), each
    line drawn once per width: the fence being written is drawn again on every flush, and its
    lines above the last do not change (drawing them all again was ~13 % of the event loop's
    work at 200 tok/s under a profiler; `benchmarks` stream_render). Without highlighting, Rich
    draws each line on its own (`Syntax`, word-wrapped, no line numbers), so the lines drawn
    one by one inside the same padding are what it draws whole."""

    @classmethod
    def create(cls, markdown: Markdown, token: Token) -> CodeBlock:
        return cls("text", markdown.code_theme)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        inner = options.update(width=max(0, options.max_width - 2), height=None)  # Syntax's padding=1
        segments: list[Segment] = []
        for line in str(self.text).rstrip().split("\n"):
            segments.extend(_code_line(console, inner, line, self.theme))
        yield Padding(Segments(segments), style=Syntax.get_theme(self.theme).get_background_style(), pad=1)


_CODE_LINES: dict[tuple[str, str, int], list[Segment]] = {}
"""Drawn code lines by (line, theme, width); emptied when it holds `_CODE_LINES_KEPT`."""

_CODE_LINES_KEPT = 2048


def _code_line(console: Console, options: ConsoleOptions, line: str, theme: str) -> list[Segment]:
    """One line of a plain code block as Rich's `Syntax` draws it at `options`' width (wrapped
    lines, each padded with the theme's background, each ending in a new line), drawn once."""
    key = (line, theme, options.max_width)
    drawn = _CODE_LINES.get(key)
    if drawn is None:
        if len(_CODE_LINES) >= _CODE_LINES_KEPT:
            _CODE_LINES.clear()
        drawn = _CODE_LINES[key] = list(console.render(Syntax(line, "text", theme=theme, word_wrap=True), options))
    return drawn


class LiveMarkdown(ChatRichMarkdown):
    """The live tail's Markdown: code not highlighted yet. The tail is drawn again on every flush
    and a fence being written is its last block, so highlighting it each time cost the square of
    its length (a 40-line fence: most of the event loop); it is highlighted once it folds, and in
    the settled reply."""

    elements = {**ChatRichMarkdown.elements, "fence": _PlainCode, "code_block": _PlainCode}


class _DrawnOnce:
    """A renderable drawn once per width and reused: each flush measures the tail (does its height
    change?), lays it out when it did and paints it; each of those drew the whole Markdown again
    (three renders a flush, the costliest part of a 200 tok/s stream under a profiler).

    Args:
        renderable: what to draw (the tail's `LiveMarkdown`).
        at_least: lines drawn at the least (blank ones after the text: `RESERVE_SECONDS`).
    """

    def __init__(self, renderable: ChatRichMarkdown, at_least: int = 0) -> None:
        self.renderable = renderable
        self.at_least = at_least
        self._drawn: tuple[tuple[int, str | None, str | None, bool], list[list[Segment]]] | None = None

    def lines(self, console: Console, options: ConsoleOptions) -> list[list[Segment]]:
        """The text's lines at `options`' width (drawn once per width)."""
        key = (options.max_width, options.justify, options.overflow, bool(options.no_wrap))
        if self._drawn is None or self._drawn[0] != key:
            self._drawn = (key, console.render_lines(self.renderable, options, pad=False, new_lines=False))
        return self._drawn[1]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        new_line = Segment.line()
        lines = self.lines(console, options)
        for line in lines:
            yield from line
            yield new_line
        for _ in range(self.at_least - len(lines)):
            yield new_line


def _block_starts(markdown: ChatRichMarkdown) -> list[tuple[int, str]]:
    """(first line, token type) of each top-level block of `markdown`, in order."""
    return [(token.map[0], token.type) for token in markdown.parsed if token.level == 0 and token.map is not None]


class StreamBody(Vertical):
    """A streaming reply's body (class `message-body`): folded chunks, then the live tail.

    `append` adds text and redraws the tail; once the tail has more than `FOLD_AT` top-level
    blocks, the finished ones move into a chunk of their own, drawn once. Rich's Markdown puts a
    blank line between top-level blocks unless the first is a rule, and lists and quotes draw
    their own even at the top; a chunk or the tail that needs that line gets it as its top margin
    (class `-spaced`, `_spaced`), so the chunks read as one document. The settled reply replaces
    this body with the stored text drawn whole.
    """

    DEFAULT_CSS = """
    StreamBody { height: auto; }
    StreamBody > Static { height: auto; margin: 0; padding: 0; background: transparent; }
    StreamBody > Static.-spaced { margin-top: 1; }
    """

    def __init__(self, text: str = "", *, classes: str = "message-body", id: str | None = None) -> None:  # noqa: A002
        super().__init__(classes=classes, id=id)
        self._folded: list[str] = []
        self._tail = _normal(text)
        self._after_block = False  # the folded text so far ends in a block other than a rule
        self._tail_size = (0, 0)  # (width, height) in cells of the tail when last drawn
        self._reserved = 0  # the lines the tail is drawn to at the least
        self._began = 0.0  # when the first text came (time.monotonic)

    def compose(self) -> ComposeResult:
        yield Static(_DrawnOnce(LiveMarkdown(self._tail)), classes="stream-tail")

    @property
    def source(self) -> str:
        """All the text appended so far (line ends as "\\n")."""
        return "".join(self._folded) + self._tail

    @property
    def tail(self) -> str:
        """The text not folded yet (the live tail's)."""
        return self._tail

    @property
    def chunks(self) -> int:
        """How many folded chunks precede the tail."""
        return len(self._folded)

    async def append(self, text: str) -> None:
        """Add `text` to the reply: the tail is drawn again, and its finished blocks fold."""
        self._tail += _normal(text)
        markdown = LiveMarkdown(self._tail)
        tail = self.query_one(".stream-tail", Static)
        starts = _block_starts(markdown)
        if len(starts) > FOLD_AT:
            cut, _ = starts[-1]
            lines = self._tail.split("\n")
            done, self._tail = "\n".join(lines[:cut]) + "\n", "\n".join(lines[cut:])
            chunk = Static(ChatRichMarkdown(done), classes="stream-folded")
            chunk.set_class(_spaced(self._after_block, starts[0][1]), "-spaced")
            self._folded.append(done)
            self._after_block = starts[-2][1] != "hr"
            await self.mount(chunk, before=tail)
            markdown = LiveMarkdown(self._tail)
            starts = starts[-1:]
            self._reserved = 0  # the chunk's mount lays out anyway; the shorter tail starts again
        tail.set_class(bool(self._folded) and _spaced(self._after_block, starts[0][1] if starts else ""), "-spaced")
        drawn = _DrawnOnce(markdown)
        tail.update(drawn, layout=self._height_changes(tail, drawn))

    def _height_changes(self, tail: Static, drawn: _DrawnOnce) -> bool:
        """Whether the tail drawn as `drawn` is taller or shorter than now. Most flushes add
        words to the tail's last line, or fill a line reserved before (`RESERVE_SECONDS`): then the
        tail repaints alone, with no layout pass over the screen (whose cost grows with every
        mounted widget). Sets how many lines `drawn` takes."""
        width = tail.content_size.width
        if not width or tail.styles.height is None or not tail.styles.height.is_auto:
            return True
        now = time.monotonic()
        self._began = self._began or now
        text = visualize(tail, drawn, markup=False).get_height(tail.styles, width)
        if text > self._reserved:
            # Lines the reply wrote per second so far, by its characters at this width.
            rate = len(self.source) / max(width, 1) / max(now - self._began, 0.5)
            self._reserved = text + min(MAX_RESERVE, int(rate * RESERVE_SECONDS))
        drawn.at_least = self._reserved
        height = max(text, self._reserved)
        changed = (width, height) != self._tail_size  # a resize lays out again: so does the next flush
        self._tail_size = (width, height)
        return changed


_OWN_BLANK = frozenset({"bullet_list_open", "ordered_list_open", "blockquote_open"})
"""Blocks Rich draws with a blank line above them even at the top of a document."""


def _spaced(after_block: bool, first: str) -> bool:
    """Whether a chunk beginning with a `first` block needs a blank line above it to read as
    the document continued: Rich's blank between blocks comes after any block but a rule
    (`after_block`), and lists and quotes draw their own."""
    return after_block and first not in _OWN_BLANK


def _normal(text: str) -> str:
    # Line numbers of the parsed blocks count "\r\n" and "\r" as one break (markdown-it does).
    return text.replace("\r\n", "\n").replace("\r", "\n")
