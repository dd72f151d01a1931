"""Provides event kinds, message origin, and the `Event` record of the session log.

Rules: seed 000 §1 (session event log, kinds, surface) and seed 001 (message origin).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from tavern_tui.errors import OriginError


class EventKind(StrEnum):
    """The kinds of event a session holds (DESIGN.md, "The session log")."""

    USER_MESSAGE = "user/message"
    ASSISTANT_MESSAGE = "assistant/message"
    ASSISTANT_ATTEMPT = "assistant/attempt"
    SYSTEM_MESSAGE = "system/message"
    TOOL_RESULT = "tool/result"
    REQUEST_HEADER = "request/header"
    REQUEST_ASSEMBLY = "request/assembly"
    REQUEST_CONTEXT = "request/context"
    INBOX_SPLICED = "inbox/spliced"
    SURFACE_REPLACED = "surface/replaced"
    STREAM_CHECKPOINT = "stream/checkpoint"


MESSAGE_KINDS = frozenset(
    {
        EventKind.USER_MESSAGE,
        EventKind.ASSISTANT_MESSAGE,
        EventKind.ASSISTANT_ATTEMPT,
        EventKind.SYSTEM_MESSAGE,
        EventKind.TOOL_RESULT,
    }
)
"""Kinds that carry a model-visible message body (`{"content": ...}`)."""


class Origin(StrEnum):
    """Who produced a message, independent of its role (seed 001: a closed set)."""

    CUSTOMER = "customer"
    AGENT = "agent"
    ENGINE = "engine"
    OPERATOR = "operator"


NATURAL_ORIGIN: dict[str, Origin] = {"user": Origin.CUSTOMER, "assistant": Origin.AGENT}
"""The natural producer of each role; an absent origin means this one (seed 001)."""


def parse_origin(value: object) -> Origin | None:
    """Validate an origin value from any entry point.

    Args:
        value: None/"" (absent) or one of "customer", "agent", "engine", "operator"
            (surrounding spaces and letter case are ignored, as seed 001 `parse!` does).

    Returns:
        The `Origin`, or None when absent.

    Raises:
        OriginError: any other value; the message names it and the allowed set (seed 001).
    """
    if value is None or value == "":
        return None
    if isinstance(value, Origin):
        return value
    if isinstance(value, str) and value.strip().lower() in Origin._value2member_map_:
        return Origin(value.strip().lower())
    allowed = ", ".join(o.value for o in Origin)
    raise OriginError(f"unknown message origin {value!r}; allowed: {allowed}")


def effective_origin(role: str | None, origin: Origin | str | None) -> Origin | None:
    """The origin a message really has: the declared one, else the role's natural producer."""
    declared = parse_origin(origin)
    if declared is not None:
        return declared
    return NATURAL_ORIGIN.get(role or "")


def canonical_json(body: dict[str, Any]) -> str:
    """Serialise a body the one way the log stores and hashes it (sorted keys, compact, UTF-8).

    Always valid JSON: a non-finite number (an imported chat's `1e999`, which JavaScript reads as
    Infinity) is written as `null`, as JavaScript's `JSON.stringify` writes it; Python's `Infinity`
    token would make the database's JSON functions (the search index trigger) refuse the row."""
    try:
        return json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        if "Out of range float" not in str(exc):
            raise  # a circular reference: a bug, not data
        return json.dumps(_finite(body), ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _finite(value: Any) -> Any:
    """`value` with every NaN / ±Infinity float replaced by None (lists, tuples and dicts walked)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def body_hash(body_text: str) -> str:
    """SHA-256 hex digest of the stored body text's UTF-8 bytes."""
    return hashlib.sha256(body_text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event about to be appended; the log assigns `seq`, hash and time.

    Raises:
        OriginError: (on construction) an origin outside the closed set.
    """

    kind: str
    role: str | None
    body: dict[str, Any]
    origin: Origin | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "origin", parse_origin(self.origin))


@dataclass(frozen=True, slots=True)
class Event:
    """One stored event.

    Attributes:
        session_id: the session that owns it.
        seq: gapless position in that session, from 1.
        body_text: the canonical JSON exactly as stored; `body` is its parsed form.
        body_sha256: SHA-256 of `body_text` as recorded at append time.
    """

    session_id: int
    seq: int
    kind: str
    role: str | None
    origin: Origin | None
    source: str | None
    body_text: str
    body_sha256: str
    created_at: datetime
    body: dict[str, Any] = field(compare=False, repr=False)

    @property
    def content(self) -> str:
        """The message text, "" for events without one."""
        value = self.body.get("content", "")
        return value if isinstance(value, str) else ""

    @property
    def ref(self) -> tuple[int, int]:
        """(session_id, seq): the pointer other records use for this event."""
        return (self.session_id, self.seq)


def is_customer(role: str | None, origin: Origin | str | None) -> bool:
    """Did a person on the user side write this? Role user with origin absent or customer (seed 001 `customer?`)."""
    return role == "user" and parse_origin(origin) in (None, Origin.CUSTOMER)


def is_agent(role: str | None, origin: Origin | str | None) -> bool:
    """Did the model write this? Role assistant with origin absent or agent (seed 001 `agent?`)."""
    return role == "assistant" and parse_origin(origin) in (None, Origin.AGENT)


INTERRUPTED_REASON = "the app was closed while it was streaming"
"""Why a reply recovered after the process died mid-stream is partial: the `error` its recovery
records starts with it, and the transcript shows it with the reply."""

TOOL_CALLS_KEY = "tool_calls"
"""Body key of an assistant message's tool calls: the OpenAI `tool_calls` array as sent back."""

TOOL_CALL_ID_KEY = "toolCallId"
"""Top-level body key of a `tool/result` event: the call it answers (seed 000 §1)."""


def wire_message(role: str, content: str, body: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI-style request message a stored body sends, one rule for the request and the
    trace's verify: `{"role", "content"}`, plus `name` when set, plus an assistant's
    `tool_calls`, plus a tool result's `tool_call_id` (from its top-level `toolCallId`)."""
    message: dict[str, Any] = {"role": role, "content": content}
    name = body.get("name")
    if isinstance(name, str) and name and role != "tool":
        message["name"] = name
    calls = body.get(TOOL_CALLS_KEY)
    if role == "assistant" and isinstance(calls, list) and calls:
        message["tool_calls"] = calls
    call_id = body.get(TOOL_CALL_ID_KEY)
    if role == "tool" and isinstance(call_id, str):
        message["tool_call_id"] = call_id
    return message
