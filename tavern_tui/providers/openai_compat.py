"""Provides the streaming adapter for OpenAI-compatible `POST /chat/completions` endpoints.

Wire format (OpenAI chat-completions streaming): the answer is `text/event-stream`;
each event's `data` is a JSON "chat.completion.chunk" whose `choices[0].delta` carries
`content` (and, on reasoning servers, `reasoning_content` or `reasoning`), the last
choice chunk carries `finish_reason`, `stream_options.include_usage` adds a final chunk
with `choices: []` and `usage`, and `data: [DONE]` ends the stream. Errors after the
200 status arrive in-band as `data: {"error": {...}}`.

The shape follows openai-python's `AsyncStream`: one response per attempt, parsed by a
separate pure decoder (`sse.SSEDecoder`), closed in `finally`, retried with jittered
exponential backoff only before anything reached the caller.

Call-config fallback (seed 000 §3: "Preset fallback omits only a rejected active preset
override (temperature, maxTokens, reasoningEffort or stop), before output and when not
canceled. Each field is tried at most once, with at most four native retries. Authentication,
quota and unrelated network errors do not trigger this fallback. The original preset is
unchanged; Trace records requested/effective values and omissions."): a 400/422 answer that
blames one of the request's `config` fields in `PRESET_OVERRIDES` is retried at once without
that field (or with its value moved to the equivalent field the server names, `max_tokens` →
`max_completion_tokens`); see `OpenAICompatProvider.stream`.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import re
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import replace
from typing import Any

import httpx

from tavern_tui.engine.stream import (
    Attempts,
    BaseProvider,
    CallContext,
    ChatRequest,
    ConfigAdjusted,
    Finished,
    StreamEvent,
    ToolCalls,
)
from tavern_tui.errors import BadRequestError, CallConfigError, ProviderError, ServerError
from tavern_tui.providers.base import ProviderSettings, endpoint_of, endpoint_problem
from tavern_tui.providers.chunks import (
    CallAccumulator,
    MalformedStream,
    StreamState,
    json_object,
    message_events,
    usage_of,
)
from tavern_tui.providers.errors import (
    RejectedParameter,
    classify_http_error,
    classify_stream_error,
    from_httpx_exception,
    redact,
    rejected_parameter,
)
from tavern_tui.providers.shield import ReplyShield
from tavern_tui.providers.sse import SSEDecoder
from tavern_tui.text.secret_values import REDACTED, holds_secret, url_credentials

__all__ = ["OpenAICompatProvider", "wire_body", "retry_delay", "RETRY_CAP", "MAX_CONFIG_FALLBACKS", "OMIT_HINT",
           "PRESET_OVERRIDES"]

RETRY_CAP = 10.0
"""Longest wait between attempts, in seconds, whatever `Retry-After` asks for."""

MAX_CONFIG_FALLBACKS = 4
"""Call-config fallback retries per `stream()` call (seed 000 §3: "at most four native retries")."""

_RETRY_CATEGORIES = frozenset({"rate_limit", "server", "network"})

PRESET_OVERRIDES = ("temperature", "max_tokens", "max_completion_tokens", "reasoning_effort", "stop")
"""The only call fields the fallback drops (seed 000 §3: "a rejected active preset override
(`temperature`, `maxTokens`, `reasoningEffort` or `stop`)"); max_tokens and max_completion_tokens
are the one maxTokens field under its two names (tried once, under either)."""

OMIT_HINT = "leave {name!r} out for this playthrough ({how}) and send again"
"""How a rejection of another parameter tells the person the one step that gets past it; `how`
is filled by whoever knows the playthrough (the service), "tavern omit-param" by default."""


def _other_rejection(error: BadRequestError, status: int, raw: bytes, effective: Mapping[str, Any],
                     secrets: list[str]) -> BadRequestError:
    """A 400/422 that blames a call field the fallback never drops (top_p, a penalty, seed, …)
    becomes an error naming it and the one step that gets past it (`OMIT_HINT`), with `param` set
    to the field; any other answer is returned as it was."""
    others = [k for k in effective if k not in PRESET_OVERRIDES]
    blamed = rejected_parameter(status, raw, others, secrets=secrets) if others else None
    if blamed is None:
        return error
    hint = OMIT_HINT.format(name=blamed.name, how="`tavern omit-param PLAYTHROUGH " + blamed.name + "`")
    message = (f"The endpoint rejected the call parameter {blamed.name!r} ({blamed.reason}); only a rejected "
               f"temperature, max tokens, reasoning effort or stop is retried without it — {hint}")
    return BadRequestError(redact(message, secrets), status=status, param=blamed.name)


def wire_body(model: str, messages: list[dict[str, Any]], config: Mapping[str, Any],
              tools: Any = ()) -> dict[str, Any]:
    """The JSON body this adapter posts: `model` (left out when ""), `messages`, `stream: true`,
    `stream_options.include_usage`, `tools` (only when some are offered), then `config` (which
    wins on conflicts). Also how a trace's verified request is written back out (`tavern trace
    export`), so both stay one rule."""
    body: dict[str, Any] = {}
    if model:
        body["model"] = model
    body["messages"] = messages
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = list(tools)
    body.update(config)
    return body


RESERVED_FIELDS = ("model", "messages", "stream", "stream_options", "tools")
"""Body fields a call config may not set: `wire_body` lets the config win, so one of these in it would
replace the request itself (the frozen messages, the streaming, the tools offered)."""


_NO_TOOLS = re.compile(r"(does not support|doesn't support|not support(ed)?|unsupported|unknown|unrecognized)"
                       r"[^.]{0,40}\btool|\btool[s_ a-z]{0,20}(are |is )?(not supported|unsupported|not allowed)",
                       re.IGNORECASE)


def rejects_tools(status: int, raw: bytes, secrets: list[str]) -> str | None:
    """The reason when a 400/422 answer rejects the request's `tools` (issue 19 §5: "400 naming
    them, or 'does not support tools'"), else None: the field blamed by `rejected_parameter`
    (`tools` or `tool_choice`), or a message saying tools are not supported (Ollama's
    "<model> does not support tools", vLLM's "auto tool choice requires …" is not matched)."""
    if status not in (400, 422):
        return None
    blamed = rejected_parameter(status, raw, ["tools", "tool_choice"], secrets=secrets)
    if blamed is not None:
        return blamed.reason
    text = raw.decode("utf-8", errors="replace")
    if _NO_TOOLS.search(text):
        return redact(f"{status}: " + " ".join(text.split())[:200], secrets)
    return None


def retry_delay(attempt: int, headers: Mapping[str, str] | None, backoff: float, *, cap: float = RETRY_CAP) -> float:
    """Seconds to wait before retry number `attempt + 1`.

    Args:
        attempt: 0 for the wait after the first failed attempt, 1 after the second, …
        headers: the failed response's headers, or None for a network error.
            `retry-after-ms` (OpenAI) or `Retry-After` (RFC 9110 §10.2.3: seconds or an
            HTTP date) wins when present and non-negative.
        backoff: base delay in seconds for the exponential fallback.
        cap: upper bound in seconds.

    Returns:
        The server's requested delay capped at `cap`, else `backoff * 2**attempt` capped at
        `cap` and shrunk by up to 25 % random jitter (as openai-python's
        `_calculate_retry_timeout` does), so parallel clients do not retry in lockstep.
    """
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    asked: float | None = None
    try:
        if "retry-after-ms" in lowered:
            asked = float(lowered["retry-after-ms"]) / 1000
        elif "retry-after" in lowered:
            asked = float(lowered["retry-after"])
    except ValueError:
        when = email.utils.parsedate_tz(lowered.get("retry-after", ""))
        if when is not None:
            asked = email.utils.mktime_tz(when) - time.time()
    if asked is not None and asked >= 0:
        return min(asked, cap)
    base = min(backoff * 2**attempt, cap)
    return base * (1 - 0.25 * random.random())


class _RedactingFilter(logging.Filter):
    """Redacts the configured credentials, in any form, from the HTTP client's log records
    (httpx logs each request's URL, which may hold `user:password@`; httpcore logs response
    headers, which a server may echo the key in). Issue 23 item 3."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: list[str] = []

    def add(self, *secrets: str) -> None:
        self.secrets = list(dict.fromkeys([*self.secrets, *(s for s in secrets if s)]))

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = record.getMessage()
            cleaned = redact(message, self.secrets)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        return True


_LOG_REDACTION = _RedactingFilter()
# A filter on a logger sees only that logger's own records, so each logging module is named.
for _name in ("httpx", "httpcore.connection", "httpcore.http11", "httpcore.http2", "httpcore.proxy"):
    logging.getLogger(_name).addFilter(_LOG_REDACTION)


PROBE_TIMEOUT = 2.0
"""Seconds each context probe request may take (connect, and each read)."""
PROBE_MAX_BYTES = 8 * 1024 * 1024
"""The most a context probe reads of an answer (an OpenRouter `/models` list is a few MB)."""


def _get_json(url: str, headers: dict[str, str], timeout: float) -> Any:
    """GET `url` and parse its JSON body; None on any HTTP or network error, a non-2xx status,
    a body over `PROBE_MAX_BYTES`, a total time past four `timeout`s, or a body that is not JSON."""
    deadline = time.monotonic() + 4 * timeout
    try:
        with httpx.stream("GET", url, headers=headers, timeout=timeout) as response:
            if not response.is_success:
                return None
            data = bytearray()
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) > PROBE_MAX_BYTES or time.monotonic() > deadline:
                    return None
        return json.loads(bytes(data))
    except (httpx.HTTPError, ValueError):
        return None


class OpenAICompatProvider(BaseProvider):
    """Streams chat completions from an OpenAI-compatible endpoint over httpx.

    Args:
        settings: base URL, default model, API key and timeout (seconds, for connect and
            for each read).
        client: an `httpx.AsyncClient` to use; the caller keeps owning it. When None the
            provider creates one on first use and closes it in `aclose()`.
        max_retries: extra attempts after the first for 429, 5xx and network errors
            (never for timeouts, malformed bodies, or once anything was yielded). The
            call-config fallback retries (at most `MAX_CONFIG_FALLBACKS`) come on top.
        backoff: base of the jittered exponential delay, in seconds.

    Attributes:
        attempts: one dict per HTTP attempt of the last `stream()` call:
            `{"status": int | None, "error": str | None (ProviderError.category),
            "retry_delay": float | None (seconds waited before the next attempt),
            "config": dict (the call config this attempt sent), "omitted": dict[str, str]
            (fields left out of `config` so far → the provider's reason; a moved field's
            reason ends with "→ <new field>")}`.
        placeholder: False (`BaseProvider`): its replies are the model's.
    """

    name = "openai-compatible"

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        client: httpx.AsyncClient | None = None,
        max_retries: int = 2,
        backoff: float = 0.5,
    ) -> None:
        self.settings = settings
        self.model = settings.model
        _LOG_REDACTION.add(*url_credentials(settings.base_url))  # the key joins when first used (`build_headers`)
        self.max_retries = max(0, max_retries)
        self.backoff = backoff
        self.attempts: list[dict[str, Any]] = []
        self._client = client
        self._owns_client = client is None
        self._probe_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAICompatProvider({self.settings!r})"  # settings' repr hides the key

    @property
    def url(self) -> str:
        """The chat-completions URL: `{base_url}/chat/completions`, trailing slash stripped."""
        return self.settings.base_url.rstrip("/") + "/chat/completions"

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.settings.timeout))
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it; a borrowed client is left open."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> OpenAICompatProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def context_window(self) -> tuple[int, str] | None:
        """The context the endpoint reports, read once and cached (issue 16 §1).

        Asks `GET {base}/models` for the configured model's (else the only model's)
        `context_length` (OpenRouter), `max_model_len` (vLLM), `context_window` or
        `max_context_length`, then llama.cpp's `GET {server root}/props` for
        `default_generation_settings.n_ctx` or `n_ctx`. Synchronous (call it off the event loop);
        each request waits at most `PROBE_TIMEOUT` seconds and reads at most `PROBE_MAX_BYTES`;
        any failure counts as "not reported" and is cached too. Concurrent callers wait for the
        one probe under way.

        Returns:
            (tokens, "endpoint:/models" | "endpoint:/props"), or None.
        """
        with self._probe_lock:
            if not hasattr(self, "_context_window"):
                self._context_window = self._probe_context()
            return self._context_window

    def _probe_context(self) -> tuple[int, str] | None:
        base = self.settings.base_url.rstrip("/")
        headers = {k: v for k, v in self.build_headers().items() if k != "Accept"}
        timeout = min(PROBE_TIMEOUT, self.settings.timeout)
        listed = _get_json(base + "/models", headers, timeout)
        models = listed.get("data") if isinstance(listed, dict) else None
        if isinstance(models, list):
            chosen = [m for m in models if isinstance(m, dict) and m.get("id") == self.settings.model]
            chosen = chosen or ([m for m in models if isinstance(m, dict)] if len(models) == 1 else [])
            for key in ("context_length", "max_model_len", "context_window", "max_context_length"):
                value = chosen[0].get(key) if chosen else None
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return value, "endpoint:/models"
        root = base[:-3] if base.endswith("/v1") else base
        props = _get_json(root + "/props", headers, timeout)
        if isinstance(props, dict):
            settings = props.get("default_generation_settings")
            value = settings.get("n_ctx") if isinstance(settings, dict) else None
            value = value if value is not None else props.get("n_ctx")
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, "endpoint:/props"
        return None

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body: model (omitted when none is known), messages, `stream: true`,
        `stream_options.include_usage`, then `request.config` (which wins on conflicts)."""
        return wire_body(request.model or self.settings.model, request.messages, request.config, request.tools)

    def build_headers(self) -> dict[str, str]:
        """Request headers; `Authorization: Bearer` only when a key is set."""
        headers = {"Accept": "text/event-stream, application/json"}
        key = self.settings.key  # from the keyring on first use: not at start-up (`ProviderSettings.key`)
        if key:
            _LOG_REDACTION.add(key)  # before anything sent with it can be logged
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def prepare(self, model: str, config: Mapping[str, Any]) -> CallContext:
        """Validate the call config and bind this adapter, before a step admits anything (seed 000
        §1: "prepareCall() validates config and binds the adapter"): the base URL must be an
        http(s) URL with a host (`endpoint_problem`), and the config may not set a body field the
        request owns (`RESERVED_FIELDS`). No network is used.

        Returns:
            The adapter context (`CallContext`): this provider, `model` (else the configured one),
            the endpoint's scheme, host and port, and `config` with any known secret redacted; never
            the key or the URL's credentials.

        Raises:
            CallConfigError: what to fix, and where (the settings, a preset).
        """
        problem = endpoint_problem(self.settings.base_url) if self.settings.base_url else (
            "no endpoint URL is configured for the OpenAI-compatible provider; set [provider] base_url in "
            "config.toml or TAVERN_API_BASE")
        if problem is not None:
            raise CallConfigError(problem)
        reserved = [name for name in RESERVED_FIELDS if name in config]
        if reserved:
            raise CallConfigError(f"the call config sets {', '.join(map(repr, reserved))}, which the request "
                                  "itself owns; remove it from the preset's parameters")
        secrets = [s for s in (self.settings.key, *url_credentials(self.settings.base_url)) if s]
        shown = {name: REDACTED if holds_secret(json.dumps(value, default=str), secrets) else value
                 for name, value in config.items()}
        return CallContext(self.name, model or self.settings.model, endpoint_of(self.settings.base_url), shown)

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        """Stream one completion.

        Call-config fallback (seed 000 §3: "Preset fallback omits only a rejected active preset
        override (temperature, maxTokens, reasoningEffort or stop), before output and when not
        canceled. Each field is tried at most once, with at most four native retries.
        Authentication, quota and unrelated network errors do not trigger this fallback. The
        original preset is unchanged; Trace records requested/effective values and
        omissions."): when the endpoint answers HTTP 400/422 (a `BadRequestError`, not a quota
        error) before any output, and the answer blames a field of `request.config` that is in
        `PRESET_OVERRIDES` (`providers.errors.rejected_parameter` reads `error.param`,
        validation `loc`s or the message), the request is sent again at once without that
        field, or with its value under the replacement the server names when that is an
        equivalent field (`max_tokens` → `max_completion_tokens`). Each field is dropped at
        most once (a second rejection of a dropped field is raised as usual) and at most
        `MAX_CONFIG_FALLBACKS` such retries happen per call, apart from the 429/5xx/network
        retries. 401/403, 429, 5xx, timeouts, network errors and in-band (after HTTP 200)
        errors never trigger it; cancellation propagates as always. `request` itself is never
        changed. A rejection of any other call field (top_p, a penalty, seed, …) is never retried:
        it is raised as a `BadRequestError` whose message names the field and the one step past
        it (`OMIT_HINT`), with `param` set to it. Every attempt record keeps the error's message
        (the server's own words, redacted) next to its category.

        Yields:
            `ConfigAdjusted(requested, effective, omitted)` first when the config sent differs
            from `request.config` (at most once, just before the first other event), then
            `ReasoningDelta`/`TextDelta` in arrival order, then at most one `Usage` (the last
            one reported), then `Finished(finish_reason, saw_done)`.

        Raises:
            AuthenticationError, RateLimitError, BadRequestError, ServerError: from the HTTP
                status (`classify_http_error`) or an in-band error (`classify_stream_error`),
                the latter after the deltas that preceded it were yielded.
            NetworkError: connection refused or broken.
            ProviderTimeout: no answer within `settings.timeout` seconds.
            ServerError: the body was neither an event stream nor a JSON completion.
        """
        attempts: list[dict[str, Any]] = []
        self.attempts = attempts  # this call's (the newest call's, for a caller asking afterwards)
        reported = False
        try:
            async for event in self._attempted(request, attempts):
                if not reported:  # retries and fallbacks so far are known once output starts
                    reported = True
                    yield Attempts(tuple(dict(a) for a in attempts))
                yield event
        except ProviderError:
            yield Attempts(tuple(dict(a) for a in attempts))
            raise
        yield Attempts(tuple(dict(a) for a in attempts))

    async def _attempted(self, request: ChatRequest,
                         attempts: list[dict[str, Any]]) -> AsyncGenerator[StreamEvent, None]:
        """`stream` without its `Attempts` events: the attempts loop, each recorded in `attempts`."""
        # By value: the key and the base URL's credentials, however a server echoes them.
        secrets = [s for s in (self.settings.key, *url_credentials(self.settings.base_url)) if s]
        client = self._get_client()
        headers = self.build_headers()
        timeout = httpx.Timeout(self.settings.timeout)
        requested = dict(request.config)
        effective = dict(requested)
        omitted: dict[str, str] = {}
        tried: set[str] = set()  # fields already dropped or moved: never dropped or restored again
        retries = fallbacks = 0
        tools_dropped = False  # a server that rejected `tools` gets one retry without them
        while True:
            sent = replace(request, config=effective) if effective != requested else request
            body = self.build_body(replace(sent, tools=()) if tools_dropped else sent)
            record: dict[str, Any] = {"status": None, "error": None, "retry_delay": None,
                                      "config": dict(effective), "omitted": dict(omitted)}
            attempts.append(record)
            yielded = False
            rejected: RejectedParameter | None = None
            no_tools: str | None = None
            error: ProviderError
            retry_headers: Mapping[str, str] | None = None
            try:
                # `client.stream` closes the response in its exit (a `finally`), whether we
                # return, raise, retry, or the consumer closes this generator early.
                async with client.stream("POST", self.url, json=body, headers=headers, timeout=timeout) as response:
                    record["status"] = response.status_code
                    if not response.is_success:
                        raw = await response.aread()
                        retry_headers = response.headers
                        error = classify_http_error(response.status_code, raw, response.headers, secrets=secrets)
                        if isinstance(error, BadRequestError) and request.tools and not tools_dropped:
                            no_tools = rejects_tools(response.status_code, raw, secrets)
                        if no_tools is None and isinstance(error, BadRequestError) and fallbacks < MAX_CONFIG_FALLBACKS:
                            candidates = [f for f in PRESET_OVERRIDES if f in effective and f not in tried]
                            rejected = rejected_parameter(response.status_code, raw, candidates, secrets=secrets)
                        if isinstance(error, BadRequestError) and rejected is None and no_tools is None:
                            error = _other_rejection(error, response.status_code, raw, effective, secrets)
                        raise error
                    shield = ReplyShield(secrets, self.settings.base_url)  # a key echoed back goes no further
                    try:
                        async for parsed in self._parse(response, secrets):
                            for event in shield.events(parsed):
                                if not yielded and (effective != requested or tools_dropped):
                                    yield ConfigAdjusted(dict(requested), dict(effective), dict(omitted))
                                yielded = True
                                yield event
                    except (ProviderError, MalformedStream, httpx.HTTPError):
                        for event in shield.flush():  # what arrived before the error is kept
                            yielded = True
                            yield event
                        raise
                    return
            except ProviderError as exc:
                error = exc
            except httpx.HTTPError as exc:
                error = from_httpx_exception(exc, secrets=secrets)
                error.__cause__, error.__suppress_context__ = exc, True
            except MalformedStream as exc:
                record["error"] = "server"
                record["message"] = redact(str(exc), secrets)
                raise ServerError(redact(str(exc), secrets)) from None
            record["error"] = error.category
            record["message"] = str(error)  # the upstream's own words (already redacted), for the trace
            if no_tools is not None and not yielded:
                tools_dropped = True
                omitted["tools"] = no_tools  # recorded as the parameter fallback is (seed 000 §3)
                continue
            if rejected is not None and not yielded:
                fallbacks += 1
                tried.add(rejected.name)
                value = effective.pop(rejected.name)
                target = rejected.replacement
                if target is not None and target not in effective and target not in tried:
                    effective[target] = value
                    tried.add(target)  # the same maxTokens field: tried once, under either name
                    omitted[rejected.name] = f"{rejected.reason} → {target}"
                else:
                    omitted[rejected.name] = rejected.reason
                continue
            if yielded or retries >= self.max_retries or error.category not in _RETRY_CATEGORIES:
                raise error
            delay = retry_delay(retries, retry_headers, self.backoff)
            retries += 1
            record["retry_delay"] = delay
            await asyncio.sleep(delay)

    async def _parse(self, response: httpx.Response, secrets: list[str]) -> AsyncGenerator[StreamEvent, None]:
        """Dispatch on Content-Type: a JSON completion or an event stream."""
        content_type = response.headers.get("content-type", "").lower()
        if content_type.startswith("application/json"):
            raw = await response.aread()
            if raw.lstrip()[:5] != b"data:":  # some servers mislabel SSE as JSON
                for event in self._parse_completion(raw, secrets):
                    yield event
                return
            chunks: Any = _once(raw)
        else:
            chunks = response.aiter_bytes()
        async for event in self._parse_sse(chunks, content_type, secrets):
            yield event

    async def _parse_sse(self, chunks: Any, content_type: str, secrets: list[str]) -> AsyncGenerator[StreamEvent, None]:
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

    def _parse_completion(self, raw: bytes, secrets: list[str]) -> list[StreamEvent]:
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
