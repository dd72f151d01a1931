"""Provides `response_events`: the events of one successful chat-completions answer, read whole
(a JSON `chat.completion`, from a server that ignored `stream: true`) or as it streams in
(`text/event-stream`, decoded by `sse.SSEDecoder` and read by `chunks.StreamState`).

Wire format (OpenAI chat-completions streaming): each event's `data` is a JSON
"chat.completion.chunk", `stream_options.include_usage` adds a final chunk with `choices: []` and
`usage`, and `data: [DONE]` ends the stream; errors after the 200 status arrive in band. A body
that is neither raises `chunks.MalformedStream`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any

from tavern_tui.engine.stream import Finished, StreamEvent, ToolCalls
from tavern_tui.providers.chunks import (
    CallAccumulator,
    MalformedStream,
    StreamState,
    json_object,
    message_events,
    usage_of,
)
from tavern_tui.providers.errors import classify_stream_error
from tavern_tui.providers.sse import SSEDecoder

if TYPE_CHECKING:
    import httpx

__all__ = ["completion_events", "response_events", "stream_events"]


async def response_events(response: httpx.Response, secrets: list[str]) -> AsyncGenerator[StreamEvent, None]:
    """Dispatch on Content-Type: a JSON completion or an event stream."""
    content_type = response.headers.get("content-type", "").lower()
    if content_type.startswith("application/json"):
        raw = await response.aread()
        if raw.lstrip()[:5] != b"data:":  # some servers mislabel SSE as JSON
            for event in completion_events(raw, secrets):
                yield event
            return
        chunks: Any = _once(raw)
    else:
        chunks = response.aiter_bytes()
    async for event in stream_events(chunks, content_type, secrets):
        yield event


async def stream_events(chunks: Any, content_type: str, secrets: list[str]) -> AsyncGenerator[StreamEvent, None]:
    """The events of an event stream arriving as `chunks` of bytes, then its tool calls, its
    usage and `Finished`; `MalformedStream` when no chat-completion chunk came at all."""
    decoder = SSEDecoder()
    state = StreamState()
    async for chunk in chunks:
        for sse in decoder.feed(chunk):
            for event in state.take(sse, secrets):
                yield event
            if state.done:
                break
        if state.done:
            break
    if not state.done:
        for sse in decoder.flush():  # lenient: a last event without its blank line still counts
            for event in state.take(sse, secrets):
                yield event
    if not state.arrived:
        kind = content_type.split(";")[0].strip() or "no Content-Type"
        raise MalformedStream(
            f"The endpoint answered {kind} without any chat-completion chunk — "
            "check that the base URL ends at the API root (often …/v1)"
        )
    calls = state.tool_calls()
    if calls:
        yield ToolCalls(calls)
    if state.usage is not None:
        yield state.usage
    yield Finished(state.finish_reason, saw_done=state.done)


def completion_events(raw: bytes, secrets: list[str]) -> list[StreamEvent]:
    """A whole (non-streamed) `chat.completion`: a server that ignored `stream: true`.

    A complete JSON body is as final as `[DONE]`, so `Finished.saw_done` is True.
    """
    obj = json_object(raw.decode("utf-8", errors="replace"))
    if obj.get("error"):
        raise classify_stream_error(obj, secrets=secrets)
    choices = obj.get("choices") or []
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedStream("The endpoint answered JSON without `choices`")
    choice = choices[0]
    message = choice.get("message") or {}
    events = message_events(message if isinstance(message, dict) else {})
    whole = CallAccumulator()
    whole.feed(message.get("tool_calls") if isinstance(message, dict) else None)
    if whole.complete():
        events.append(ToolCalls(whole.complete()))
    usage = usage_of(obj.get("usage"))
    if usage is not None:
        events.append(usage)
    events.append(Finished(choice.get("finish_reason"), saw_done=True))
    return events


async def _once(raw: bytes) -> AsyncIterator[bytes]:
    yield raw
