"""Provides `Exchange`: one HTTP exchange of an OpenAI-compatible chat call. It posts the body;
a non-2xx answer is read by the wire rules (`wire.Refusal`) and raised; a 2xx answer's events
(`response.response_events`) pass the reply shield on their way to the caller. How it ended (the
error, whether any event reached the caller, the failed answer's headers) is left on the exchange
for the caller's retry and fallback decisions.

The shape follows openai-python's `AsyncStream`: one response per attempt, closed when the
exchange ends (`client.stream` closes it in its exit), however it ends.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from tavern_tui.engine.stream import StreamEvent
from tavern_tui.errors import ProviderError, ServerError
from tavern_tui.providers.chunks import MalformedStream
from tavern_tui.providers.errors import from_httpx_exception, redact
from tavern_tui.providers.response import response_events
from tavern_tui.providers.shield import ReplyShield
from tavern_tui.providers.wire import Refusal

__all__ = ["Connection", "Exchange", "Judge"]

Judge = Callable[[int, bytes, Mapping[str, str]], Refusal]
"""Reads a non-2xx answer (status, body, headers): `wire.judge_refusal` with the call's state bound."""


@dataclass(frozen=True)
class Connection:
    """What every exchange of one call shares.

    Attributes:
        client: the HTTP client (its owner closes it).
        url: the chat-completions URL.
        headers: the request headers.
        timeout: for connect and each read.
        secrets: the key and the base URL's credentials, by value: redacted from errors and replies.
        base_url: the configured base URL (the reply shield redacts it in its credential forms).
    """

    client: httpx.AsyncClient
    url: str
    headers: dict[str, str]
    timeout: httpx.Timeout
    secrets: list[str]
    base_url: str


class Exchange:
    """One attempt: `run` yields the reply's events; afterwards the attributes say how it ended.

    Attributes:
        record: the attempt's record (`OpenAICompatProvider.attempts`); `status`, `error` and
            `message` are filled in here.
        yielded: some event reached the caller (then nothing may be retried).
        error: the error the attempt ended with, None when the reply was complete.
        refusal: how a non-2xx answer was read, else None.
        retry_headers: the non-2xx answer's headers (its `Retry-After`), else None.
    """

    def __init__(self, connection: Connection, record: dict[str, Any]) -> None:
        self.connection = connection
        self.record = record
        self.yielded = False
        self.error: ProviderError | None = None
        self.refusal: Refusal | None = None
        self.retry_headers: Mapping[str, str] | None = None

    async def run(self, body: dict[str, Any], judge: Judge,
                  preface: StreamEvent | None) -> AsyncGenerator[StreamEvent, None]:
        """Post `body` and yield the reply's events, `preface` (when given) before the first one.

        A failure is not raised but left in `error` (and the record), with the events that
        arrived before it yielded; a body that is not the format raises `ServerError` at once
        (never retried).
        """
        secrets = self.connection.secrets
        try:
            async for event in self._events(body, judge, preface):
                yield event
            return
        except ProviderError as exc:
            error = exc
        except httpx.HTTPError as exc:
            error = from_httpx_exception(exc, secrets=secrets)
            error.__cause__, error.__suppress_context__ = exc, True
        except MalformedStream as exc:
            self.record["error"] = "server"
            self.record["message"] = redact(str(exc), secrets)
            raise ServerError(redact(str(exc), secrets)) from None
        self.record["error"] = error.category
        self.record["message"] = str(error)  # the upstream's own words (already redacted), for the trace
        self.error = error

    async def _events(self, body: dict[str, Any], judge: Judge,
                      preface: StreamEvent | None) -> AsyncGenerator[StreamEvent, None]:
        connection = self.connection
        # `client.stream` closes the response in its exit (a `finally`), whether we
        # return, raise, retry, or the consumer closes this generator early.
        async with connection.client.stream("POST", connection.url, json=body, headers=connection.headers,
                                            timeout=connection.timeout) as response:
            self.record["status"] = response.status_code
            if not response.is_success:
                raw = await response.aread()
                self.retry_headers = response.headers
                self.refusal = judge(response.status_code, raw, response.headers)
                raise self.refusal.error
            shield = ReplyShield(connection.secrets, connection.base_url)  # a key echoed back goes no further
            try:
                async for parsed in response_events(response, connection.secrets):
                    for event in shield.events(parsed):
                        if not self.yielded and preface is not None:
                            yield preface
                        self.yielded = True
                        yield event
            except (ProviderError, MalformedStream, httpx.HTTPError):
                for event in shield.flush():  # what arrived before the error is kept
                    self.yielded = True
                    yield event
                raise
