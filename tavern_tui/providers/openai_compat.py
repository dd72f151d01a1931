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

The parts live by responsibility: `wire` (the body, the headers and how a refusal is read),
`retry` (which failures are retried, and after how long), `exchange` (one HTTP exchange),
`response` (reading a 2xx answer into events), `context_probe` and `log_redaction`; this module
binds them to the settings and runs the attempts.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import Any

import httpx

from tavern_tui.engine.stream import Attempts, BaseProvider, CallContext, ChatRequest, StreamEvent
from tavern_tui.errors import CallConfigError, ProviderError
from tavern_tui.providers.base import ProviderSettings, endpoint_of, endpoint_problem
from tavern_tui.providers.context_probe import PROBE_MAX_BYTES, PROBE_TIMEOUT, probe_context
from tavern_tui.providers.exchange import Connection, Exchange
from tavern_tui.providers.log_redaction import LOG_REDACTION
from tavern_tui.providers.response import stream_events
from tavern_tui.providers.retry import RETRY_CAP, retry_delay, retryable
from tavern_tui.providers.wire import (
    MAX_CONFIG_FALLBACKS,
    OMIT_HINT,
    PRESET_OVERRIDES,
    RESERVED_FIELDS,
    ConfigFallback,
    judge_refusal,
    rejects_tools,
    wire_body,
    wire_headers,
)
from tavern_tui.text.secret_values import REDACTED, holds_secret, url_credentials

__all__ = ["OpenAICompatProvider", "wire_body", "retry_delay", "RETRY_CAP", "MAX_CONFIG_FALLBACKS", "OMIT_HINT",
           "PRESET_OVERRIDES", "RESERVED_FIELDS", "rejects_tools", "PROBE_TIMEOUT", "PROBE_MAX_BYTES"]


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
        LOG_REDACTION.add(*url_credentials(settings.base_url))  # the key joins when first used (`build_headers`)
        self.max_retries = max(0, max_retries)
        self.backoff = backoff
        self.attempts: list[dict[str, Any]] = []
        self._client = client
        self._owns_client = client is None
        self._client_lock = threading.Lock()
        self._probe_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAICompatProvider({self.settings!r})"  # settings' repr hides the key

    @property
    def url(self) -> str:
        """The chat-completions URL: `{base_url}/chat/completions`, trailing slash stripped."""
        return self.settings.base_url.rstrip("/") + "/chat/completions"

    def _get_client(self) -> httpx.AsyncClient:
        with self._client_lock:  # `warm` makes it in a worker thread while the loop may ask for it
            if self._client is None:
                self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.settings.timeout))
            return self._client

    def warm(self) -> None:
        """Make the HTTP client now, in the caller's worker thread: its TLS context loads the CA
        bundle (20-40 ms measured here), which the first send would otherwise wait for on the
        event loop. The client binds to no event loop until it is used."""
        self._get_client()

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
        headers = {k: v for k, v in self.build_headers().items() if k != "Accept"}
        return probe_context(self.settings.base_url, self.settings.model, headers,
                             min(PROBE_TIMEOUT, self.settings.timeout))

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body: model (omitted when none is known), messages, `stream: true`,
        `stream_options.include_usage`, then `request.config` (which wins on conflicts)."""
        return wire_body(request.model or self.settings.model, request.messages, request.config, request.tools)

    def build_headers(self) -> dict[str, str]:
        """Request headers; `Authorization: Bearer` only when a key is set."""
        key = self.settings.key  # from the keyring on first use: not at start-up (`ProviderSettings.key`)
        if key:
            LOG_REDACTION.add(key)  # before anything sent with it can be logged
        return wire_headers(key)

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
        secrets = self._secrets()
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

    def _parse_sse(self, chunks: Any, content_type: str, secrets: list[str]) -> AsyncGenerator[StreamEvent, None]:
        """The events of an event stream arriving as `chunks` (`response.stream_events`)."""
        return stream_events(chunks, content_type, secrets)

    def _secrets(self) -> list[str]:
        """By value: the key and the base URL's credentials, however a server echoes them."""
        return [s for s in (self.settings.key, *url_credentials(self.settings.base_url)) if s]

    async def _attempted(self, request: ChatRequest,
                         attempts: list[dict[str, Any]]) -> AsyncGenerator[StreamEvent, None]:
        """`stream` without its `Attempts` events: the attempts loop, each recorded in `attempts`."""
        secrets = self._secrets()
        connection = Connection(self._get_client(), self.url, self.build_headers(),
                                httpx.Timeout(self.settings.timeout), secrets, self.settings.base_url)
        fallback = ConfigFallback(request.config)
        judge = functools.partial(judge_refusal, secrets=secrets, offers_tools=bool(request.tools), fallback=fallback)
        retries = 0
        while True:
            body = self.build_body(fallback.request(request))
            record: dict[str, Any] = {"status": None, "error": None, "retry_delay": None,
                                      "config": dict(fallback.effective), "omitted": dict(fallback.omitted)}
            attempts.append(record)
            exchange = Exchange(connection, record)
            async with aclosing(exchange.run(body, judge, fallback.adjusted())) as events:
                async for event in events:
                    yield event
            error, refusal = exchange.error, exchange.refusal
            if error is None:
                return
            if refusal is not None and refusal.no_tools is not None:  # a refusal comes before any output
                fallback.drop_tools(refusal.no_tools)
                continue
            if refusal is not None and refusal.rejected is not None:
                fallback.drop(refusal.rejected)
                continue
            if exchange.yielded or not retryable(error, retries, self.max_retries):
                raise error
            delay = retry_delay(retries, exchange.retry_headers, self.backoff)
            retries += 1
            record["retry_delay"] = delay
            await asyncio.sleep(delay)
