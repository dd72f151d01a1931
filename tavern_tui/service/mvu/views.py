"""Provides what the MVU service hands out: `MvuView` (the record at a playthrough's head), `MvuBound` (the
state one request is built from), `stat_hash` (the record's fingerprint a trace keeps) and the limits the
readers and committers share (`MIN_REPLY`, `CAS_TRIES`).

Rules: `tavern_tui.mvu` (the record's shape) and the package's docstring (`service.mvu`); `MIN_REPLY` is MVU's own
(update_variables.ts:1431).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

MIN_REPLY = 5
"""Assistant messages shorter than this are not read for commands (update_variables.ts:1431)."""
CAS_TRIES = 8
"""How often a reply's commit is recomputed on a base that moved before giving up."""


@dataclass(frozen=True)
class MvuView:
    """The MVU record at a playthrough's head.

    Attributes:
        record: `{stat_data, schema, display_data, delta_data, initialized_lorebooks}`, None = no MVU state.
        committed: False when it is the initial record computed for display only (nothing initialised yet).
        message: ref of the message it belongs to; changes / refused: what the reply that made it changed
            (`mvu.Change.to_json`) and which of its commands were refused and why.
    """

    playthrough_id: int
    record: dict[str, Any] | None
    committed: bool = False
    message: tuple[int, int] | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    commit: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        """`{"playthrough", "record", "committed", "message", "changes", "refused"}`."""
        return {"playthrough": self.playthrough_id, "record": self.record, "committed": self.committed,
                "message": list(self.message) if self.message else None, "changes": list(self.changes),
                "refused": list(self.refused)}


def stat_hash(record: dict[str, Any] | None) -> str | None:
    """sha256 (hex) of a record's `stat_data` as canonical JSON (keys sorted, no spaces, UTF-8); None for none."""
    if record is None:
        return None
    text = json.dumps(record.get("stat_data"), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class MvuBound:
    """The MVU state one request is built from.

    Attributes:
        snapshot: the message variables macros and templates read (`snapshot_variables`; {} = no MVU state).
        texts: message ref → the text MVU would have stored back for it (`message_after_update`: the status
            placeholder appended, `<status_current_variable>` blocks removed) for the assistant messages it has
            read; the log keeps the raw text, requests and the transcript use this one.
        facts: what the trace records (`{"commit", "message", "committed", "stat_data_sha256", "pending"}`),
            None when there is no MVU state.
    """

    snapshot: dict[str, Any] = field(default_factory=dict)
    texts: dict[tuple[int, int], str] = field(default_factory=dict)
    facts: dict[str, Any] | None = None
