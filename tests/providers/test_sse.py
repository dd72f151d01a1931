"""Tests for the pure SSE decoder (WHATWG HTML §9.2 event-stream parsing), fed byte iterators."""

from __future__ import annotations

import pytest

from tavern_tui.providers.sse import ServerSentEvent, SSEDecoder, aiter_events, iter_events

SAMPLE = (
    "\ufeff: hello keep-alive\n"
    "event: greeting\n"
    "id: 7\n"
    "data: héllo wörld ✓ 🐉\n"
    "data:second line\n"
    "\n"
    "retry: 1500\n"
    "data\n"
    "\n"
    "data: {\"a\": 1}\r\n"
    "\r\n"
    "event: ignored-without-data\r\r"
    "data:  two spaces\r"
    "\r"
).encode("utf-8")

EXPECTED = [
    ServerSentEvent("greeting", "héllo wörld ✓ 🐉\nsecond line", "7", None),
    ServerSentEvent("message", "", "7", 1500),
    ServerSentEvent("message", '{"a": 1}', "7", None),
    ServerSentEvent("message", " two spaces", "7", None),
]


def decode(chunks: list[bytes], *, flush: bool = False) -> list[ServerSentEvent]:
    return list(iter_events(chunks, flush=flush))


def test_sample_in_one_chunk() -> None:
    assert decode([SAMPLE]) == EXPECTED


@pytest.mark.parametrize("cut", range(1, len(SAMPLE)))
def test_every_two_way_split_gives_same_events(cut: int) -> None:
    assert decode([SAMPLE[:cut], SAMPLE[cut:]]) == EXPECTED


def test_one_byte_at_a_time() -> None:
    assert decode([SAMPLE[i : i + 1] for i in range(len(SAMPLE))]) == EXPECTED


def test_empty_chunks_are_harmless() -> None:
    assert decode([b"", SAMPLE[:5], b"", SAMPLE[5:], b""]) == EXPECTED


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_line_endings(eol: bytes) -> None:
    stream = eol.join([b"data: a", b"data: b", b"", b"data: c", b"", b""])
    assert [e.data for e in decode([stream])] == ["a\nb", "c"]


def test_crlf_split_between_cr_and_lf_is_one_line_break() -> None:
    # A CR ending one chunk and LF starting the next must not count as two line breaks
    # (which would dispatch an event early and lose the second data line).
    assert [e.data for e in decode([b"data: a\r", b"\ndata: b\r", b"\n\r\n"])] == ["a\nb"]


def test_comments_are_ignored() -> None:
    stream = b": ping\n\n:\ndata: x\n: in the middle\ndata: y\n\n: trailing\n\n"
    assert [e.data for e in decode([stream])] == ["x\ny"]


def test_multiline_data_joined_with_newline() -> None:
    assert decode([b"data: one\ndata: two\ndata: three\n\n"])[0].data == "one\ntwo\nthree"


def test_field_without_colon_and_space_stripped_once() -> None:
    events = decode([b"data\ndata:x\ndata:  y\n\n"])
    assert events[0].data == "\nx\n y"


def test_unknown_fields_and_bad_retry_ignored() -> None:
    decoder = SSEDecoder()
    events = decoder.feed(b"foo: bar\nretry: 12a\ndata: z\n\n")
    assert events == [ServerSentEvent("message", "z", "", None)]
    assert decoder.retry is None


def test_id_persists_and_nul_id_ignored() -> None:
    events = decode([b"id: 1\ndata: a\n\ndata: b\n\nid: x\x00y\ndata: c\n\nid\ndata: d\n\n"])
    assert [e.id for e in events] == ["1", "1", "1", ""]


def test_bom_only_stripped_at_start_even_when_split() -> None:
    bom = "\ufeff".encode()
    stream = bom + b"data: a\n\n"
    assert decode([stream[:1], stream[1:2], stream[2:]]) == [ServerSentEvent("message", "a")]
    # A second BOM is content: the field name then is "\ufeffdata", which is unknown.
    assert decode([bom + bom + b"data: a\n\n"]) == []


@pytest.mark.parametrize("cut", range(1, 4))
def test_utf8_character_split_across_chunks(cut: int) -> None:
    char = "🐉".encode()  # 4 bytes
    stream = b"data: " + char + b"\n\n"
    head = len(b"data: ") + cut
    assert decode([stream[:head], stream[head:]])[0].data == "🐉"


def test_invalid_utf8_becomes_replacement_character() -> None:
    assert decode([b"data: \xff\n\n"])[0].data == "\ufffd"


def test_unterminated_event_not_dispatched_unless_flushed() -> None:
    stream = [b"data: done\n\ndata: tail"]
    assert [e.data for e in decode(stream)] == ["done"]
    assert [e.data for e in decode(stream, flush=True)] == ["done", "tail"]


def test_flush_dispatches_event_missing_only_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: [DONE]\n") == []
    assert decoder.flush() == [ServerSentEvent("message", "[DONE]")]
    assert decoder.flush() == []


def test_flush_without_data_dispatches_nothing() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"event: x\n: comment")
    assert decoder.flush() == []


async def test_async_iteration_matches_sync() -> None:
    async def chunks():
        for i in range(0, len(SAMPLE), 7):
            yield SAMPLE[i : i + 7]

    assert [e async for e in aiter_events(chunks(), flush=False)] == EXPECTED
