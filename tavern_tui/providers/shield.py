"""Provides the reply shield: the configured credentials, echoed back by an endpoint in its reply
(text, reasoning or tool-call arguments), are replaced by "[redacted]" before any event leaves
the provider, so they are never stored, checkpointed, shown, exported or sent again. Rule: API
keys never reach the database, a request body, the trace, logs or the screen (DESIGN "Secrets");
an endpoint that echoes the `Authorization` header is the case it exists for."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

from tavern_tui.engine.stream import ReasoningDelta, StreamEvent, TextDelta, ToolCalls
from tavern_tui.text.secret_values import StreamRedactor, redact_secrets, without_credentials

logger = logging.getLogger(__name__)


class ReplyShield:
    """Redacts `secrets` from one attempt's events, in order.

    `events(event)` returns the events to pass on for one parsed event (text and reasoning may be
    held back a little, see `StreamRedactor`; any other event first releases what is held);
    `flush()` releases what is held (before an error is raised). Logs one warning naming the
    endpoint (without its credentials) the first time a secret is replaced.
    """

    def __init__(self, secrets: Iterable[str | None], endpoint: str) -> None:
        self.secrets = [s for s in secrets if s]
        self.endpoint = endpoint
        self._text = StreamRedactor(self.secrets)
        self._reasoning = StreamRedactor(self.secrets)
        self._warned = False

    def events(self, event: StreamEvent) -> list[StreamEvent]:
        """The events to pass on for `event` (0, 1 or several)."""
        if isinstance(event, TextDelta):
            text = self._text.feed(event.text)
            return [TextDelta(text)] if text else []
        if isinstance(event, ReasoningDelta):
            text = self._reasoning.feed(event.text)
            return [ReasoningDelta(text)] if text else []
        out = self.flush()
        if isinstance(event, ToolCalls) and self.secrets:
            calls = tuple(replace(c, arguments=redact_secrets(c.arguments, self.secrets)) for c in event.calls)
            if calls != event.calls:
                self._warn()
            event = ToolCalls(calls)
        return [*out, event]

    def flush(self) -> list[StreamEvent]:
        """What is held, as events (reasoning first, as it arrives first)."""
        out: list[StreamEvent] = []
        reasoning, text = self._reasoning.flush(), self._text.flush()
        if reasoning:
            out.append(ReasoningDelta(reasoning))
        if text:
            out.append(TextDelta(text))
        if self._text.hits or self._reasoning.hits:
            self._warn()
        return out

    def _warn(self) -> None:
        if not self._warned:
            self._warned = True
            logger.warning("the endpoint %s sent the configured API key back in its reply; it was replaced by "
                           "[redacted] before anything was stored or shown", without_credentials(self.endpoint))
