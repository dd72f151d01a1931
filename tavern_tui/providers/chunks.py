"""Provides the parse of an OpenAI-compatible chat stream's chunks: `StreamState` (what the
events so far said: done, finish reason, usage, the tool calls put together), the events of one
streamed `delta` or whole `message`, and `MalformedStream` for a body that is not the format.

Wire format: each SSE event's `data` is a JSON "chat.completion.chunk" whose `choices[0].delta`
carries `content` (and `reasoning_content` or `reasoning` on reasoning servers) and
`tool_calls` fragments; `data: [DONE]` ends the stream; errors after the 200 status arrive in
band as `data: {"error": {...}}` (or, from vLLM and llama.cpp, bare). Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from tavern_tui.engine.stream import ReasoningDelta, StreamEvent, TextDelta, ToolCall, Usage
from tavern_tui.providers.errors import classify_stream_error
from tavern_tui.providers.sse import ServerSentEvent

__all__ = ["MAX_TOOL_ARGUMENTS", "MAX_TOOL_CALLS", "CallAccumulator", "MalformedStream", "StreamState", "json_object",
           "message_events", "usage_of"]


def message_events(message: dict[str, Any]) -> list[StreamEvent]:
    """Reasoning then text from a streamed `delta` or a whole `message` (both carry the same fields)."""
    events: list[StreamEvent] = []
    # Prefer `reasoning_content` (DeepSeek, vLLM); `reasoning` (OpenRouter, Ollama) may duplicate it.
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        events.append(ReasoningDelta(reasoning))
    content = message.get("content")
    if isinstance(content, str) and content:
        events.append(TextDelta(content))
    return events


class MalformedStream(Exception):
    """The body was not the expected format; becomes a (non-retried) ServerError."""


class StreamState:
    """What the SSE parser has learnt so far: done flag, finish reason, usage."""

    def __init__(self) -> None:
        self.done = False
        self.arrived = False
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.calls = CallAccumulator()

    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls accumulated so far, complete, in index order."""
        return self.calls.complete()

    def take(self, sse: ServerSentEvent, secrets: list[str]) -> list[StreamEvent]:
        """Events for one SSE event; raises the classified error for an in-band error."""
        data = sse.data.strip()
        if data == "[DONE]":
            self.done = True
            return []
        if not data:
            return []
        if sse.event == "error":
            try:
                obj = json.loads(data)
            except ValueError:
                obj = {"message": data}
            raise classify_stream_error(obj if isinstance(obj, dict) else {"message": data}, secrets=secrets)
        obj = json_object(data)
        if obj.get("error") or _bare_error(obj):
            raise classify_stream_error(obj, secrets=secrets)
        self.arrived = True
        usage = usage_of(obj.get("usage"))
        if usage is not None:
            self.usage = usage  # servers with continuous usage send it on every chunk; keep the last
        choices = obj.get("choices")
        if not choices or not isinstance(choices, list):
            return []
        choice = next((c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0), None)
        if choice is None:
            return []
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        self.calls.feed(delta.get("tool_calls"))
        return message_events(delta)


MAX_TOOL_CALLS = 32
"""Tool calls kept from one reply at most (an untrusted stream never grows this without bound)."""

MAX_TOOL_ARGUMENTS = 256 * 1024
"""Characters of one call's streamed arguments kept at most; the rest is dropped (the arguments
then fail to parse and the model gets an error result)."""


class CallAccumulator:
    """OpenAI streamed `delta.tool_calls` put together: each fragment names its call by `index`
    (several calls may interleave); the first fragment of a call carries `id` and
    `function.name`, later ones append to `function.arguments`. A whole (non-streamed)
    message's `tool_calls` go through the same path, each entry one complete fragment."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, Any]] = {}

    def feed(self, fragments: Any) -> None:
        """Add one `delta.tool_calls` list (anything else is ignored), within the caps above."""
        if not isinstance(fragments, list):
            return
        for position, fragment in enumerate(fragments):
            if not isinstance(fragment, dict):
                continue
            index = fragment.get("index", position)
            if not isinstance(index, int) or isinstance(index, bool):
                continue
            call = self._calls.get(index)
            if call is None:
                if len(self._calls) >= MAX_TOOL_CALLS:
                    continue
                call = self._calls[index] = {"id": "", "name": "", "arguments": []}
                call["size"] = 0
            if isinstance(fragment.get("id"), str) and fragment["id"]:
                call["id"] = fragment["id"]
            function = fragment.get("function")
            if isinstance(function, dict):
                if isinstance(function.get("name"), str) and function["name"]:
                    # Some servers repeat the name on every fragment; others split it (rare): keep whole.
                    if not call["name"] or not call["arguments"]:
                        call["name"] = function["name"] if call["name"] in ("", function["name"]) \
                            else call["name"] + function["name"]
                arguments = function.get("arguments")
                if isinstance(arguments, str) and arguments and call["size"] < MAX_TOOL_ARGUMENTS:
                    piece = arguments[:MAX_TOOL_ARGUMENTS - call["size"]]
                    call["arguments"].append(piece)
                    call["size"] += len(piece)
                elif isinstance(arguments, dict):  # a few servers send parsed arguments
                    call["arguments"].append(json.dumps(arguments, ensure_ascii=False))

    def complete(self) -> tuple[ToolCall, ...]:
        """The calls put together so far that have a name, in index order."""
        return tuple(ToolCall(c["id"], c["name"], "".join(c["arguments"]), i)
                     for i, c in sorted(self._calls.items()) if c["name"])


def _bare_error(obj: dict[str, Any]) -> bool:
    """An error object sent without the `{"error": …}` wrapper: vLLM's `{"object": "error",
    "message", "type", "code"}`, or any chunk with no `choices` that carries a string `message`
    and a `type` or `code` (llama.cpp's `{"code": 400, "message": …, "type":
    "exceed_context_size_error"}`)."""
    if obj.get("object") == "error":
        return True
    return ("choices" not in obj and isinstance(obj.get("message"), str)
            and ("type" in obj or "code" in obj))


def json_object(text: str) -> dict[str, Any]:
    """`text` decoded as a JSON object. Raises MalformedStream (not JSON, or not an object)."""
    try:
        obj = json.loads(text)
    except ValueError:
        preview = " ".join(text.split())[:80]
        raise MalformedStream(f"The endpoint sent a stream line that is not JSON: {preview!r}") from None
    if not isinstance(obj, dict):
        raise MalformedStream(f"The endpoint sent JSON that is not an object: {type(obj).__name__}")
    return obj


def usage_of(value: Any) -> Usage | None:
    """An OpenAI `usage` object's token counts (None when it is not an object; a count that is not
    an integer is None)."""
    if not isinstance(value, dict):
        return None

    def count(key: str) -> int | None:
        n = value.get(key)
        return n if isinstance(n, int) and not isinstance(n, bool) else None

    return Usage(count("prompt_tokens"), count("completion_tokens"), count("total_tokens"))
