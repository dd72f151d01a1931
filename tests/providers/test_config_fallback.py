"""Call-config fallback of `OpenAICompatProvider` (seed 000 §3), against the real loopback HTTP server.

A 400/422 answer that blames an active call-config field makes the provider send the request
again without it (or with the value under the equivalent field the server names); the stream
then starts with one `ConfigAdjusted` event. Everything else keeps its usual behaviour.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tavern_tui.engine.stream import Attempts, ChatRequest, ConfigAdjusted, Finished, StreamEvent, TextDelta
from tavern_tui.errors import AuthenticationError, BadRequestError, RateLimitError, ServerError
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.providers.openai_compat import MAX_CONFIG_FALLBACKS, OpenAICompatProvider
from tests.support.loopback import LoopbackServer, sse_chunks_for

KEY = "sk-test-SECRETKEY1234567890"
MESSAGES = [{"role": "user", "content": "Hello there"}]


def openai_error(message: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def unsupported(field: str) -> dict[str, Any]:
    """OpenAI's answer for a parameter a model does not take (o-series, gpt-5)."""
    return openai_error(f"Unsupported parameter: '{field}' is not supported with this model.", field,
                        "unsupported_parameter")


@pytest.fixture
async def make(loopback: LoopbackServer) -> AsyncIterator:
    made: list[OpenAICompatProvider] = []

    def factory(**kwargs: Any) -> OpenAICompatProvider:
        settings = ProviderSettings(base_url=loopback.base_url, model="test-model", api_key=KEY, timeout=2.0)
        kwargs.setdefault("backoff", 0.01)
        provider = OpenAICompatProvider(settings, **kwargs)
        made.append(provider)
        return provider

    yield factory
    for provider in made:
        await provider.aclose()


async def collect(provider: OpenAICompatProvider, config: dict[str, Any]) -> list[StreamEvent]:
    """The stream's events but its `Attempts` reports, whose last must be the provider's record of this call."""
    events = [event async for event in provider.stream(ChatRequest(MESSAGES, config=config))]
    reported = [e for e in events if isinstance(e, Attempts)]
    assert reported and [dict(r) for r in reported[-1].records] == provider.attempts
    return [e for e in events if not isinstance(e, Attempts)]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def bodies(loopback: LoopbackServer) -> list[dict[str, Any]]:
    """The JSON bodies the server received, parsed from the raw bytes."""
    return [json.loads(r.body) for r in loopback.requests]


def adjustments(events: list[StreamEvent]) -> list[ConfigAdjusted]:
    return [e for e in events if isinstance(e, ConfigAdjusted)]


async def test_param_named_field_is_dropped_and_reported_first(loopback, make) -> None:
    loopback.enqueue_json(400, unsupported("temperature"))
    loopback.enqueue_sse(sse_chunks_for("Warm enough."))
    config = {"temperature": 0.7, "max_tokens": 300}
    provider = make()
    events = await collect(provider, config)

    sent = bodies(loopback)
    assert len(sent) == 2
    assert sent[0]["temperature"] == 0.7
    assert "temperature" not in sent[1] and b'"temperature"' not in loopback.requests[1].body
    assert sent[1]["max_tokens"] == 300 and sent[1]["messages"] == MESSAGES and sent[1]["stream"] is True

    assert isinstance(events[0], ConfigAdjusted)
    assert len(adjustments(events)) == 1
    adjusted = events[0]
    assert adjusted.requested == {"temperature": 0.7, "max_tokens": 300}
    assert adjusted.effective == {"max_tokens": 300}
    assert adjusted.omitted == {
        "temperature": "400: Unsupported parameter: 'temperature' is not supported with this model."}
    assert text_of(events) == "Warm enough."
    assert events[-1] == Finished("stop", saw_done=True)
    assert config == {"temperature": 0.7, "max_tokens": 300}  # the caller's config is unchanged

    assert [{k: v for k, v in a.items() if k != "message"} for a in provider.attempts] == [
        {"status": 400, "error": "bad_request", "retry_delay": None,
         "config": {"temperature": 0.7, "max_tokens": 300}, "omitted": {}},
        {"status": 200, "error": None, "retry_delay": None,
         "config": {"max_tokens": 300}, "omitted": adjusted.omitted},
    ]
    # The refused attempt keeps the server's own words.
    assert "'temperature' is not supported with this model" in provider.attempts[0]["message"]


async def test_max_tokens_moves_to_the_named_replacement(loopback, make) -> None:
    loopback.enqueue_json(400, openai_error(
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        "max_tokens", "unsupported_parameter"))
    loopback.enqueue_sse(sse_chunks_for("ok"))
    events = await collect(make(), {"max_tokens": 512, "temperature": 1})

    first, second = bodies(loopback)
    assert first["max_tokens"] == 512 and "max_completion_tokens" not in first
    assert "max_tokens" not in second
    assert second["max_completion_tokens"] == 512
    assert second["temperature"] == 1
    adjusted = events[0]
    assert isinstance(adjusted, ConfigAdjusted)
    assert adjusted.effective == {"temperature": 1, "max_completion_tokens": 512}
    assert list(adjusted.omitted) == ["max_tokens"]
    assert adjusted.omitted["max_tokens"].startswith("400: Unsupported parameter: 'max_tokens'")
    assert adjusted.omitted["max_tokens"].endswith("→ max_completion_tokens")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        # Azure / OpenAI, param null
        ("reasoning_effort", "high", "Unrecognized request argument supplied: reasoning_effort"),
        ("stop", ["\nUser:"], "This model does not support 'stop'"),
        ("stop", ["###"], "Unsupported param: stop"),  # llama.cpp server wording
        ("temperature", 2.5, "temperature must be in [0, 2], got 2.5."),  # vLLM-style wording
    ],
)
async def test_field_named_only_in_the_message_text(loopback, make, field: str, value: Any, message: str) -> None:
    loopback.enqueue_json(400, {"error": {"message": message, "type": "invalid_request_error", "param": None,
                                          "code": None}})
    loopback.enqueue_sse(sse_chunks_for("fine"))
    config = {"max_tokens": 80, "top_p": 0.9, field: value}
    events = await collect(make(), config)

    first, second = bodies(loopback)
    assert first[field] == value
    assert field not in second
    assert second["max_tokens"] == 80 and second["top_p"] == 0.9
    adjusted = events[0]
    assert isinstance(adjusted, ConfigAdjusted)
    assert adjusted.effective == {"max_tokens": 80, "top_p": 0.9}
    assert adjusted.omitted == {field: f"400: {message}"}
    assert text_of(events) == "fine"


async def test_pydantic_422_names_the_field_in_loc(loopback, make) -> None:
    # Mistral's shape: a 422 whose message is a JSON string of FastAPI validation details.
    detail = {"detail": [{"type": "extra_forbidden", "loc": ["body", "reasoning_effort"],
                          "msg": "Extra inputs are not permitted", "input": "low"}]}
    loopback.enqueue_json(422, {"object": "error", "message": json.dumps(detail), "type": "internal_error_proxy",
                                "param": None, "code": "1000"})
    loopback.enqueue_sse(sse_chunks_for("bonjour"))
    events = await collect(make(), {"temperature": 0.7, "reasoning_effort": "low"})
    assert "reasoning_effort" not in bodies(loopback)[1]
    assert list(adjustments(events)[0].omitted) == ["reasoning_effort"]
    assert text_of(events) == "bonjour"


@pytest.mark.parametrize(("field", "answer"), [
    ("top_p", unsupported("top_p")),
    ("top_k", openai_error("property 'top_k' is unsupported, did you mean 'top_p'?")),  # Groq
    ("frequency_penalty", {"detail": [{"type": "extra_forbidden", "loc": ["body", "frequency_penalty"],
                                       "msg": "Extra inputs are not permitted", "input": 0.0}]}),  # FastAPI 422
    ("seed", openai_error("Unrecognized request argument supplied: seed")),  # Azure
])
async def test_another_rejected_parameter_fails_naming_it_and_the_way_out(loopback, make, field: str,
                                                                         answer: dict[str, Any]) -> None:
    # Seed 000 §3: only temperature, maxTokens, reasoningEffort and stop are omitted by the fallback.
    loopback.enqueue_json(422 if "detail" in answer else 400, answer)
    loopback.enqueue_sse(sse_chunks_for("never"))
    provider = make()
    with pytest.raises(BadRequestError) as info:
        await collect(provider, {"temperature": 0.7, "top_p": 0.9, "top_k": 40, "frequency_penalty": 0.0, "seed": 3})
    assert len(loopback.requests) == 1  # never retried
    assert info.value.param == field
    message = str(info.value)
    assert f"rejected the call parameter '{field}'" in message
    assert f"leave '{field}' out for this playthrough" in message and "tavern omit-param" in message
    assert provider.attempts[0]["message"] == message


async def test_two_rejected_fields_in_a_row(loopback, make) -> None:
    loopback.enqueue_json(400, unsupported("temperature"))
    loopback.enqueue_json(400, {"error": {"message": "Unrecognized request argument supplied: reasoning_effort"}})
    loopback.enqueue_sse(sse_chunks_for("third time"))
    provider = make()
    events = await collect(provider, {"temperature": 0.5, "reasoning_effort": "low", "max_tokens": 100})

    sent = bodies(loopback)
    assert len(sent) == 3
    assert {"temperature", "reasoning_effort"} <= set(sent[0])
    assert "temperature" not in sent[1] and sent[1]["reasoning_effort"] == "low"
    assert "temperature" not in sent[2] and "reasoning_effort" not in sent[2] and sent[2]["max_tokens"] == 100
    assert len(adjustments(events)) == 1 and isinstance(events[0], ConfigAdjusted)
    assert events[0].effective == {"max_tokens": 100}
    assert set(events[0].omitted) == {"temperature", "reasoning_effort"}
    assert [set(a["omitted"]) for a in provider.attempts] == [set(), {"temperature"},
                                                              {"temperature", "reasoning_effort"}]
    assert [a["status"] for a in provider.attempts] == [400, 400, 200]
    assert text_of(events) == "third time"


async def test_same_field_rejected_twice_is_raised(loopback, make) -> None:
    loopback.enqueue_json(400, unsupported("temperature"))
    loopback.enqueue_json(400, unsupported("temperature"))  # a server that insists: no loop
    loopback.enqueue_sse(sse_chunks_for("never"))
    provider = make()
    with pytest.raises(BadRequestError) as info:
        await collect(provider, {"temperature": 0.5})
    assert info.value.param == "temperature"
    assert len(loopback.requests) == 2
    assert "temperature" not in bodies(loopback)[1]
    assert provider.attempts[-1]["omitted"] == {
        "temperature": "400: Unsupported parameter: 'temperature' is not supported with this model."}


async def test_renamed_max_tokens_rejected_again_is_raised(loopback, make) -> None:
    # max_tokens and max_completion_tokens are the one maxTokens override: tried once (seed 000 §3).
    loopback.enqueue_json(400, openai_error(
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        "max_tokens"))
    loopback.enqueue_json(400, openai_error(
        "Unsupported parameter: 'max_completion_tokens' is not supported. Use 'max_tokens' instead.",
        "max_completion_tokens"))
    loopback.enqueue_sse(sse_chunks_for("never"))
    provider = make()
    with pytest.raises(BadRequestError) as info:
        await collect(provider, {"max_tokens": 64})
    sent = bodies(loopback)
    assert [("max_tokens" in b, "max_completion_tokens" in b) for b in sent] == [(True, False), (False, True)]
    assert info.value.param == "max_completion_tokens"
    assert provider.attempts[-1]["omitted"]["max_tokens"].endswith("→ max_completion_tokens")


async def test_at_most_four_fallback_retries_one_per_override(loopback, make) -> None:
    fields = ["temperature", "max_tokens", "reasoning_effort", "stop"]  # seed 000 §3's four overrides
    for field in fields:
        loopback.enqueue_json(400, unsupported(field))
    loopback.enqueue_json(400, unsupported("temperature"))  # a fifth refusal: nothing left to try
    loopback.enqueue_sse(sse_chunks_for("never"))
    provider = make(max_retries=2)
    config = {"temperature": 1, "max_tokens": 10, "reasoning_effort": "low", "stop": ["x"], "top_p": 0.5}
    with pytest.raises(BadRequestError) as info:
        await collect(provider, config)
    assert info.value.param == "temperature"
    assert len(loopback.requests) == 1 + MAX_CONFIG_FALLBACKS == 5
    assert set(provider.attempts[-1]["omitted"]) == set(fields)
    assert bodies(loopback)[-1] == {**{k: v for k, v in bodies(loopback)[0].items() if k not in fields}}
    assert bodies(loopback)[-1]["top_p"] == 0.5


async def test_fallback_and_transient_retries_are_counted_apart(loopback, make) -> None:
    loopback.enqueue_json(429, {"error": {"message": "Slow down"}}, headers={"Retry-After": "0.01"})
    loopback.enqueue_json(400, unsupported("temperature"))
    loopback.enqueue_json(503, {"error": {"message": "overloaded"}}, headers={"Retry-After": "0.01"})
    loopback.enqueue_sse(sse_chunks_for("made it"))
    provider = make(max_retries=2)
    events = await collect(provider, {"temperature": 0.3})
    assert [a["status"] for a in provider.attempts] == [429, 400, 503, 200]
    assert [a["retry_delay"] for a in provider.attempts] == [0.01, None, 0.01, None]
    assert [("temperature" in b) for b in bodies(loopback)] == [True, True, False, False]
    assert isinstance(events[0], ConfigAdjusted) and text_of(events) == "made it"


async def test_401_is_not_retried_even_when_it_names_a_field(loopback, make) -> None:
    loopback.enqueue_json(401, openai_error("Unsupported parameter: 'temperature'", "temperature", "invalid_api_key"))
    loopback.enqueue_sse(sse_chunks_for("never"))
    provider = make()
    with pytest.raises(AuthenticationError):
        await collect(provider, {"temperature": 0.5})
    assert len(loopback.requests) == 1
    assert provider.attempts[0]["omitted"] == {}


async def test_429_keeps_its_retry_and_omits_nothing(loopback, make) -> None:
    loopback.enqueue_json(429, openai_error("Rate limit reached; temperature is not supported", "temperature"),
                          headers={"Retry-After": "0.01"})
    loopback.enqueue_sse(sse_chunks_for("patience"))
    provider = make(max_retries=1)
    events = await collect(provider, {"temperature": 0.5})
    assert [b["temperature"] for b in bodies(loopback)] == [0.5, 0.5]
    assert adjustments(events) == []
    assert [a["omitted"] for a in provider.attempts] == [{}, {}]
    assert text_of(events) == "patience"


async def test_quota_400_and_server_errors_never_omit(loopback, make) -> None:
    loopback.enqueue_json(400, openai_error("temperature is not supported: you exceeded your quota", "temperature",
                                            "insufficient_quota"))
    with pytest.raises(RateLimitError):
        await collect(make(max_retries=0), {"temperature": 0.5})
    loopback.enqueue_json(500, openai_error("temperature is not supported", "temperature", "server_error"))
    with pytest.raises(ServerError):
        await collect(make(max_retries=0), {"temperature": 0.5})
    assert [b["temperature"] for b in bodies(loopback)] == [0.5, 0.5]


@pytest.mark.parametrize(
    ("config", "body"),
    [
        ({"temperature": 0.5},
         openai_error("Unsupported parameter: 'top_p' is not supported with this model.", "top_p")),
        ({"temperature": 0.5}, openai_error("top_p must be in (0, 1], got 1.5.")),  # text names an absent field
        ({"temperature": 0.5}, openai_error("This model's maximum context length is 4096 tokens; temperature ignored",
                                            "messages", "context_length_exceeded")),  # param blames something else
        ({"n": 2}, openai_error("Unsupported parameter: 'n'", "n")),  # not a fallback field
        ({"temperature": 0.5}, {"error": {"message": "Invalid request"}}),  # names nothing
    ],
)
async def test_400_not_about_an_active_field_is_raised(
        loopback, make, config: dict[str, Any], body: dict[str, Any]) -> None:
    loopback.enqueue_json(400, body)
    loopback.enqueue_sse(sse_chunks_for("never"))
    provider = make()
    with pytest.raises(BadRequestError):
        await collect(provider, config)
    assert len(loopback.requests) == 1
    assert provider.attempts[0]["omitted"] == {}


async def test_404_is_not_a_fallback(loopback, make) -> None:
    loopback.enqueue_json(404, unsupported("temperature"))
    with pytest.raises(BadRequestError):
        await collect(make(), {"temperature": 0.5})
    assert len(loopback.requests) == 1


async def test_in_band_error_after_200_is_not_a_fallback(loopback, make) -> None:
    error = {"error": {"message": "Unsupported parameter: 'stop'", "type": "invalid_request_error", "param": "stop"}}
    loopback.enqueue_sse([f"data: {json.dumps(error)}\n\n"], done=False)
    with pytest.raises(BadRequestError):
        await collect(make(), {"stop": ["x"]})
    assert len(loopback.requests) == 1


async def test_no_adjustment_no_event(loopback, make) -> None:
    loopback.enqueue_sse(sse_chunks_for("plain"))
    events = await collect(make(), {"temperature": 0.5})
    assert adjustments(events) == [] and isinstance(events[0], TextDelta)


async def test_cancelled_stream_never_retries(loopback, make) -> None:
    loopback.enqueue_hang(2.0)
    loopback.enqueue_sse(sse_chunks_for("never"))
    task = asyncio.create_task(collect(make(), {"temperature": 0.5}))
    for _ in range(200):
        if loopback.requests:
            break
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.05)
    assert len(loopback.requests) == 1


async def test_key_never_in_reasons_or_attempts(loopback, make) -> None:
    loopback.enqueue_json(400, openai_error(f"Unsupported parameter: 'temperature' (request by key {KEY})",
                                            "temperature"))
    loopback.enqueue_json(400, {"error": {"message": f"Authorization: Bearer {KEY} - Unsupported param: stop"}})
    loopback.enqueue_sse(sse_chunks_for("safe"))
    provider = make()
    events = await collect(provider, {"temperature": 0.5, "stop": ["x"]})
    adjusted = adjustments(events)[0]
    assert set(adjusted.omitted) == {"temperature", "stop"}
    dumped = json.dumps([adjusted.omitted, adjusted.effective, adjusted.requested, provider.attempts]) + repr(adjusted)
    assert KEY not in dumped and "SECRETKEY" not in dumped
    assert "***" in adjusted.omitted["temperature"] and "***" in adjusted.omitted["stop"]


async def test_odd_short_key_does_not_hide_the_field(loopback, make) -> None:
    # The key is matched as received and redacted only in the reason kept.
    loopback.enqueue_json(400, openai_error("Unsupported parameter: 'stop' is not supported with this model."))
    loopback.enqueue_sse(sse_chunks_for("ok"))
    settings = ProviderSettings(base_url=loopback.base_url, model="m", api_key="sto", timeout=2.0)
    async with OpenAICompatProvider(settings, backoff=0.01) as provider:
        events = [e async for e in provider.stream(ChatRequest(MESSAGES, config={"stop": ["x"]}))]
    reason = adjustments(events)[0].omitted["stop"]
    assert "sto" not in reason.replace("***", "")
