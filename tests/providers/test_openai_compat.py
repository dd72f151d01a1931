"""Tests for `OpenAICompatProvider` against the real loopback HTTP server (no mocks of httpx)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from tavern_tui.engine.stream import (
    Attempts,
    ChatRequest,
    Finished,
    Provider,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    Usage,
)
from tavern_tui.errors import (
    AuthenticationError,
    BadRequestError,
    NetworkError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ServerError,
)
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.providers.openai_compat import RETRY_CAP, OpenAICompatProvider, retry_delay
from tests.support.loopback import LoopbackServer, closed_port_url, rechunk, sse_chunks_for

KEY = "sk-test-SECRETKEY1234567890"
REQUEST = ChatRequest(messages=[{"role": "user", "content": "Hello there"}])


@pytest.fixture
async def make(loopback: LoopbackServer) -> AsyncIterator:
    """Factory for providers pointed at the loopback server; closes them after the test."""
    made: list[OpenAICompatProvider] = []

    def factory(**kwargs) -> OpenAICompatProvider:
        settings = ProviderSettings(
            base_url=kwargs.pop("base_url", loopback.base_url + "/"),
            model=kwargs.pop("model", "test-model"),
            api_key=kwargs.pop("api_key", KEY),
            timeout=kwargs.pop("timeout", 1.0),
        )
        kwargs.setdefault("backoff", 0.01)
        provider = OpenAICompatProvider(settings, **kwargs)
        made.append(provider)
        return provider

    yield factory
    for provider in made:
        await provider.aclose()


async def collect(provider: OpenAICompatProvider, request: ChatRequest = REQUEST) -> list[StreamEvent]:
    """The stream's events but its `Attempts` reports, whose last must be the provider's record of this call."""
    events = [event async for event in provider.stream(request)]
    reported = [e for e in events if isinstance(e, Attempts)]
    assert reported and [dict(r) for r in reported[-1].records] == provider.attempts
    return [e for e in events if not isinstance(e, Attempts)]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def assert_no_key(exc: BaseException) -> None:
    assert KEY not in str(exc)
    assert KEY not in repr(exc)
    assert "SECRETKEY" not in str(exc)


async def test_plain_stream(loopback, make) -> None:
    loopback.enqueue_sse(sse_chunks_for("The tavern is warm tonight.", pieces=4))
    provider = make(api_key="")  # no key: nothing can start like one (the shield's own test holds that case)
    events = await collect(provider)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["The tav", "ern is ", "warm to", "night."]
    assert text_of(events) == "The tavern is warm tonight."
    assert events[-2:] == [Usage(10, 5, 15), Finished("stop", saw_done=True)]
    assert isinstance(provider, Provider)
    assert provider.attempts == [{"status": 200, "error": None, "retry_delay": None, "config": {}, "omitted": {}}]


async def test_a_client_warmed_in_a_worker_thread_serves_the_stream_on_the_loop(loopback, make) -> None:
    # The chat warms the provider from a worker after it is shown: the client is made there, once,
    # and the first request on the event loop uses it.
    loopback.enqueue_sse(sse_chunks_for("Warm already.", pieces=2))
    provider = make(api_key="")
    assert provider._client is None
    await asyncio.gather(*(asyncio.to_thread(provider.warm) for _ in range(3)))
    client = provider._client
    assert client is not None
    assert text_of(await collect(provider)) == "Warm already." and provider._client is client


async def test_request_body_path_and_auth_header(loopback, make) -> None:
    loopback.enqueue_sse(sse_chunks_for("ok"))
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}], config={"temperature": 0.7})
    await collect(make(), request)
    sent = loopback.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")  # trailing slash stripped
    assert sent.json["model"] == "test-model"
    assert sent.json["messages"] == [{"role": "user", "content": "hi"}]
    assert sent.json["stream"] is True
    assert sent.json["stream_options"] == {"include_usage": True}
    assert sent.json["temperature"] == 0.7
    assert sent.headers["authorization"] == f"Bearer {KEY}"


async def test_request_model_overrides_settings(loopback, make) -> None:
    loopback.enqueue_sse(sse_chunks_for("ok"))
    await collect(make(), ChatRequest(messages=[], model="other-model"))
    assert loopback.requests[0].json["model"] == "other-model"


async def test_no_authorization_header_without_key(loopback, make) -> None:
    loopback.enqueue_sse(sse_chunks_for("ok"))
    await collect(make(api_key=""))
    assert "authorization" not in loopback.requests[0].headers


async def test_events_split_across_network_chunks(loopback, make) -> None:
    # Compact chunks keep the byte count (one HTTP chunk per 3 bytes) and the test time low.
    parts = ["Dragons ", "— 🐉 — ", "sleep."]
    events = [json.dumps({"choices": [{"index": 0, "delta": {"content": p}}]}, ensure_ascii=False) for p in parts]
    events.append('{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}')
    body = [f"data: {e}\n\n" for e in events] + ["data: [DONE]\n\n"]
    loopback.enqueue_sse(rechunk(body, 3), delay=0.001, done=False)
    received = await collect(make(api_key=""))  # delta boundaries as sent
    assert [e.text for e in received if isinstance(e, TextDelta)] == parts
    assert received[-1] == Finished("stop", saw_done=True)


async def test_crlf_line_endings(loopback, make) -> None:
    chunks = sse_chunks_for("crlf works", eol="\r\n") + ["data: [DONE]\r\n\r\n"]
    loopback.enqueue_sse(rechunk(chunks, 5), done=False)
    events = await collect(make())
    assert text_of(events) == "crlf works"
    assert events[-1] == Finished("stop", saw_done=True)


async def test_keep_alive_comments_interleaved(loopback, make) -> None:
    chunks = sse_chunks_for("kept alive", pieces=2)
    mixed = [": keep-alive\n\n"] + [c for chunk in chunks for c in (chunk, ": keep-alive\n\n")]
    loopback.enqueue_sse(mixed)
    assert text_of(await collect(make())) == "kept alive"


async def test_chunk_with_empty_choices_is_skipped_but_usage_read(loopback, make) -> None:
    chunks = sse_chunks_for("abc", usage=None)
    chunks.insert(1, 'data: {"id": "x", "choices": [], '
                     '"usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}\n\n')
    chunks.insert(2, 'data: {"id": "x", "choices": []}\n\n')
    loopback.enqueue_sse(chunks)
    events = await collect(make())
    assert text_of(events) == "abc"
    assert events[-2:] == [Usage(3, 1, 4), Finished("stop", True)]


async def test_usage_only_final_chunk(loopback, make) -> None:
    loopback.enqueue_sse(sse_chunks_for("four tokens here", usage=(123, 45)))
    events = await collect(make())
    usages = [e for e in events if isinstance(e, Usage)]
    assert usages == [Usage(prompt_tokens=123, completion_tokens=45, total_tokens=168)]


async def test_reasoning_kept_apart_from_content(loopback, make) -> None:
    chunks = sse_chunks_for("The answer.", reasoning="Think first.", pieces=2)
    chunks.insert(-2, 'data: {"choices": [{"index": 0, "delta": {"reasoning": "(alt field)"}}]}\n\n')
    loopback.enqueue_sse(chunks)
    events = await collect(make())
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Think first.(alt field)"
    assert text_of(events) == "The answer."
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert all(isinstance(e, ReasoningDelta) for e in events[1:first_text])


async def test_missing_done_at_close(loopback, make) -> None:
    loopback.enqueue_sse(sse_chunks_for("no done marker", finish_reason="length"), done=False)
    events = await collect(make())
    assert text_of(events) == "no done marker"
    assert events[-1] == Finished("length", saw_done=False)


async def test_done_without_final_blank_line_still_counts(loopback, make) -> None:
    loopback.enqueue_sse(sse_chunks_for("x") + ["data: [DONE]"], done=False)
    assert (await collect(make()))[-1] == Finished("stop", saw_done=True)


async def test_error_object_mid_stream_after_text(loopback, make) -> None:
    chunks = sse_chunks_for("Partial ", pieces=1, usage=None)[:2]
    chunks.append('data: {"error": {"message": "The server had an error", "type": "server_error", "code": null}}\n\n')
    loopback.enqueue_sse(chunks, done=False)
    provider = make()
    received: list[StreamEvent] = []
    with pytest.raises(ServerError, match="The server had an error") as info:
        async for event in provider.stream(REQUEST):
            received.append(event)
    assert text_of(received) == "Partial "
    assert len(loopback.requests) == 1  # never retried after text was yielded
    assert provider.attempts[-1]["error"] == "server"
    assert_no_key(info.value)


async def test_in_band_quota_error_is_rate_limit(loopback, make) -> None:
    loopback.enqueue_sse(['data: {"error": {"message": "You exceeded your current quota", '
                          '"type": "insufficient_quota"}}\n\n'], done=False)
    with pytest.raises(RateLimitError, match="quota"):
        await collect(make(max_retries=0))


async def test_401_is_authentication_error_without_key_in_message(loopback, make) -> None:
    body = {"error": {"message": f"Incorrect API key provided: {KEY}.", "type": "invalid_request_error",
                      "code": "invalid_api_key"}}
    loopback.enqueue_json(401, body)
    provider = make()
    with pytest.raises(AuthenticationError, match="Incorrect API key provided") as info:
        await collect(provider)
    assert info.value.status == 401
    assert_no_key(info.value)
    assert len(loopback.requests) == 1  # not retried
    assert provider.attempts == [{"status": 401, "error": "authentication", "retry_delay": None, "config": {},
                                  "omitted": {}, "message": str(info.value)}]


async def test_429_with_retry_after_no_retries(loopback, make) -> None:
    loopback.enqueue_json(429, {"error": {"message": "Slow down", "type": "requests"}}, headers={"Retry-After": "7"})
    with pytest.raises(RateLimitError, match="Slow down") as info:
        await collect(make(max_retries=0))
    assert "retry after 7" in str(info.value)
    assert len(loopback.requests) == 1


async def test_429_retries_exhausted(loopback, make) -> None:
    for _ in range(2):
        loopback.enqueue_json(429, {"error": {"message": "Slow down"}}, headers={"Retry-After": "0.01"})
    provider = make(max_retries=1)
    with pytest.raises(RateLimitError):
        await collect(provider)
    assert len(loopback.requests) == 2
    assert [a["retry_delay"] for a in provider.attempts] == [0.01, None]


async def test_429_then_200_succeeds(loopback, make) -> None:
    loopback.enqueue_json(429, {"error": {"message": "Slow down"}}, headers={"Retry-After": "0.02"})
    loopback.enqueue_sse(sse_chunks_for("second time lucky"))
    provider = make(max_retries=2)
    events = await collect(provider)
    assert text_of(events) == "second time lucky"
    assert len(loopback.requests) == 2
    assert provider.attempts == [
        {"status": 429, "error": "rate_limit", "retry_delay": 0.02, "config": {}, "omitted": {},
         "message": "Rate limited or out of quota, retry after 0.02 s (HTTP 429): Slow down"},
        {"status": 200, "error": None, "retry_delay": None, "config": {}, "omitted": {}},
    ]


async def test_500_is_server_error_after_retries(loopback, make) -> None:
    for _ in range(3):
        loopback.enqueue_json(500, {"error": {"message": "boom", "type": "server_error"}})
    provider = make(max_retries=2)
    with pytest.raises(ServerError, match="boom") as info:
        await collect(provider)
    assert info.value.status == 500
    assert len(loopback.requests) == 3
    assert [a["status"] for a in provider.attempts] == [500, 500, 500]
    assert all(0 < a["retry_delay"] <= 0.04 for a in provider.attempts[:2])


async def test_400_names_param(loopback, make) -> None:
    body = {"error": {"message": "temperature must be <= 2", "type": "invalid_request_error", "param": "temperature",
                      "code": None}}
    loopback.enqueue_json(400, body)
    with pytest.raises(BadRequestError) as info:
        await collect(make())
    assert info.value.param == "temperature"
    assert "temperature must be <= 2" in str(info.value)
    assert len(loopback.requests) == 1


async def test_html_error_page_is_truncated(loopback, make) -> None:
    loopback.enqueue_json(502, "<html>" + "x" * 5000 + "</html>", headers={"Content-Type": "text/html"})
    with pytest.raises(ServerError) as info:
        await collect(make(max_retries=0))
    assert len(str(info.value)) < 400


async def test_connection_refused_is_network_error() -> None:
    settings = ProviderSettings(base_url=closed_port_url(), model="m", api_key=KEY, timeout=1.0)
    async with OpenAICompatProvider(settings, max_retries=1, backoff=0.01) as provider:
        with pytest.raises(NetworkError) as info:
            await collect(provider)
        assert [a["error"] for a in provider.attempts] == ["network", "network"]
    assert_no_key(info.value)


async def test_connection_dropped_mid_stream_is_network_error_not_retried(loopback, make) -> None:
    loopback.enqueue_sse(sse_chunks_for("cut off", pieces=1, usage=None)[:2], done=False, abort=True)
    provider = make()
    received: list[StreamEvent] = []
    with pytest.raises(NetworkError):
        async for event in provider.stream(REQUEST):
            received.append(event)
    assert text_of(received) == "cut off"
    assert len(loopback.requests) == 1


async def test_server_hang_is_timeout(loopback, make) -> None:
    loopback.enqueue_hang(1.0)
    provider = make(timeout=0.2)
    with pytest.raises(ProviderTimeout) as info:
        await collect(provider)
    assert len(loopback.requests) == 1  # timeouts are not retried
    assert_no_key(info.value)


async def test_non_json_data_line_is_server_error(loopback, make) -> None:
    loopback.enqueue_sse(["data: this is not json\n\n"])
    with pytest.raises(ServerError, match="not JSON"):
        await collect(make())
    assert len(loopback.requests) == 1  # a malformed body is not worth retrying


async def test_html_200_answer_names_the_problem(loopback, make) -> None:
    loopback.enqueue_json(200, "<html><body>Welcome</body></html>", headers={"Content-Type": "text/html"})
    with pytest.raises(ServerError, match="base URL"):
        await collect(make())


async def test_json_non_stream_answer(loopback, make) -> None:
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Whole reply."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
    }
    loopback.enqueue_json(200, completion)
    events = await collect(make())
    assert events == [TextDelta("Whole reply."), Usage(9, 3, 12), Finished("stop", saw_done=True)]


async def test_key_never_in_errors_of_any_kind(loopback, make) -> None:
    loopback.enqueue_json(500, {"error": {"message": f"upstream said Authorization: Bearer {KEY}"}})
    loopback.enqueue_json(400, {"error": {"message": f"bad key {KEY}", "param": "messages"}})
    revoked = json.dumps({"error": {"message": f"key {KEY} revoked", "code": "invalid_api_key"}})
    loopback.enqueue_sse([revoked.join(["data: ", "\n\n"])])
    for expected in (ServerError, BadRequestError, AuthenticationError):
        with pytest.raises(expected) as info:
            await collect(make(max_retries=0))
        assert_no_key(info.value)


async def test_exact_key_redacted_even_when_not_key_shaped(loopback, make) -> None:
    odd_key = "local-TOKEN-9f8e7d6c5b4a"
    loopback.enqueue_json(401, {"error": {"message": f"token {odd_key} is unknown"}})
    with pytest.raises(AuthenticationError, match="token \\*\\*\\* is unknown") as info:
        await collect(make(api_key=odd_key))
    assert odd_key not in str(info.value) and odd_key not in repr(info.value)


async def test_consumer_stopping_early_closes_response(loopback, make) -> None:
    loopback.enqueue_sse(sse_chunks_for("a b c d e f g h", pieces=8), delay=0.01)
    loopback.enqueue_sse(sse_chunks_for("next"))
    provider = make()
    stream = provider.stream(REQUEST)
    async for event in stream:
        if isinstance(event, TextDelta):
            break
    await stream.aclose()
    # The connection was closed, so the server's next write fails instead of filling a buffer.
    for _ in range(100):
        if loopback.hangups:
            break
        await asyncio.sleep(0.01)
    assert loopback.hangups == 1
    assert text_of(await asyncio.wait_for(collect(provider), 1.0)) == "next"


def test_retry_delay_honours_retry_after_with_cap() -> None:
    assert retry_delay(0, {"Retry-After": "3"}, 0.5) == 3
    assert retry_delay(0, {"retry-after": "120"}, 0.5) == RETRY_CAP
    assert retry_delay(0, {"retry-after-ms": "250"}, 0.5) == 0.25
    for attempt, base in [(0, 0.5), (1, 1.0), (2, 2.0), (10, RETRY_CAP)]:
        assert 0.75 * base <= retry_delay(attempt, None, 0.5) <= base
    assert 0.375 <= retry_delay(0, {"Retry-After": "soon"}, 0.5) <= 0.5


def test_repr_hides_key() -> None:
    provider = OpenAICompatProvider(ProviderSettings("http://x/v1", "m", KEY))
    assert KEY not in repr(provider)
    assert isinstance(provider.attempts, list) and provider.name == "openai-compatible"


@pytest.mark.parametrize("status", [403, 404, 418])
async def test_other_statuses(loopback, make, status: int) -> None:
    loopback.enqueue_json(status, {"error": {"message": "nope"}})
    expected = {403: AuthenticationError, 404: BadRequestError, 418: ProviderError}[status]
    with pytest.raises(ProviderError) as info:
        await collect(make())
    assert type(info.value) is expected
