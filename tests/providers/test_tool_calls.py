"""Streaming tool calls (issue 19 §1, §5): OpenAI `delta.tool_calls` fragments put together by
index, at every chunk boundary; the `tools` body field; the retry without tools."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from tavern_tui.engine.stream import ChatRequest, ConfigAdjusted, Finished, TextDelta, ToolCall, ToolCalls
from tavern_tui.errors import BadRequestError
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.providers.openai_compat import OpenAICompatProvider
from tests.support.loopback import LoopbackServer, rechunk, sse_tool_call_chunks

TOOLS = ({"type": "function", "function": {"name": "roll_dice", "description": "Roll dice",
                                            "parameters": {"type": "object", "properties": {
                                                "expression": {"type": "string"}}}}},)
REQUEST = ChatRequest([{"role": "user", "content": "Roll for initiative"}], tools=TOOLS)
CALLS = [("call_a1", "roll_dice", '{"expression": "2d6+1"}'), ("call_b2", "lore_search", '{"query": "Ashford keep"}')]


def provider_for(url: str) -> OpenAICompatProvider:
    return OpenAICompatProvider(ProviderSettings(base_url=url, model="m", api_key="sk-KEY", timeout=2.0), backoff=0.01)


async def _feed(pieces: list[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


async def decode(body: bytes, cut: int) -> list:
    """The real decoder (`_parse_sse`: SSE framing, then the chunk state) fed `body` in two
    network chunks cut at byte `cut`."""
    provider = provider_for("http://127.0.0.1:9/v1")
    return [e async for e in provider._parse_sse(_feed([body[:cut], body[cut:]]), "text/event-stream", [])]


@pytest.mark.parametrize("interleave", [False, True])
async def test_two_calls_at_every_chunk_boundary(interleave: bool) -> None:
    body = "".join(sse_tool_call_chunks(CALLS, interleave=interleave) + ["data: [DONE]\n\n"]).encode()
    expected = ToolCalls((ToolCall("call_a1", "roll_dice", '{"expression": "2d6+1"}', 0),
                          ToolCall("call_b2", "lore_search", '{"query": "Ashford keep"}', 1)))
    for cut in range(1, len(body)):
        events = await decode(body, cut)
        calls = [e for e in events if isinstance(e, ToolCalls)]
        assert calls == [expected], f"cut at byte {cut}"
        assert events[-1] == Finished("tool_calls", saw_done=True)


async def test_text_before_calls_at_every_chunk_boundary() -> None:
    body = "".join(sse_tool_call_chunks(CALLS[:1], text="Let me roll. ") + ["data: [DONE]\n\n"]).encode()
    for cut in range(1, len(body), 7):
        events = await decode(body, cut)
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Let me roll. "
        calls = [e for e in events if isinstance(e, ToolCalls)][0].calls
        assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [("call_a1", "roll_dice",
                                                                             {"expression": "2d6+1"})]


async def test_invalid_json_arguments_are_kept_verbatim() -> None:
    bad = '{"expression": "2d6+'  # cut off: the tool then answers with an error result
    body = "".join(sse_tool_call_chunks([("c1", "roll_dice", bad)]) + ["data: [DONE]\n\n"]).encode()
    events = await decode(body, len(body) // 2)
    assert [e for e in events if isinstance(e, ToolCalls)][0].calls[0].arguments == bad


async def test_over_the_network_in_three_byte_pieces(loopback: LoopbackServer) -> None:
    loopback.enqueue_sse(rechunk(sse_tool_call_chunks(CALLS, interleave=True), 3))
    async with provider_for(loopback.base_url) as provider:
        events = [e async for e in provider.stream(REQUEST)]
    assert [c.name for c in [e for e in events if isinstance(e, ToolCalls)][0].calls] == ["roll_dice", "lore_search"]
    sent = loopback.requests[0].json
    assert sent["tools"] == list(TOOLS)


async def test_whole_completion_with_tool_calls(loopback: LoopbackServer) -> None:
    loopback.enqueue_json(200, {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "call_9", "type": "function",
             "function": {"name": "roll_dice", "arguments": '{"expression":"d20"}'}}]}}]})
    async with provider_for(loopback.base_url) as provider:
        events = [e async for e in provider.stream(REQUEST)]
    assert ToolCalls((ToolCall("call_9", "roll_dice", '{"expression":"d20"}', 0),)) in events


async def test_no_tools_field_without_tools(loopback: LoopbackServer) -> None:
    loopback.enqueue_sse(sse_tool_call_chunks([], text="hi", finish_reason="stop"))
    async with provider_for(loopback.base_url) as provider:
        [e async for e in provider.stream(ChatRequest([{"role": "user", "content": "x"}]))]
    assert "tools" not in loopback.requests[0].json


@pytest.mark.parametrize("answer", [
    # Ollama's words for a model without tool support
    {"error": {"message": "registry.ollama.ai/library/gemma:2b does not support tools", "type": "api_error"}},
    # an OpenAI-style 400 naming the field
    {"error": {"message": "Unrecognized request argument supplied: tools", "type": "invalid_request_error",
               "param": "tools"}},
])
async def test_server_rejecting_tools_gets_one_retry_without(loopback: LoopbackServer, answer: dict) -> None:
    loopback.enqueue_json(400, answer)
    loopback.enqueue_sse(sse_tool_call_chunks([], text="No dice here.", finish_reason="stop"))
    async with provider_for(loopback.base_url) as provider:
        events = [e async for e in provider.stream(REQUEST)]
        attempts = provider.attempts
    assert "tools" in loopback.requests[0].json and "tools" not in loopback.requests[1].json
    adjusted = [e for e in events if isinstance(e, ConfigAdjusted)]
    assert len(adjusted) == 1 and "tools" in adjusted[0].omitted
    assert attempts[0]["status"] == 400 and "tools" in attempts[1]["omitted"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "No dice here."


async def test_tools_rejected_twice_is_raised(loopback: LoopbackServer) -> None:
    rejection = {"error": {"message": "model does not support tools"}}
    loopback.enqueue_json(400, rejection)
    loopback.enqueue_json(400, {"error": {"message": "messages: something else is wrong", "param": "messages"}})
    async with provider_for(loopback.base_url) as provider:
        with pytest.raises(BadRequestError):
            [e async for e in provider.stream(REQUEST)]
    assert len(loopback.requests) == 2
