"""Provides a pure, incremental decoder for `text/event-stream` (server-sent events).

The rules are those of the WHATWG HTML Living Standard §9.2 "Server-sent events",
section "Parsing an event stream" and "Interpreting an event stream":

- the stream is UTF-8; one leading BOM is dropped; invalid bytes become U+FFFD;
- a line ends at CRLF, LF or CR;
- a line starting with ":" is a comment (servers use them as keep-alives);
- "field: value" sets a field, one space after the colon is stripped; a line with
  no colon is a field with an empty value;
- `data` lines accumulate joined by "\\n"; a blank line dispatches the event, unless
  no `data` was seen, in which case only the `event` buffer is reset;
- `id` persists across events (the "last event ID"); an `id` containing NUL is ignored;
- `retry` is honoured only when it is all ASCII digits;
- one departure: an `error` line (llama.cpp's in-band failure, `error: {json}`) is kept as the
  data of an event of type "error" instead of being ignored as an unknown field.

The decoder does no I/O: feed it bytes as they arrive, in chunks split anywhere
(inside a multi-byte character, between CR and LF), and it returns complete events.
Lines are split on the bytes CR/LF *before* decoding; this is safe because those
bytes never occur inside a multi-byte UTF-8 sequence.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass

__all__ = ["ServerSentEvent", "SSEDecoder", "iter_events", "aiter_events"]

_EOL = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event.

    Attributes:
        event: the event type; "message" when the server sent no `event:` field (WHATWG default).
        data: every `data:` value of the event, joined by "\\n" (no trailing newline).
        id: the last event ID in force when the event was dispatched ("" when none was ever set).
        retry: the reconnection time in milliseconds set by a `retry:` line inside this
            event's block, else None.
    """

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None


class SSEDecoder:
    """Incremental event-stream decoder: bytes in, `ServerSentEvent`s out.

    Usage: call `feed(chunk)` for each network chunk and handle the events it returns;
    at end of stream call `flush()`.

    End of stream: the standard discards an event whose closing blank line never came.
    `flush()` instead treats an unterminated last line as a complete line and dispatches
    the pending event if it has data, returning it; a caller that wants the strict
    behaviour simply ignores what `flush()` returns. The OpenAI adapter uses it, because
    some proxies close right after `data: [DONE]` without the blank line.

    Attributes:
        last_event_id: the current last-event-ID buffer (persists across events).
        retry: the last valid reconnection time in milliseconds, or None.
    """

    def __init__(self) -> None:
        self.last_event_id = ""
        self.retry: int | None = None
        self._partial = bytearray()  # bytes of the current, unterminated line
        self._head = b""  # bytes held back while we cannot yet tell whether they start with a BOM
        self._started = False
        self._skip_lf = False  # previous chunk ended in CR: a leading LF belongs to it
        self._reset_event()

    def _reset_event(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._event_retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Consume one chunk of the byte stream.

        Args:
            chunk: the next bytes exactly as received (any length, split anywhere).

        Returns:
            The events completed by this chunk, in order (often empty).
        """
        if not chunk:
            return []
        if not self._started:
            # The BOM may itself be split across chunks: hold back until we can tell.
            head = self._head + bytes(chunk)
            if len(head) < len(_BOM) and _BOM.startswith(head):
                self._head = head
                return []
            self._started = True
            self._head = b""
            chunk = head[len(_BOM):] if head.startswith(_BOM) else head
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        events: list[ServerSentEvent] = []
        start = 0
        for match in _EOL.finditer(chunk):
            piece = chunk[start:match.start()]
            if self._partial:
                self._partial += piece
                line = bytes(self._partial)
                self._partial.clear()
            else:
                line = bytes(piece)
            start = match.end()
            if match.group() == b"\r" and start == len(chunk):
                self._skip_lf = True
            event = self._line(line.decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
        self._partial += chunk[start:]
        return events

    def flush(self) -> list[ServerSentEvent]:
        """End the stream: finish a pending unterminated line and dispatch a pending event.

        Returns:
            Zero or one event (see the class docstring for why this deviates from the
            standard's "discard"). The decoder is then ready for a new stream, keeping
            `last_event_id` and `retry` as the standard says.
        """
        events: list[ServerSentEvent] = []
        if not self._started and self._head:
            # A stream shorter than the BOM: decode what we have.
            self._started = True
            self._partial += self._head[len(_BOM):] if self._head.startswith(_BOM) else self._head
            self._head = b""
        if self._partial:
            line = bytes(self._partial).decode("utf-8", errors="replace")
            self._partial.clear()
            event = self._line(line)
            if event is not None:
                events.append(event)
        event = self._line("")
        if event is not None:
            events.append(event)
        self._started = False
        self._skip_lf = False
        return events

    def _line(self, line: str) -> ServerSentEvent | None:
        """Process one decoded line; return an event when it is the dispatching blank line."""
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # comment / keep-alive
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "error":
            # Not a WHATWG field, but llama.cpp's server writes an in-band failure as the line
            # `error: {json}` after a 200 status; kept as an "error" event so it is not lost.
            self._data.append(value)
            self._event = "error"
        elif name == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif name == "retry":
            if value and value.isascii() and value.isdigit():
                self.retry = self._event_retry = int(value)
        # Any other field name is ignored, as the standard says.
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._data:
            self._reset_event()
            return None
        event = ServerSentEvent(
            event=self._event or "message",
            data="\n".join(self._data),
            id=self.last_event_id,
            retry=self._event_retry,
        )
        self._reset_event()
        return event


def iter_events(chunks: Iterable[bytes], *, flush: bool = True) -> Iterator[ServerSentEvent]:
    """Decode a whole byte iterable with a fresh `SSEDecoder`.

    Args:
        chunks: the stream's bytes, in arrival order.
        flush: when True (default), the unterminated tail is dispatched via `SSEDecoder.flush`;
            when False, it is discarded as the WHATWG rules say.
    """
    decoder = SSEDecoder()
    for chunk in chunks:
        yield from decoder.feed(chunk)
    if flush:
        yield from decoder.flush()


async def aiter_events(chunks: AsyncIterable[bytes], *, flush: bool = True) -> AsyncIterator[ServerSentEvent]:
    """Async twin of `iter_events`, e.g. over `httpx.Response.aiter_bytes()`."""
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    if flush:
        for event in decoder.flush():
            yield event
