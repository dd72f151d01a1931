"""Provides `MessageBox`, one message of the transcript, which can also receive a streamed reply."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.timer import Timer
from textual.visual import visualize
from textual.widgets import Collapsible, Markdown, Static
from textual.widgets.markdown import MarkdownStream

from tavern_tui.scripts.panels import Part, split_panels
from tavern_tui.text.tokens import estimate_tokens
from tavern_tui.tui.labels import event_label, message_classes, message_mark
from tavern_tui.tui.widgets.chat_markdown import ChatMarkdown, ChatRichMarkdown
from tavern_tui.tui.widgets.member_colours import member_class
from tavern_tui.tui.widgets.message_header import MessageHeader
from tavern_tui.tui.widgets.reply_stream import StreamBody
from tavern_tui.views import MessageView

_STATE_CLASSES = ("-streaming", "-partial", "-stopped", "-error")

_FENCE = ("```", "~~~")


def keep_line_breaks(text: str) -> str:
    """`text` (Markdown) with each single line break shown as a break, as SillyTavern's showdown
    converter does (`simpleLineBreaks: true`); CommonMark would join the lines into one. Lines
    inside a fenced code block are left as they are (they keep their breaks anyway).

    Returns:
        The text with two trailing spaces (a CommonMark hard break) on every line that is
        followed by a non-blank line outside a fence.
    """
    if "\n" not in text:
        return text
    lines = text.split("\n")
    fenced = False
    for index, line in enumerate(lines[:-1]):
        if line.lstrip().startswith(_FENCE):
            fenced = not fenced
            continue
        if not fenced and line.strip() and lines[index + 1].strip() and not line.endswith("  "):
            lines[index] = line + "  "
    return "\n".join(lines)


FLUSHES_PER_SECOND = 30
"""At most this many writes a second reach the streaming reply's body (performance-anchors
§7 B6): fragments arriving in between are joined, so a fast provider
costs the event loop a bounded share, and the reply still moves at about a frame rate."""

_RENDERED: OrderedDict[tuple[tuple[int, int], str], ChatRichMarkdown] = OrderedDict()
_RENDERED_MAX = 1024


def rendered(view: MessageView, text: str | None = None) -> ChatRichMarkdown:
    """The parsed Markdown of a stored message (or of `text`, one part of it), made once per
    message revision (its ref and shown text) and kept in a bounded LRU cache: paging a window
    back in, or a swipe back to a variant seen before, does not parse the text again."""
    text = view.shown if text is None else text
    key = (view.ref, text)
    found = _RENDERED.get(key)
    if found is None:
        found = ChatRichMarkdown(text)
        _RENDERED[key] = found
        if len(_RENDERED) > _RENDERED_MAX:
            _RENDERED.popitem(last=False)
    else:
        _RENDERED.move_to_end(key)
    return found


def _no_reply(view: MessageView) -> Text | None:
    """What a reply that failed before any text shows where its text would be: why (the status
    line says it once, cut short at 80 columns, and not after a restart or a swipe back to it);
    None for any other message."""
    if view.partial and view.error and not view.shown.strip():
        return Text(f"no reply: {view.error}", style="italic")
    return None


class MessageBody(Static):
    """The body of a stored message: one `Static` holding its parsed Markdown (`rendered`)."""


def panel_widget(part: Part) -> Collapsible:
    """A folded page (a status bar whose page script a terminal cannot run): its one line,
    collapsed; Enter or a click on it shows the page's static text."""
    return Collapsible(Static(part.text, classes="panel-text", markup=False), title=Content(part.title),
                       collapsed=True, classes="panel")


def _part_widget(view: MessageView, part: Part) -> Collapsible | MessageBody:
    return panel_widget(part) if part.is_panel else MessageBody(rendered(view, part.text), classes="message-body")


def _height_at(body: Static, renderable: Text | ChatRichMarkdown) -> int | None:
    """The rows `renderable` takes in `body` at its current width, measured as Textual's layout
    measures it (the drawing is kept: `ChatRichMarkdown` draws once per width); None before the
    body has a width."""
    width = body.content_size.width
    if not width or not body.is_mounted:
        return None
    return visualize(body, renderable, markup=False).get_height(body.styles, width)


def _has_panels(view: MessageView | None) -> bool:
    return view is not None and len(split_panels(view.shown)) > 1


class MessageBox(Vertical):
    """A message: speaker name, a subtle mark, optional reasoning (collapsed), Markdown body.

    A stored message renders its body as one `Static` holding a Rich Markdown renderable: a
    Textual `Markdown` widget is a widget per block, and a window of them made opening a chat
    take twice as long. Only a reply that is streaming gets a `Markdown` widget (for `MarkdownStream`).

    | class | meaning |
    | --- | --- |
    | `-user` / `-assistant` / `-system` | the role (the speaker's colour; `-user` on `$message-user-background`) |
    | `-origin-<origin>` | an origin other than the role's natural producer (the greeting: engine) |
    | `-streaming` | the reply is still arriving |
    | `-partial` with `-stopped` or `-error` | a reply cut off by Esc or by a provider error |
    | `-summary` | a summary node: its mark says what it covers; `.originals` expands to them (`OriginalsWanted`) |
    | `-tool` | a tool result, one line (`roll_dice 2d6+1 → [3, 5] + 1 = 9`); `.tool-call` expands to the rest |
    | `-calls-only` | a reply that only called tools (no text): hidden, its tool lines stand for it |
    | `member-1` … `member-5` | a group member's reply: its speaker label in the member's colour (`MEMBER_PALETTE`) |

    | child class | part |
    | --- | --- |
    | `message-header` | the one-line header row (`MessageHeader`: speaker, mark, extras) |
    | `message-body` | the Markdown body |
    | `reasoning` | the collapsed reasoning (`$reasoning-foreground`, italic) |
    | `panel` | a folded status page after the message's own words (one line; expands to its static text) |
    """

    # Paragraphs keep Markdown's bottom margin, which also spaces the boxes apart
    # (a :last-child rule would restyle every sibling on each mount).
    DEFAULT_CSS = """
    MessageBox {
        height: auto;
        padding: 0 1;
    }

    MessageBox.-user {
        background: $message-user-background;
    }

    MessageBox.-summary {
        border-left: outer $accent;
    }

    MessageBox.-tool { padding: 0 1; }
    MessageBox.-calls-only { display: none; }  /* a reply that only called tools: its lines say it */

    MessageBox .tool-call, MessageBox .panel {
        height: auto;
        padding: 0;
        margin: 0;
        border: none;
        background: transparent;
        color: $text-muted;
    }

    MessageBox .originals .original {
        color: $text-muted;
    }

    """ + MessageHeader.BOX_CSS + """

    MessageBox .message-body {
        height: auto;
        margin: 0;
        padding: 0;
        background: transparent;
    }

    MessageBox .reasoning {
        height: auto;
        padding: 0;
        margin: 0;
        border: none;
        background: transparent;
        color: $reasoning-foreground;
    }

    MessageBox .reasoning Markdown {
        color: $reasoning-foreground;
        text-style: italic;
        background: transparent;
    }
    """

    def __init__(self, speaker: str, content: str = "", *, mark: str = "", reasoning: str = "",
                 classes: str = "") -> None:
        super().__init__(classes=classes)
        self._speaker = speaker
        self._content = content
        self._mark = mark
        self._reasoning = reasoning
        self._pending: list[str] = []  # fragments waiting for the next flush
        self._flush_at = 0.0  # perf_counter time before which no flush is made
        self._flush_timer: Timer | None = None
        self._reasoning_stream: MarkdownStream | None = None
        self.view: MessageView | None = None
        """The stored message shown here; None while a reply is still streaming."""
        self.resized = False
        """Whether the last `show_view` changed the body's height (the screen lays out again)."""

    def set_member(self, position: int | None) -> None:
        """Colour the speaker label as the group member at `position` (0-based); None: no member
        colour (a one-character chat, the person, a system line)."""
        wanted = member_class(position) if position is not None else None
        stale = [c for c in self.classes if c.startswith("member-") and c != wanted]
        if stale:
            self.remove_class(*stale)
        if wanted is not None:
            self.add_class(wanted)

    @dataclass
    class OriginalsWanted(Message):
        """A summary's originals section was expanded with nothing in it yet: the chat reads the
        messages the summary replaced and hands them to `show_originals`."""

        box: MessageBox

        @property
        def control(self) -> MessageBox:
            """The summary's box (for `@on(..., selector)`)."""
            return self.box

    @on(Collapsible.Expanded, ".originals")
    def _originals_expanded(self, event: Collapsible.Expanded) -> None:
        if self.view is not None and not event.collapsible.query(".original"):
            self.post_message(self.OriginalsWanted(self))

    async def show_originals(self, originals: Sequence[MessageView]) -> None:
        """Fill the summary's originals section, once: one read-only line per replaced message,
        marked not sent (they stay in the log, never in a request)."""
        section = self.query_one(".originals", Collapsible)
        if section.query(".original"):
            return
        lines = [Static(f"{o.speaker} ({event_label(o.ref)}, not sent): {o.content}", classes="original",
                        markup=False) for o in originals]
        await section.query_one(Collapsible.Contents).mount_all(lines)

    @classmethod
    def from_view(cls, view: MessageView) -> MessageBox:
        """A box for a stored message, with its role/origin/partial classes and mark."""
        box = cls(view.speaker, view.shown, mark=message_mark(view), reasoning=view.reasoning,
                  classes=" ".join(message_classes(view)))
        box.view = view
        return box

    @classmethod
    def streaming(cls, speaker: str) -> MessageBox:
        """An empty assistant box that a reply streams into."""
        return cls(speaker, mark="writing…", classes="-assistant -streaming")

    def compose(self) -> ComposeResult:
        if self.view is not None and self.view.tool_result is not None:
            # A tool call is one compact line; click or Enter on it shows the arguments and result.
            yield Collapsible(Static(tool_details(self.view), classes="message-body", markup=False),
                              title=Content(self.view.tool_line), collapsed=True, classes="tool-call")
            return
        yield MessageHeader(self._speaker, self._mark)
        if self._reasoning:
            yield self._reasoning_widget(self._reasoning)
        if self.view is not None:
            yield from self._body_parts(self.view)
            if self.view.summary is not None:
                # Filled by the chat when expanded: the originals, read-only, never sent.
                covers = self.view.summary.get("covers", 0)
                yield Collapsible(title=f"{covers} original messages (not sent)", collapsed=True, classes="originals")
        elif self.has_class("-streaming"):
            yield StreamBody(self._content)
        else:  # the person's line just sent: shown as it will be stored
            yield MessageBody(ChatRichMarkdown(self._content), classes="message-body")

    @staticmethod
    def _body_parts(view: MessageView) -> ComposeResult:
        # The message's own words first; a folded page is one line after them.
        failed = _no_reply(view)
        if failed is not None:
            yield MessageBody(failed, classes="message-body")
            return
        parts = split_panels(view.shown)
        if len(parts) == 1:
            yield MessageBody(rendered(view), classes="message-body")
            return
        if parts[0].is_panel:  # nothing but a page: an empty body keeps `body` and the cursor working
            yield MessageBody("", classes="message-body")
        for part in parts:
            yield _part_widget(view, part)

    @staticmethod
    def _reasoning_widget(text: str) -> Collapsible:
        return Collapsible(ChatMarkdown(text), title="reasoning", collapsed=True, classes="reasoning")

    @property
    def body(self) -> StreamBody | Static:
        """The widget holding the message text: a `StreamBody` while streaming, else a `Static`."""
        return self.query_one(".message-body", (StreamBody, Static))

    @property
    def text(self) -> str:
        """The text received so far while a reply streams (the Markdown source, with fragments
        not yet flushed); for a stored message, its own words (without its folded pages)."""
        found = self.query(".message-body")  # none for a moment while a settled body replaces the stream's
        body = found.first() if found else None
        if isinstance(body, StreamBody):
            return body.source + "".join(self._pending)
        first = split_panels(self._content)[0]
        return "" if first.is_panel else first.text

    @property
    def header(self) -> MessageHeader | None:
        """The header row (None for a tool line, which has none)."""
        found = self.query_children(MessageHeader)
        return found.first() if found else None

    @property
    def mark(self) -> str:
        """The mark shown next to the speaker name."""
        return self._mark

    @property
    def speaker(self) -> str:
        """The speaker's name shown in the header."""
        return self._speaker

    def _set_speaker(self, name: str) -> None:
        self._speaker = name
        if (header := self.header) is not None:
            header.speaker = name

    def set_mark(self, mark: str) -> None:
        """Replace the mark next to the speaker name."""
        self._mark = mark
        if (header := self.header) is not None:
            header.mark = mark
        self.show_extras()

    def on_mount(self) -> None:
        self.show_extras()

    def show_extras(self, number: int | None = None) -> None:
        """Fill the header's right side with what the `[tui]` settings ask for (issue 21 item 7):
        the message number (`number`, else the box's place in the transcript), the time it was
        written (UTC, as stored) and its estimated tokens (ceil(UTF-8 bytes / 4))."""
        tui = getattr(getattr(getattr(self.app, "tavern", None), "settings", None), "tui", None)
        header = self.header
        if tui is None or header is None:
            return
        parts = []
        if tui.message_numbers and self.view is not None:
            if number is None and self.parent is not None:
                boxes = [c for c in self.parent.children if isinstance(c, MessageBox)]
                earlier = getattr(self.parent, "earlier_count", 0)
                number = earlier + boxes.index(self) + 1 if self in boxes else None
            if number is not None:
                parts.append(f"#{number}")
        if tui.timestamps and self.view is not None:
            parts.append(f"{self.view.created_at:%Y-%m-%d %H:%M}")
        if tui.token_counts and self.view is not None:
            parts.append(f"~{estimate_tokens(self.view.content)} tokens")
        header.extras = " · ".join(parts)

    async def append_text(self, fragment: str) -> None:
        """Append reply text: fragments are joined and written to the `StreamBody` at most
        `FLUSHES_PER_SECOND` times a second (more wait for the next flush while one is drawn).
        `stop_streams` writes what is still pending."""
        self._pending.append(fragment)
        now = time.perf_counter()
        if now >= self._flush_at:
            await self._flush()
        elif self._flush_timer is None:
            self._flush_timer = self.set_timer(self._flush_at - now, self._flush)

    @property
    def pending_text(self) -> str:
        """Streamed text not yet written to the widget (it goes with the next flush)."""
        return "".join(self._pending)

    async def _flush(self, retry: bool = True) -> None:
        self._flush_timer = None
        if not self._pending:
            return
        body = next(iter(self.query_children(".message-body").results(StreamBody)), None)
        if body is None:
            # Not composed yet: the first delta can beat the box's mount. The text waits for the
            # next flush (`retry`), or for the settled body that replaces the stream's.
            if retry:
                self._flush_timer = self.set_timer(1 / FLUSHES_PER_SECOND, self._flush)
            return
        text = "".join(self._pending)
        self._pending.clear()
        self._flush_at = time.perf_counter() + 1 / FLUSHES_PER_SECOND
        await body.append(text)

    async def append_reasoning(self, fragment: str) -> None:
        """Append reasoning text into the collapsed reasoning section (mounted on first use)."""
        if self._reasoning_stream is None:
            found = self.query(".reasoning")
            if found:
                section = found.first(Collapsible)
            else:
                section = self._reasoning_widget("")
                await self.mount(section, before=self.body)
            self._reasoning_stream = Markdown.get_stream(section.query_one(Markdown))
        await self._reasoning_stream.write(fragment)

    async def stop_streams(self) -> None:
        """Flush and stop the streams (pending fragments are written first)."""
        if self._flush_timer is not None:
            self._flush_timer.stop()
        if self._pending:
            self._flush_at = 0.0
            await self._flush(retry=False)
        if self._reasoning_stream is not None:
            await self._reasoning_stream.stop()
        self._reasoning_stream = None

    async def show_view(self, view: MessageView) -> bool:
        """Show another stored message in this box (a swipe to a sibling): text, mark and
        classes change in place, cheaper than a new box. Returns False when it cannot (a box
        that is streaming, or reasoning appears or goes away): then replace the box."""
        body = self.body
        if self.view is None or not isinstance(body, Static) or bool(view.reasoning) != bool(self._reasoning):
            return False
        if self.view.tool_result is not None or view.tool_result is not None:
            return False  # a tool line is its own kind of box
        if (view.summary is None) != (self.view.summary is None) or view.summary is not None:
            return False  # the originals section comes and goes with the summary
        if view.reasoning:
            return False  # the collapsed section would keep the old reasoning
        if _has_panels(view) or _has_panels(self.view):
            return False  # folded pages are widgets of their own
        wanted = set(message_classes(view))
        current = {c for c in self.classes if c.startswith("-")}
        if wanted != current:  # a class change restyles and re-lays out the screen
            self.remove_class(*(current - wanted))
            self.add_class(*(wanted - current))
        if view.speaker != self._speaker:
            self._set_speaker(view.speaker)
        self.set_mark(message_mark(view))
        self._content = view.shown
        shown: Text | ChatRichMarkdown = _no_reply(view) or rendered(view)
        # A variant as tall as the one shown is drawn in place: no layout pass of the screen
        # (every mounted widget), only the body's repaint (benchmarks swipe_repaint).
        self.resized = _height_at(body, shown) != body.content_size.height
        body.update(shown, layout=self.resized)
        self.view = view
        return True

    async def settle(self, view: MessageView | None, mark: str | None = None) -> None:
        """Finish a streamed reply: show the stored message's text, mark and classes.

        Args:
            view: the stored message (its text wins over what streamed, in case they differ);
                None when nothing was stored.
            mark: overrides the mark derived from `view` (e.g. an error with its category).
        """
        await self.stop_streams()
        self.remove_class(*_STATE_CLASSES)
        if view is None:
            self.add_class("-partial", "-stopped")
            self.set_mark(mark or "stopped")
            return
        self.view = view
        # The stored text (a card's display scripts apply once it is stored) in the body a stored
        # message has, one Static: the streamed Markdown is a widget per block, and every later
        # layout pass of the chat (each flush of the next reply's stream) would visit them all.
        old = [child for child in self.children if child.has_class("message-body") or child.has_class("panel")]
        with self.app.batch_update():
            await self.mount_all(list(self._body_parts(view)), before=old[0] if old else None)
            await self.remove_children(old)
        self._content = view.shown
        self.add_class(*message_classes(view))
        if view.speaker != self._speaker:  # a reply streamed under a name it was not stored under
            self._set_speaker(view.speaker)
        self.set_mark(mark if mark is not None else message_mark(view))


def tool_details(view: MessageView) -> str:
    """What a tool line expands to: the call's arguments and the result the model read."""
    result = view.tool_result or {}
    arguments = str(result.get("arguments") or "{}")
    lines = [f"arguments: {arguments}", f"status: {result.get('status')}"]
    if result.get("reason"):
        lines.append(f"why: {result['reason']}")
    lines.append(f"result: {view.content}")
    return "\n".join(lines)
