"""Tests for the error classification helpers (pure functions, no network)."""

from __future__ import annotations

import json

import httpx
import pytest

from tavern_tui.errors import (
    AuthenticationError,
    BadRequestError,
    NetworkError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ServerError,
)
from tavern_tui.providers.errors import (
    FALLBACK_PARAMETERS,
    MAX_SERVER_MESSAGE,
    classify_http_error,
    classify_stream_error,
    from_httpx_exception,
    redact,
    rejected_parameter,
)


@pytest.mark.parametrize(
    ("status", "body", "expected", "param"),
    [
        (401, '{"error": {"message": "bad key", "code": "invalid_api_key"}}', AuthenticationError, None),
        (403, b'{"error": "forbidden"}', AuthenticationError, None),
        (403, '{"error": {"message": "no money", "code": "insufficient_quota"}}', RateLimitError, None),
        (429, "", RateLimitError, None),
        (402, '{"error": {"message": "Insufficient credits"}}', RateLimitError, None),
        (400, '{"object": "error", "message": "bad temp", "type": "BadRequestError", "param": "temperature"}',
         BadRequestError, "temperature"),
        (422, '{"detail": [{"loc": ["body", "messages"], "msg": "field required"}]}', BadRequestError, None),
        (404, '{"error": {"message": "model x not found", "param": null}}', BadRequestError, None),
        (408, "", ProviderTimeout, None),
        (503, "<html>down</html>", ServerError, None),
        (418, "teapot", ProviderError, None),
    ],
)
def test_classify_http_error(status, body, expected, param) -> None:
    error = classify_http_error(status, body, {})
    assert type(error) is expected
    assert error.status == status
    assert error.param == param
    assert f"HTTP {status}" in str(error)


def test_http_error_keeps_server_message_and_bounds_it() -> None:
    error = classify_http_error(500, '{"error": {"message": "' + "spam " * 500 + '"}}')
    assert "spam spam" in str(error)
    assert len(str(error)) < MAX_SERVER_MESSAGE + 80
    assert "\n" not in str(classify_http_error(500, "line one\nline two"))


def test_retry_after_mentioned_with_any_header_case() -> None:
    assert "retry after 12 s" in str(classify_http_error(429, "", {"Retry-After": "12"}))
    assert "retry after" not in str(classify_http_error(429, "", None))


@pytest.mark.parametrize(
    ("obj", "expected", "status"),
    [
        ({"error": {"message": "overloaded", "type": "server_error"}}, ServerError, None),
        ({"error": {"message": "Provider returned error", "code": 502}}, ServerError, 502),
        ({"error": {"message": "slow", "code": "429"}}, RateLimitError, 429),
        ({"error": {"message": "You exceeded your current quota"}}, RateLimitError, None),
        ({"error": {"message": "nope", "code": "invalid_api_key"}}, AuthenticationError, None),
        ({"error": {"message": "too long", "code": "context_length_exceeded", "param": "messages"}},
         BadRequestError, None),
        ({"message": "bare vLLM error", "type": "InternalServerError", "code": 500}, ServerError, 500),
        ({"error": {"weird": True}}, ServerError, None),
    ],
)
def test_classify_stream_error(obj, expected, status) -> None:
    error = classify_stream_error(obj)
    assert type(error) is expected
    assert error.status == status
    assert "stream" in str(error)


def test_stream_error_param() -> None:
    error = classify_stream_error({"error": {"message": "x", "code": "context_length_exceeded", "param": "messages"}})
    assert error.param == "messages"


def test_from_httpx_exception() -> None:
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    refused = from_httpx_exception(httpx.ConnectError("refused", request=request))
    # Nothing answered there: the message names the address and says what to check.
    assert type(refused) is NetworkError and "127.0.0.1:9" in str(refused) and "TAVERN_API_BASE" in str(refused)
    assert type(from_httpx_exception(httpx.ReadError("reset"))) is NetworkError
    assert type(from_httpx_exception(httpx.RemoteProtocolError("peer closed"))) is NetworkError
    timeout = from_httpx_exception(httpx.ReadTimeout("slow", request=request))
    assert type(timeout) is ProviderTimeout and "waiting for" in str(timeout) and "127.0.0.1:9" in str(timeout)
    assert type(from_httpx_exception(httpx.ConnectTimeout("slow"))) is ProviderTimeout
    assert type(from_httpx_exception(httpx.DecodingError("bad gzip"))) is ProviderError


def test_redact() -> None:
    assert redact("key abc123 and abc123", ["abc123"]) == "key *** and ***"
    assert redact("Authorization: Bearer tok-123.x, next") == "Authorization: Bearer ***, next"
    assert redact("Incorrect API key provided: sk-proj-AbCdEf123456") == "Incorrect API key provided: sk-***"
    assert redact("no secrets here", ["", "zzz"]) == "no secrets here"


ALL = list(FALLBACK_PARAMETERS)


def _err(message, param=None, code=None) -> str:
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return json.dumps({"error": error})


@pytest.mark.parametrize(
    ("status", "body", "name", "replacement"),
    [
        # OpenAI o-series / gpt-5 (param set)
        (400, _err("Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
                   "instead.", "max_tokens", "unsupported_parameter"), "max_tokens", "max_completion_tokens"),
        (400, _err("Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value "
                   "is supported.", "temperature", "unsupported_value"), "temperature", None),
        (400, _err("Unsupported parameter: 'stop' is not supported with this model.", "stop"), "stop", None),
        # the same without `param`: read from the message
        (400, _err("Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
                   "instead."), "max_tokens", "max_completion_tokens"),
        (400, _err("Unsupported parameter: 'reasoning_effort' is not supported with this model."),
         "reasoning_effort", None),
        (400, _err("Unknown parameter: 'top_k'."), "top_k", None),
        # Azure OpenAI / older OpenAI models
        (400, _err("Unrecognized request argument supplied: reasoning_effort"), "reasoning_effort", None),
        (400, _err("Unrecognized request arguments supplied: store, seed"), "seed", None),
        # llama.cpp server
        (400, json.dumps({"error": {"code": 400, "message": "Unsupported param: stop",
                                    "type": "invalid_request_error"}}),
         "stop", None),
        # Groq (the "did you mean" is not a rename)
        (400, _err("property 'top_k' is unsupported, did you mean 'top_p'?"), "top_k", None),
        # vLLM SamplingParams checks and its budget check
        (400, json.dumps({"object": "error", "message": "temperature must be non-negative, got -1.0.",
                          "type": "BadRequestError", "param": None, "code": 400}), "temperature", None),
        (400, _err("'max_tokens' or 'max_completion_tokens' is too large: 4000. This model's maximum context length is "
                   "4096 tokens and your request has 500 input tokens (4000 > 4096 - 500)."), "max_tokens", None),
        # Anthropic models behind OpenAI-compatible proxies: the later of the two goes
        (400, json.dumps({"type": "invalid_request_error", "message": "`temperature` and `top_p` cannot both be "
                          "specified for this model. Please use only one."}), "top_p", None),
        # FastAPI/pydantic servers (TabbyAPI, Mistral): 422 with validation details
        (422, json.dumps({"detail": [{"type": "extra_forbidden", "loc": ["body", "store"], "msg": "Extra inputs are "
                          "not permitted"}, {"type": "extra_forbidden", "loc": ["body", "max_completion_tokens"],
                          "msg": "Extra inputs are not permitted", "input": 8192}]}), "max_completion_tokens", None),
        (422, json.dumps({"object": "error",
                          "message": {"detail": [{"type": "extra_forbidden", "loc": ["body", "top_k"],
                                                  "msg": "Extra inputs are not permitted"}]},
                          "type": "invalid_request_error", "param": None, "code": None}), "top_k", None),
        (400, _err("1 validation error for ChatCompletionRequest\nreasoning_effort\n  Extra inputs are not permitted "
                   "[type=extra_forbidden, input_value='low', input_type=str]"), "reasoning_effort", None),
        # Python servers splatting the body into a call
        (400, _err("Completions.create() got an unexpected keyword argument 'presence_penalty'"),
         "presence_penalty", None),
        (400, _err("Invalid value for 'reasoning_effort': expected one of low, medium, high"),
         "reasoning_effort", None),
        (400, _err("This model does not support 'stop'"), "stop", None),
    ],
)
def test_rejected_parameter_recognises_realistic_answers(status, body, name, replacement) -> None:
    rejected = rejected_parameter(status, body, ALL)
    assert rejected is not None
    assert (rejected.name, rejected.replacement) == (name, replacement)
    assert rejected.reason.startswith(f"{status}: ")
    assert "\n" not in rejected.reason


@pytest.mark.parametrize(
    ("status", "body", "candidates"),
    [
        (401, _err("Unsupported parameter: 'temperature'", "temperature"), ALL),
        (403, _err("Unsupported parameter: 'temperature'"), ALL),
        (429, _err("temperature is not supported"), ALL),
        (500, _err("temperature is not supported"), ALL),
        (404, _err("Unsupported parameter: 'temperature'"), ALL),
        (400, _err("temperature is not supported", "temperature", "insufficient_quota"), ALL),  # a quota answer
        (400, _err("Unsupported parameter: 'temperature'", "temperature"), ["top_p"]),  # not an active field
        (400, _err("maximum context length exceeded; lower max_tokens", "messages", "context_length_exceeded"), ALL),
        (400, _err("This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."), ALL),
        (400, _err("Unsupported parameter: 'n'", "n"), ALL),
        (400, _err("Unsupported parameter: 'temperature'"), []),
        (400, "<html>Bad Request</html>", ALL),
        (400, "", ALL),
    ],
)
def test_rejected_parameter_ignores_other_answers(status, body, candidates) -> None:
    assert rejected_parameter(status, body, candidates) is None


def test_rejected_parameter_renames_only_to_an_equivalent_field() -> None:
    body = _err("Unsupported parameter: 'top_k'. Use 'top_p' instead.")
    assert rejected_parameter(400, body, ALL).replacement is None
    body = _err("Unsupported parameter: 'max_completion_tokens'. Use 'max_tokens' instead.")
    assert rejected_parameter(400, body, ALL).replacement == "max_tokens"


def test_rejected_parameter_reason_is_redacted_and_bounded() -> None:
    key = "local-TOKEN-9f8e7d6c5b4a"
    body = _err(f"Unsupported parameter: 'temperature' for token {key} / Bearer abc.def sk-proj-AbCdEf123456 "
                + "x" * 900)
    rejected = rejected_parameter(400, body, ALL, secrets=[key])
    assert rejected is not None and rejected.name == "temperature"
    assert key not in rejected.reason and "abc.def" not in rejected.reason and "AbCdEf123456" not in rejected.reason
    assert len(rejected.reason) <= MAX_SERVER_MESSAGE + len("400: ")
