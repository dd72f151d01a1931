"""Provides the request trace: what each provider request was made of, by reference and hash,
and `verify`, which proves from the log that a recorded request is what was sent.

Rules: seed 000 §4 and §6, DESIGN.md "Trace": a trace stores metadata, hashes and references
to the authoritative events, never bodies of its own; it is captured when the request is
serialised (no matcher is re-run later); verify re-reads the referenced bodies, recomputes
hashes and rebuilds the exact message array, reporting each message ok / changed / missing;
a preview or today's surface never fills in a past request.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tavern_tui.engine.events import Event, EventKind, NewEvent, wire_message
from tavern_tui.engine.tooling import tools_digest

TRACE_REQUEST = "trace/request"
"""Event kind of a trace record (one per step's request; its attempts are recorded at settle)."""

TRACE_SCHEMA = 1
"""Schema version stamped on every trace record."""


def message_hash(message: dict[str, Any]) -> str:
    """SHA-256 of one request message exactly as serialised for the provider (its JSON with
    sorted keys, compact, UTF-8): the hash a trace records and verify recomputes."""
    return hashlib.sha256(_CANONICAL.encode(message).encode("utf-8")).hexdigest()


# `json.dumps` with these options builds a new encoder per call; a request hashes ~400 messages.
_CANONICAL = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class SentMessage:
    """Where one message of a request came from.

    Attributes:
        role: the role sent.
        source: "system" (the system section), "history", "input", or "request-only" (a body
            only the request carried, held by the step's `request/assembly` event).
        ref: (session, seq) of the event holding the body.
        index: for a request-only message, its index in the `request/assembly` event's array.
        sha256: hash of the exact message sent (`message_hash`).
    """

    role: str
    source: str
    ref: tuple[int, int]
    index: int | None
    sha256: str

    def to_json(self) -> dict[str, Any]:
        """Stored form inside the trace event."""
        return {"role": self.role, "source": self.source, "ref": list(self.ref), "index": self.index,
                "sha256": self.sha256}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SentMessage:
        """Read a stored entry back."""
        return cls(str(data["role"]), str(data["source"]), (int(data["ref"][0]), int(data["ref"][1])),
                   data.get("index"), str(data["sha256"]))


def trace_record(header: Event, provider: str, model: str, *, strategy: str, generation: str,
                 config: dict[str, Any], submitted_at: str, context: dict[str, Any] | None,
                 sent: Sequence[SentMessage], **more: Any) -> NewEvent:
    """The `trace/request` event for one request: the one writer of the trace schema (steps and
    compaction's summary requests alike). References and hashes only, no bodies (seed 000 §4).

    Args:
        header: the request's `request/header` event (its ref is recorded).
        provider, model: who was asked. strategy, generation: how the request was built and why.
        config: the call config requested. submitted_at: ISO time it was sent.
        context: the context fit facts, or None.
        sent: each message sent, in order (`SentMessage`).
        more: further fields of this record (`strategy_snapshot`, `replay_of`, the inbox claim, a
            turn's links), stored as given.
    """
    return NewEvent(TRACE_REQUEST, None, {
        "schema": TRACE_SCHEMA, "header": list(header.ref), "provider": provider, "model": model,
        "strategy": strategy, "generation": generation, "strategy_snapshot": None, "replay_of": None,
        "config": dict(config), "submitted_at": submitted_at, "context": context,
        "messages": [m.to_json() for m in sent], **more})


@dataclass(frozen=True, slots=True)
class MessageCheck:
    """verify's verdict on one message: "ok", "changed" (the body no longer hashes as sent) or
    "missing" (the referenced event or array entry is gone)."""

    position: int
    status: str
    ref: tuple[int, int]
    detail: str = ""


TOOLS_STATUSES = ("none", "ok", "changed", "missing", "unrecorded")
"""verify's verdict on a request's `tools`: none were offered; the array kept with the request
header hashes as the trace recorded; it no longer does; the header is gone; or the trace predates
keeping the array (names and hash only: the request cannot be sent again exactly, the messages
still verify)."""


@dataclass(frozen=True, slots=True)
class Verification:
    """The result of `verify`: per-message checks, the rebuilt array (only bodies that still
    hash as sent), the recorded call config, and the `tools` array sent (None unless
    `tools_status` is "ok")."""

    checks: list[MessageCheck]
    messages: list[dict[str, Any] | None]
    config: dict[str, Any]
    tools: list[dict[str, Any]] | None = None
    tools_status: str = "none"

    @property
    def ok(self) -> bool:
        """True when every message rebuilt to the exact bytes sent and the tools array, if one
        was kept, still hashes as sent."""
        return all(c.status == "ok" for c in self.checks) and self.tools_status not in ("changed", "missing")

    @property
    def sendable(self) -> bool:
        """True when the whole request can be sent again exactly (export, replay): `ok`, and the
        tools, if any were offered, kept whole."""
        return self.ok and self.tools_status in ("none", "ok")


def request_message_of(event: Event, index: int | None) -> dict[str, Any] | None:
    """The request message an event held: a message event's `{"role", "content"(, "name")}`,
    a replacement's message, or entry `index` of a `request/assembly` array."""
    body = event.body
    if index is not None:
        array = body.get("messages") if event.kind == EventKind.REQUEST_ASSEMBLY else None
        if array is None:
            # `append` (continue text, instructions), then `rewritten` (messages regex scripts changed).
            array = [*(body.get("append") or []), *(r.get("message") for r in body.get("rewritten") or []
                                                    if isinstance(r, dict))]
        if not isinstance(array, list) or not 0 <= index < len(array):
            return None
        found = array[index]
        return found if isinstance(found, dict) else None
    if event.kind == EventKind.SURFACE_REPLACED:
        message = body.get("message")
        if not isinstance(message, dict):
            return None
        built: dict[str, Any] = {"role": message.get("role") or event.role, "content": message.get("content", "")}
        if message.get("name"):
            built["name"] = message["name"]
        return built
    return wire_message(event.role or "system", event.content, body)


def verify(record: dict[str, Any],
           read: Callable[[Sequence[tuple[int, int]]], dict[tuple[int, int], Event]]) -> Verification:
    """Check a trace record against the log: re-read every referenced body, rebuild the message
    it was, hash it, and compare with the hash recorded when the request was sent.

    Args:
        record: a `trace/request` event body.
        read: returns the stored events at the given refs (missing ones left out).

    Returns:
        Per-message ok/changed/missing, the rebuilt array (None where a body is missing or
        changed; a changed body is never silently replaced) and the recorded config.
    """
    sent = [SentMessage.from_json(m) for m in record.get("messages", [])]
    digest = record.get("tools") if isinstance(record.get("tools"), dict) else None
    header = tuple(record.get("header") or ())
    wants_tools = bool(digest and digest.get("names")) and len(header) == 2
    events = read(sorted({m.ref for m in sent} | ({header} if wants_tools else set())))
    checks: list[MessageCheck] = []
    rebuilt: list[dict[str, Any] | None] = []
    for position, entry in enumerate(sent):
        event = events.get(entry.ref)
        message = request_message_of(event, entry.index) if event is not None else None
        if message is None:
            checks.append(MessageCheck(position, "missing", entry.ref, "the referenced body is gone"))
            rebuilt.append(None)
        elif message_hash(message) != entry.sha256:
            checks.append(MessageCheck(position, "changed", entry.ref, "the stored body no longer hashes as sent"))
            rebuilt.append(None)
        else:
            checks.append(MessageCheck(position, "ok", entry.ref))
            rebuilt.append(message)
    tools, status = None, "none"
    if wants_tools:
        assert digest is not None
        event = events.get(header)
        kept = (event.body.get("tools") or {}).get("offered") if event is not None else None
        if event is None:
            status = "missing"
        elif not isinstance(kept, list):
            status = "unrecorded"
        elif tools_digest(kept)["sha256"] != digest.get("sha256"):
            status = "changed"
        else:
            tools, status = kept, "ok"
    return Verification(checks, rebuilt, dict(record.get("config", {})), tools, status)
