"""Tests for the error classification helpers (pure functions, no network)."""

from __future__ import annotations

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
    MAX_SERVER_MESSAGE,
    classify_http_error,
    classify_stream_error,
    from_httpx_exception,
    redact,
)


@pytest.mark.parametrize(
    ("status", "body", "expected", "param"),
    [
        (401, '{"error": {"message": "bad key", "code": "invalid_api_key"}}', AuthenticationError, None),
        (403, b'{"error": "forbidden"}', AuthenticationError, None),
        (403, '{"error": {"message": "no money", "code": "insufficient_quota"}}', RateLimitError, None),
        (429, "", RateLimitError, None),
        (402, '{"error": {"message": "Insufficient credits"}}', RateLimitError, None),
        (400, '{"object": "error", "message": "bad temp", "type": "BadRequestError", "param": "temperature"}', BadRequestError, "temperature"),
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
        ({"error": {"message": "too long", "code": "context_length_exceeded", "param": "messages"}}, BadRequestError, None),
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
    assert type(from_httpx_exception(httpx.ConnectError("refused", request=request))) is NetworkError
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
