"""Provides `TraceView`: one recorded provider request as the trace pane and `tavern trace` show it
(history, never a preview).

Rules: the `to_json` form is the `tavern trace list --json` output. Plain values: no database
objects leave the service (README "Development": the layers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class TraceView:
    """One recorded provider request (history, never a preview).

    Attributes:
        id: "session:seq" of its `trace/request` event.
        attempts: one per HTTP attempt: `{"status", "category", "config", "omitted", …}`
            (several after retries; empty when the provider keeps no attempt list).
        usage: prompt/completion tokens as the provider reported them, or None.
        latency_ms: submit to first streamed text, or None.
        reply: "session:seq" of the reply (or attempt) it produced, or None.
        outcome: "ok", "failed", "stopped", "open", or "retried (<status>)" for a request the
            provider refused before a retry.
        attempt: 1 for the first request of a step, n for its n-th (a retry's own record).
        retry_of: the first record's id, for a retry.
        omitted: call-config fields this request left out → the provider's reason.
        assembled_tokens: the request's own token count when it was assembled (its context
            fit's `used`: the app's estimate or tokenizer, not the provider's), or None.
        speaker: the group member the request was written for (its reply's `name`); None
            outside a group chat, and while the reply is not stored yet.
    """

    id: str
    session_id: int
    submitted_at: str
    provider: str
    model: str
    strategy: str
    generation: str
    messages: int
    config: dict[str, Any]
    attempts: list[dict[str, Any]]
    usage: dict[str, Any] | None
    latency_ms: int | None
    reply: str | None
    outcome: str
    attempt: int = 1
    retry_of: str | None = None
    omitted: dict[str, str] = field(default_factory=dict)
    assembled_tokens: int | None = None
    speaker: str | None = None

    def tokens_label(self) -> str | None:
        """The provider's token counts as a list shows them: "1733+85" (the request's prompt, then
        the reply's completion), the total alone when only it was reported, None when none was."""
        usage = self.usage or {}
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if prompt is not None and completion is not None:
            return f"{prompt}+{completion}"
        total = usage.get("total_tokens")
        return None if total is None else str(total)

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern trace list --json`."""
        return {"id": self.id, "session_id": self.session_id, "submitted_at": self.submitted_at,
                "provider": self.provider, "model": self.model, "strategy": self.strategy,
                "generation": self.generation, "messages": self.messages, "config": self.config,
                "attempts": self.attempts, "usage": self.usage, "latency_ms": self.latency_ms, "reply": self.reply,
                "outcome": self.outcome, "attempt": self.attempt, "retry_of": self.retry_of, "omitted": self.omitted,
                "speaker": self.speaker}


def regex_script_lines(regex_scripts: Any) -> list[str]:
    """A trace's `regex_scripts` (`{"applied": [{"ref", "depth", "scripts", "errors"?}], "blocked": [names]}`,
    None when the chat's card has no scripts) as the lines `tavern trace show` and the trace pane show:
    which scripts changed which message sent (SillyTavern's Alter Outgoing Prompt), their errors, and the
    card's scripts not allowed (never run)."""
    if not isinstance(regex_scripts, dict):
        return []
    lines = []
    for item in regex_scripts.get("applied") or []:
        ref = item.get("ref") or ()
        where = f"{ref[0]}:{ref[1]}" if len(ref) == 2 else "?"
        lines.append(f"regex scripts on message {where} (depth {item.get('depth')}): "
                     + (", ".join(str(s) for s in item.get("scripts") or []) or "none applied"))
        lines.extend(f"regex script {e.get('script')} failed on message {where}: {e.get('error')}"
                     for e in item.get("errors") or [])
    if not lines:
        lines.append("regex scripts: none changed what was sent")
    blocked = regex_scripts.get("blocked") or []
    if blocked:
        lines.append("regex scripts not allowed (never run): " + ", ".join(str(name) for name in blocked))
    return lines
