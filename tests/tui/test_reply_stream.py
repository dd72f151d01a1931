"""The streaming reply's body: finished blocks fold into still chunks, and the chunks read as one
document (the same rows as the whole text drawn at once, which is how the settled reply shows)."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Static

from tavern_tui.tui.widgets.chat_markdown import ChatRichMarkdown
from tavern_tui.tui.widgets.reply_stream import FOLD_AT, StreamBody
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
        await wait_until(pilot, lambda: body.region.height == app.query_one("#whole").region.height)
        assert _rows(app, "stream") == _rows(app, "whole")
