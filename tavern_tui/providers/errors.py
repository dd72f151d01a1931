"""Provides the mapping from HTTP answers, in-band stream errors and httpx exceptions to `ProviderError`s.

The error body shape is the OpenAI chat-completions one,
`{"error": {"message": str, "type": str, "param": str | None, "code": str | None}}`.
Servers that only claim compatibility also send `{"error": "text"}`, a bare
`{"message": ..., "type": ..., "code": ...}` (vLLM) or `{"error": {"code": 502, ...}}`
(OpenRouter); all are read.

Every message passes through `redact` so it can never carry the API key: callers pass
the key in `secrets`, and bearer tokens / `sk-…` keys are masked regardless.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from tavern_tui.errors import (
    AuthenticationError,
    BadRequestError,
    NetworkError,
    ProviderError,
    ProviderTimeout,
    RateLimitError,
    ServerError,
)
from tavern_tui.text.secret_values import redact_secrets

__all__ = [
    "FALLBACK_PARAMETERS",
    "MAX_SERVER_MESSAGE",
    "RejectedParameter",
    "classify_http_error",
    "classify_stream_error",
    "from_httpx_exception",
    "redact",
    "rejected_parameter",
]

MAX_SERVER_MESSAGE = 300
"""Characters of the server's own message kept in ours (an HTML error page can be huge)."""

_TOKEN_PATTERNS = (
    re.compile(r"(?i)\b(bearer)\s+[^\s\"',;]+"),
    re.compile(r"\bsk-[A-Za-z0-9_\-*]{6,}"),
)
_QUOTA_WORDS = ("insufficient_quota", "quota", "rate_limit", "rate limit", "too many requests")
_AUTH_CODES = {"invalid_api_key", "authentication_error", "permission_error", "unauthorized", "forbidden"}
_BAD_REQUEST_CODES = {
    "invalid_request_error", "context_length_exceeded", "model_not_found", "invalid_value",
    "not_found_error", "string_above_max_length",
}
_SERVER_CODES = {"server_error", "api_error", "overloaded_error", "internal_error", "service_unavailable"}


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove secrets from `text`.

    Args:
        text: any message about to be shown or raised.
        secrets: exact strings to mask (the API key); empty strings are ignored.

    Returns:
        `text` with each secret replaced by "***" (and its dash-less, spaced and base64 forms by
        "[redacted]", `text.secret_values`), and any `Bearer <token>` or `sk-…` key-shaped word
        masked too (servers echo keys back in 401 messages).
    """
    secrets = [s for s in secrets if s]
    for secret in secrets:
        text = text.replace(secret, "***")
    text = redact_secrets(text, secrets)
    text = _TOKEN_PATTERNS[0].sub(r"\1 ***", text)
    return _TOKEN_PATTERNS[1].sub("sk-***", text)


def _shorten(text: str, limit: int = MAX_SERVER_MESSAGE) -> str:
    text = " ".join(text.split())  # one line: the status bar and the trace want no newlines
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_object(parsed: Any) -> dict[str, Any] | None:
    """Find the OpenAI-style error dict in a parsed body, whatever variant the server used."""
    if not isinstance(parsed, dict):
        return None
    err = parsed.get("error")
    if isinstance(err, dict):
        return err
    if isinstance(err, str) and err:
        return {"message": err}
    if "message" in parsed or "detail" in parsed:
        return parsed
    return None


def _message_of(err: Mapping[str, Any]) -> str:
    message = err.get("message") or err.get("detail") or ""
    if not isinstance(message, str):
        message = json.dumps(message, ensure_ascii=False)
    return message


def _text_of(body: bytes | str | None) -> str:
    if body is None:
        return ""
    if isinstance(body, bytes):
        return body.decode("utf-8", errors="replace")
    return body


def _is_quota(err: Mapping[str, Any], *, message: bool) -> bool:
    """True when `code`/`type` (and, if asked, the message) name a quota or rate limit."""
    keys = ("code", "type", "message") if message else ("code", "type")
    words = " ".join(str(err.get(k) or "") for k in keys).lower()
    return any(word in words for word in _QUOTA_WORDS)


def _http_status(value: Any) -> int | None:
    """Read a status from an in-band field that may be an int or a numeric string."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and 100 <= value <= 599:
        return value
    if isinstance(value, str) and value.isdigit() and 100 <= int(value) <= 599:
        return int(value)
    return None


def _retry_after(headers: Mapping[str, str] | None) -> str:
    for key, value in (headers or {}).items():
        if key.lower() == "retry-after":
            return _shorten(str(value), 20)
    return ""


def _classify_status(
    status: int, err: Mapping[str, Any] | None, detail: str, *, where: str, retry_after: str, secrets: list[str]
) -> ProviderError:
    """Pick the subclass for an HTTP status (and the error object's code/type)."""
    param = err.get("param") if err else None
    param = param if isinstance(param, str) and param else None

    def make(cls: type[ProviderError], label: str) -> ProviderError:
        return cls(redact(f"{label} ({where}HTTP {status}): {detail}", secrets), status=status, param=param)

    if status in (429, 402) or (err is not None and 400 <= status < 500 and _is_quota(err, message=False)):
        label = "Rate limited or out of quota"
        if retry_after:
            label += f", retry after {retry_after} s"
        return make(RateLimitError, label)
    if status in (401, 403):
        label = "The endpoint rejected the API key" if status == 401 else "The endpoint refused access"
        return make(AuthenticationError, label)
    if status == 404:
        return make(BadRequestError, "Not found — check the base URL and the model name")
    if status == 413:
        return make(BadRequestError, "The request is too large for the endpoint")
    if status in (400, 422):
        blamed = f" (parameter {param!r})" if param else ""
        return make(BadRequestError, f"The endpoint rejected the request{blamed}")
    if status == 408:
        return make(ProviderTimeout, "The endpoint timed out handling the request")
    if 500 <= status <= 599:
        return make(ServerError, "The endpoint failed on its side")
    return make(ProviderError, "Unexpected answer from the endpoint")


def classify_http_error(
    status: int,
    body: bytes | str | None,
    headers: Mapping[str, str] | None = None,
    *,
    secrets: Iterable[str] = (),
) -> ProviderError:
    """Turn a non-2xx HTTP answer into the matching `ProviderError` subclass.

    Args:
        status: the HTTP status code.
        body: the response body (bytes or text; JSON error object or anything else).
        headers: response headers; `Retry-After` is mentioned in a rate-limit message.
        secrets: strings that must not appear in the message (the API key).

    Returns:
        (not raised) 429, 402, or any 4xx whose `code`/`type` names a quota or rate limit
        (`insufficient_quota`, `rate_limit_exceeded`) → RateLimitError; 401/403 →
        AuthenticationError; 400/404/413/422 → BadRequestError with `param` from the
        error object; 408 → ProviderTimeout; 5xx → ServerError; anything else → ProviderError.
        The message is one plain line that includes the server's own message, shortened
        to `MAX_SERVER_MESSAGE` characters. Status meanings follow RFC 9110 and the
        OpenAI API error-code table.
    """
    secret_list = [s for s in secrets if s]
    text = _text_of(body)
    try:
        parsed: Any = json.loads(text) if text.strip() else None
    except ValueError:
        parsed = None
    err = _error_object(parsed)
    server_message = _message_of(err) if err else text
    detail = _shorten(redact(server_message, secret_list)) or "(no message)"
    return _classify_status(status, err, detail, where="", retry_after=_retry_after(headers), secrets=secret_list)


def classify_stream_error(obj: Mapping[str, Any], *, secrets: Iterable[str] = ()) -> ProviderError:
    """Turn an in-band error object received mid-stream into a `ProviderError`.

    Args:
        obj: the parsed SSE `data` JSON, either `{"error": {...}}` or the error dict itself.
            Read fields: `message`, `type`, `code` (string, or a numeric status as
            OpenRouter sends), `param`, `status`/`status_code`.
        secrets: strings that must not appear in the message (the API key).

    Returns:
        (not raised) a numeric status is classified like `classify_http_error`;
        otherwise `code`/`type`/message decide: quota or rate limit → RateLimitError,
        key/permission → AuthenticationError, invalid request → BadRequestError,
        anything else → ServerError (the server broke the stream). OpenAI-compatible
        servers send these as `data: {"error": {...}}` lines after a 200 status.
    """
    secret_list = [s for s in secrets if s]
    err = _error_object(obj) or (dict(obj) if isinstance(obj, Mapping) else {})
    message = _message_of(err) or json.dumps(err, default=str, ensure_ascii=False)
    detail = _shorten(redact(message, secret_list)) or "(no message)"
    status = _http_status(err.get("status")) or _http_status(err.get("status_code")) or _http_status(err.get("code"))
    if status is not None and status >= 400:
        return _classify_status(status, err, detail, where="in-stream, ", retry_after="", secrets=secret_list)
    code = " ".join(str(err.get(k) or "") for k in ("code", "type")).strip().lower()
    param = err.get("param") if isinstance(err.get("param"), str) and err.get("param") else None
    tags = f" [{_shorten(redact(code, secret_list), 60)}]" if code else ""

    def make(cls: type[ProviderError], label: str) -> ProviderError:
        return cls(redact(f"{label} mid-stream{tags}: {detail}", secret_list), status=status, param=param)

    if _is_quota(err, message=True):
        return make(RateLimitError, "Rate limited or out of quota")
    if any(c in code for c in _AUTH_CODES):
        return make(AuthenticationError, "The endpoint rejected the API key")
    if any(c in code for c in _BAD_REQUEST_CODES):
        return make(BadRequestError, "The endpoint rejected the request")
    if any(c in code for c in _SERVER_CODES):
        return make(ServerError, "The endpoint failed")
    return make(ServerError, "The endpoint reported an error")


def from_httpx_exception(exc: BaseException, *, secrets: Iterable[str] = ()) -> ProviderError:
    """Turn an httpx transport exception into a `ProviderError`.

    Args:
        exc: what httpx raised while connecting, sending or reading.
        secrets: strings that must not appear in the message (the API key).

    Returns:
        (not raised) `httpx.TimeoutException` (connect/read/write/pool) → ProviderTimeout;
        `httpx.ConnectError`, `ReadError`, `WriteError`, `RemoteProtocolError` and other
        `httpx.TransportError`s → NetworkError; anything else → ProviderError. httpx never
        puts request headers in its messages, and we add only the URL, so the key stays out.
    """
    try:
        url = str(exc.request.url)  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # httpx raises RuntimeError when no request is attached
        url = ""
    where = f" ({url})" if url else ""
    reason = _shorten(str(exc) or type(exc).__name__, 200)
    secret_list = list(secrets)
    if isinstance(exc, httpx.TimeoutException):
        phase = {
            httpx.ConnectTimeout: "connecting to",
            httpx.ReadTimeout: "waiting for",
            httpx.WriteTimeout: "sending to",
            httpx.PoolTimeout: "waiting for a free connection to",
        }.get(type(exc), "talking to")
        return ProviderTimeout(redact(f"Timed out {phase} the endpoint{where}: {reason}", secret_list))
    if isinstance(exc, httpx.ConnectError):
        # What to fix: nothing answered at that address (a server not running, a wrong port or host).
        return NetworkError(redact(f"Could not connect to the endpoint{where}: {reason}. Is the server running "
                                   "there? Check the API base URL (settings, TAVERN_API_BASE or --api-base).",
                                   secret_list))
    if isinstance(exc, httpx.TransportError):
        return NetworkError(redact(f"The connection to the endpoint broke{where}: {reason}", secret_list))
    return ProviderError(redact(f"Request to the endpoint failed{where}: {reason}", secret_list))


# -- call-config fallback: which request parameter did a 400/422 reject? --

FALLBACK_PARAMETERS = (
    "temperature", "max_tokens", "max_completion_tokens", "reasoning_effort", "stop",
    "top_p", "frequency_penalty", "presence_penalty", "seed", "top_k",
)
"""Call parameters a provider may drop (or rename) when the server rejects them: the seed 000 §3
preset overrides (temperature, maxTokens → `max_tokens`/`max_completion_tokens`,
reasoningEffort, stop) plus the other plain sampling knobs a preset sets. Never `model`,
`messages`, `stream`, `n`, tools or anything structural."""

_EQUIVALENT_PARAMETERS = {"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}
"""Renames allowed when the server names a replacement: same meaning, different name. Any other
suggestion (Groq's "did you mean 'top_p'?" for `top_k`) is ignored and the field just omitted."""

_Q = r"[`'\"]?"
_NAME = r"[A-Za-z_][\w.]*"
_LIST = rf"(?P<list>{_Q}{_NAME}{_Q}(?:\s*(?:,|\bor\b|\band\b|&)\s*{_Q}{_NAME}{_Q})*)"
_NAMES = re.compile(rf"{_Q}({_NAME}){_Q}")

# (pattern, which field of the matched list is blamed). Examples each pattern is meant for:
_REJECTION_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), pick)
    for pattern, pick in (
        # OpenAI: "Unsupported parameter: 'max_tokens' is not supported with this model. Use
        # 'max_completion_tokens' instead." / "Unsupported value: 'temperature' does not support
        # 0.2 with this model. Only the default (1) value is supported."; llama.cpp server:
        # "Unsupported param: best_of".
        (rf"\bunsupported\s+(?:parameter|param|value|field|argument|property)s?\s*:?\s*{_LIST}", "first"),
        # OpenAI: "Unknown parameter: 'reasoning'."
        (rf"\bunknown\s+(?:parameter|param|field|argument|property)s?\s*:?\s*{_LIST}", "first"),
        # OpenAI/Azure on older models: "Unrecognized request argument supplied: reasoning_effort"
        # (also the plural "arguments supplied: a, b").
        (rf"\bunrecognized\s+(?:request\s+)?arguments?(?:\s+supplied)?\s*:?\s*{_LIST}", "first"),
        # "This model does not support 'stop'", "model doesn't support the parameter top_k".
        ((rf"\b(?:does\s+not|doesn't|do\s+not|cannot)\s+support\s+(?:the\s+)?"
          rf"(?:(?:parameter|param|field|argument)s?\s+)?{_LIST}"), "first"),
        # Python servers passing the body as kwargs: "got an unexpected keyword argument 'top_k'".
        (rf"\b(?:unexpected|unknown|invalid)\s+keyword\s+arguments?\s*:?\s*{_LIST}", "first"),
        # "Invalid value for 'reasoning_effort': ..."
        (rf"\b(?:invalid|unsupported)\s+value\s+for\s+(?:(?:parameter|param|field)\s+)?{_LIST}", "first"),
        # Groq: "property 'top_k' is unsupported, did you mean 'top_p'?"; DeepSeek-style
        # "temperature is not supported"; vLLM: "'max_tokens' or 'max_completion_tokens' is too
        # large: 4000. This model's maximum context length is 4096 tokens ..."
        ((rf"{_LIST}\s+(?:is|are)\s+(?:not\s+(?:supported|allowed|permitted|recognized|recognised)|"
          rf"unsupported|unknown|unrecognized|too\s+large|out\s+of\s+range)"), "first"),
        # vLLM SamplingParams checks: "temperature must be non-negative, got -1.0.",
        # "max_tokens must be at least 1, got 0.", "top_p must be in (0, 1], got 1.5."
        (rf"{_LIST}\s+must\s+be\b", "first"),
        # pydantic as text: "reasoning_effort\n  Extra inputs are not permitted [type=extra_forbidden"
        (rf"{_LIST}\s*:?\s+extra\s+(?:inputs|fields)\s+(?:are\s+)?not\s+permitted", "first"),
        # Anthropic models (direct, Bedrock, OpenAI-compatible proxies): "`temperature` and `top_p`
        # cannot both be specified for this model. Please use only one." The later one goes.
        (rf"{_LIST}\s+cannot\s+both\s+be\b", "last"),
    )
)
_REPLACEMENT = re.compile(rf"\buse\s+{_Q}([A-Za-z_]\w*){_Q}\s+instead\b", re.IGNORECASE)


@dataclass(frozen=True)
class RejectedParameter:
    """A request parameter a 400/422 answer rejected.

    Attributes:
        name: the rejected field, one of the caller's candidates.
        replacement: an equivalent field the server told us to use instead
            (`max_tokens` ⇄ `max_completion_tokens`), else None: the field is to be omitted.
        reason: "<status>: <the server's message>", one line, redacted, at most
            `MAX_SERVER_MESSAGE` characters of message.
    """

    name: str
    replacement: str | None
    reason: str


def _field_name(token: str) -> str:
    """`'temperature'`, `body.temperature` → `temperature` (lower-cased)."""
    return token.strip("`'\"").lower().removeprefix("body.")


def _validation_fields(node: Any, depth: int = 0) -> list[str]:
    """Top-level fields named by pydantic/FastAPI validation entries (`{"loc": ["body", "top_k"],
    "type": "extra_forbidden", ...}`), found anywhere in the parsed body, including a message that
    is itself a JSON string (Mistral sends both forms)."""
    if depth > 6:
        return []
    found: list[str] = []
    if isinstance(node, str):
        text = node.strip()
        if text[:1] in ("{", "[") and '"loc"' in text:
            try:
                return _validation_fields(json.loads(text), depth + 1)
            except ValueError:
                return []
        return []
    if isinstance(node, list):
        for item in node:
            found.extend(_validation_fields(item, depth + 1))
        return found
    if isinstance(node, dict):
        loc = node.get("loc")
        if isinstance(loc, list) and loc:
            parts = loc[1:] if loc[0] == "body" else loc
            if parts and isinstance(parts[0], str):
                found.append(_field_name(parts[0]))
        for value in node.values():
            if isinstance(value, (dict, list, str)):
                found.extend(_validation_fields(value, depth + 1))
    return found


def _named_in_text(message: str, candidates: list[str]) -> str | None:
    for pattern, pick in _REJECTION_PATTERNS:
        for match in pattern.finditer(message):
            named = [_field_name(n) for n in _NAMES.findall(match.group("list"))]
            hits = [n for n in named if n in candidates]
            if hits:
                return hits[0] if pick == "first" else hits[-1]
    return None


def rejected_parameter(
    status: int,
    body: bytes | str | None,
    candidates: Iterable[str],
    *,
    secrets: Iterable[str] = (),
) -> RejectedParameter | None:
    """Which of `candidates` a bad-request answer rejected, for the call-config fallback.

    Rule source, seed 000 §3: "Preset fallback omits only a rejected active preset override
    (temperature, maxTokens, reasoningEffort or stop), before output and when not canceled. ...
    Authentication, quota and unrelated network errors do not trigger this fallback."

    Args:
        status: the HTTP status; only 400 and 422 can name a rejected parameter.
        body: the error body as received.
        candidates: the fields the caller could drop (active overrides not yet dropped).
        secrets: strings that must not appear in the reason (the API key).

    Returns:
        None unless the answer blames a candidate. The blamed field is read, in this order,
        from (1) the OpenAI `error.param` (when it names a non-candidate, e.g. "messages",
        the answer is not about a candidate and None is returned); (2) pydantic/FastAPI
        validation entries (`detail[].loc == ["body", field]`: Mistral, vLLM-style and other
        FastAPI servers, 422); (3) the message text, by `_REJECTION_PATTERNS` (OpenAI
        "Unsupported parameter/value: 'x'", "Unknown parameter: 'x'", Azure "Unrecognized
        request argument supplied: x", llama.cpp "Unsupported param: x", Groq "property 'x' is
        unsupported", "x is not supported", "does not support 'x'", vLLM "x must be …" and
        "'x' … is too large", pydantic "x Extra inputs are not permitted", Anthropic "`x` and
        `y` cannot both be specified" → y). A quota code (`insufficient_quota`) never counts.
        A replacement is kept only when the message says "use 'y' instead" and y is the
        equivalent of the field (`max_tokens` ⇄ `max_completion_tokens`).
    """
    if status not in (400, 422):
        return None
    names = [c.lower() for c in candidates]
    if not names:
        return None
    secret_list = [s for s in secrets if s]
    text = _text_of(body)
    parsed = _json_or_none(text)
    err = _error_object(parsed)
    if err is not None and _is_quota(err, message=False):
        return None
    # Matched as received (a short key masked inside a field name would hide it); only the
    # reason, which is kept and shown, is redacted.
    message = " ".join((_message_of(err) if err else text).split())
    field = _blamed_field(err, parsed, message, names)
    if field is None:
        return None
    replacement = None
    match = _REPLACEMENT.search(message)
    if match and match.group(1).lower() == _EQUIVALENT_PARAMETERS.get(field):
        replacement = match.group(1).lower()
    reason = f"{status}: {_shorten(redact(message, secret_list)) or '(no message)'}"
    return RejectedParameter(field, replacement, redact(reason, secret_list))


def _json_or_none(text: str) -> Any:
    """The body as JSON, or None: a plain-text error answer is still read, by its message."""
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return None


def _blamed_field(err: Mapping[str, Any] | None, parsed: Any, message: str, names: list[str]) -> str | None:
    """The candidate the answer blames: `error.param`, else validation entries, else the message text.

    An `error.param` naming a non-candidate settles it: None, the answer is about something else.
    """
    param = err.get("param") if err else None
    if isinstance(param, str) and param.strip():
        field = _field_name(param)
        return field if field in names else None  # the server blamed something else (messages, model, a dropped field)
    field = next((f for f in _validation_fields(parsed) if f in names), None)
    return field if field is not None else _named_in_text(message, names)
