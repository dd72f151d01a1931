"""The streaming reply's body: finished blocks fold into still chunks, and the chunks read as one
document (the same rows as the whole text drawn at once, which is how the settled reply shows);
the live tail takes its new lines a few at a time when the reply writes fast (blank until the
text reaches them), so the screen is laid out less often than the text wraps."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.markdown import Markdown as RichMarkdown
from textual.app import App, ComposeResult
from textual.widgets import Static

from tavern_tui.tui.widgets import reply_stream
from tavern_tui.tui.widgets.chat_markdown import ChatRichMarkdown
from tavern_tui.tui.widgets.reply_stream import FOLD_AT, MAX_RESERVE, LiveMarkdown, StreamBody
from tests.tui.conftest import wait_until
from tests.tui.test_chat_line_breaks import rows

REPLY = """*Seraphina lifts the lantern.* "The path north is old."

## The way

She counts the landmarks on her fingers:

- the split oak
- the mossy stones
- the river ford

1. cross at dawn
2. keep to the left bank

```
north = 3 leagues
ford  = 1 league
```

> Mind the ford after rain.

---

- a list right after a rule

---

After the rule, a paragraph
with a second line.

### Last

*She smiles.* "Go well, traveller."
"""


class _Stacked(App[None]):
    CSS = "#stream, #whole { width: 50; height: auto; }"

    def compose(self) -> ComposeResult:
        yield StreamBody(id="stream")
        yield Static(ChatRichMarkdown(REPLY), id="whole")


def _rows(app: App[None], widget_id: str) -> list[str]:
    region = app.query_one(f"#{widget_id}").region
    return rows(app)[region.y:region.bottom]


@pytest.mark.parametrize("size", [1, 7, 40])
async def test_a_streamed_reply_folds_and_reads_as_the_whole_text(size: int) -> None:
    app = _Stacked()
    async with app.run_test(size=(60, 120)) as pilot:
        body = app.query_one(StreamBody)
        for start in range(0, len(REPLY), size):  # fragments cut anywhere (mid-word, mid-fence)
            await body.append(REPLY[start:start + size])
            assert len(body.query(Static)) == body.chunks + 1  # a chunk each, and the tail
        assert body.source == REPLY
        assert body.chunks >= 2  # 12 top-level blocks: folded at least twice
        # The tail keeps at most FOLD_AT blocks; the rest is still text.
        blocks = [t for t in ChatRichMarkdown(body.tail).parsed if t.level == 0 and t.map]
        assert 1 <= len(blocks) <= FOLD_AT
        # Folds fall on block boundaries: the tail begins on the first line of one of the whole
        # reply's top-level blocks.
        lines = REPLY.split("\n")
        starts = [t.map[0] for t in ChatRichMarkdown(REPLY).parsed if t.level == 0 and t.map]
        assert body.tail in {"\n".join(lines[start:]) for start in starts[1:]}
        whole = app.query_one("#whole")

        def reads_as_the_whole() -> bool:
            # The same rows as the whole text, then at most MAX_RESERVE blank ones the tail holds.
            streamed, drawn = _rows(app, "stream"), _rows(app, "whole")
            return (whole.region.height <= body.region.height <= whole.region.height + MAX_RESERVE
                    and streamed[:len(drawn)] == drawn and all(not row.strip() for row in streamed[len(drawn):]))

        await wait_until(pilot, reads_as_the_whole)


class _Clock:
    """`time.monotonic` for the stream body, moved on by the test."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


def _text_rows(text: str, width: int) -> int:
    """Rows the live tail's text takes at `width`, drawn by Rich alone (no blank rows held)."""
    console = Console(width=width, file=io.StringIO())
    return len(console.render_lines(LiveMarkdown(text), console.options.update_width(width), pad=False))


@pytest.mark.parametrize(("seconds_a_line", "most_held"), [(0.05, MAX_RESERVE), (1.0, 1)])
async def test_the_tail_takes_lines_ahead_as_fast_as_the_reply_writes(
        seconds_a_line: float, most_held: int, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(reply_stream, "time", clock)
    app = _Stacked()
    async with app.run_test(size=(60, 120)) as pilot:
        body = app.query_one(StreamBody)
        await pilot.pause()
        tail = body.query_one(".stream-tail", Static)
        rows_then, layouts, held = 0, 0, []
        for n in range(40):
            clock.now += seconds_a_line  # one more row of text each time (45 characters at 50 columns)
            height = body._tail_size[1]
            await body.append(("word " * 9).strip() + "\n")
            await pilot.pause()
            text = _text_rows(body.tail, tail.content_size.width)
            assert text > rows_then or n == 0  # the text grew by a row
            rows_then = text
            layouts += body._tail_size[1] != height
            held.append(tail.region.height - text)
        # Never fewer rows than the text, never more blank ones held than the rate allows.
        assert 0 <= min(held) and max(held) <= most_held
        if most_held == MAX_RESERVE:  # 20 rows a second: a layout every few rows, not every row
            assert layouts <= 40 // 3
        else:  # a row a second: each row lays out as it comes (one held at the most)
            assert layouts >= 40 // 2


_FENCES = [
    "```\nx = 1\n\n\ty = 2    \n  a line long enough to wrap at the narrower widths of a terminal, and more\n```",
    "Before the code.\n\n```\nfor i in range(3):\n    print(i)\n```\n\nAfter it.",
    "```\n\n\nan unclosed fence, as while it streams\n",
    "```\nwide 字 characters 字字字字字字字字字字字字字字字字字字字字字字字字字字字\n```",
]


@pytest.mark.parametrize("width", [20, 41, 118])
@pytest.mark.parametrize("text", _FENCES)
def test_a_code_block_in_the_tail_draws_as_rich_draws_it(text: str, width: int) -> None:
    """The live tail draws a fence's lines one at a time (each kept per width): the lines are
    those Rich's own Markdown draws for a fence with no language (plain text, padded, wrapped,
    on the theme's background), as the settled reply shows it."""
    console = Console(width=width, file=io.StringIO(), color_system="truecolor", force_terminal=True)
    for _ in range(2):  # drawn, then from what was kept
        live = console.render_lines(LiveMarkdown(text), console.options, pad=False)
        assert live == console.render_lines(RichMarkdown(text), console.options, pad=False)
