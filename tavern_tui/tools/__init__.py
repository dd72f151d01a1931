"""Provides the tools a turn may call: `ToolSpec`, the `Toolbox` the engine runs calls through
(built-ins and MCP servers, every call through the guard), and the names of the built-ins.

Rules: issue 19 and seed 000 §3 (`tools.guard` adds roleplay restrictions over permission checks
and refuses high-risk execution). The package may import engine, lore and text; never the
service, the store or the UI (pyproject layers contract).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tavern_tui.engine.stream import ToolCall
from tavern_tui.engine.tooling import ToolOutcome

RISKS = ("safe", "unknown", "high")
"""Risk levels: built-ins are safe; an MCP tool is unknown unless the config marks it."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as offered to the model.

    Attributes:
        name: the function name the model calls (an MCP tool's is `<server>__<tool>`).
        description: what it does, for the model.
        parameters: its JSON schema (an object schema); arguments are validated against it.
        risk: one of `RISKS`.
        source: "builtin" or "mcp:<server>".
    """

    name: str
    description: str
    parameters: dict[str, Any]
    risk: str = "unknown"
    source: str = "builtin"

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI `tools[]` entry."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


class ToolFailed(Exception):
    """A tool ran and failed; the message is what the model reads (no secrets, no paths of ours)."""

    def __init__(self, message: str, status: str = "error") -> None:
        super().__init__(message)
        self.status = status


class Tool(Protocol):
    """A callable tool: its spec and `call(arguments) -> (text, summary)`; raises `ToolFailed`."""

    spec: ToolSpec

    async def call(self, arguments: dict[str, Any]) -> tuple[str, str]: ...


class Toolbox:
    """The `engine.tooling.ToolRunner` of a playthrough: offers the enabled tools and runs each
    call through `guard` (validation, permission, size bound).

    Args:
        builtins: enabled built-in tools (any `Tool`: called in-process).
        guard: a `guard.Guard`.
        mcp: an `mcp_client.McpManager`, or None.
    """

    def __init__(self, builtins: Sequence[Tool], guard: Any, mcp: Any = None) -> None:
        self.builtins = {t.spec.name: t for t in builtins}
        self.guard = guard
        self.mcp = mcp
        self._specs: dict[str, ToolSpec] = {}

    async def specs(self) -> list[ToolSpec]:
        """Every tool available now: built-ins, then each running MCP server's (a server is
        started on first use; one that fails to start or crashed is left out, and reported in
        `mcp.problems`)."""
        specs = [t.spec for t in self.builtins.values()]
        if self.mcp is not None:
            specs += await self.mcp.tools()
        self._specs = {s.name: s for s in specs}
        return specs

    async def offered(self) -> tuple[dict[str, Any], ...]:
        """The OpenAI `tools` array for the next request. A configured secret (the API key) that
        a server's schema or description happens to hold is replaced by `[secret]`: the array is
        sent to the model and kept with the request header."""
        array = tuple(s.to_openai() for s in await self.specs())
        secrets = [s for s in getattr(self.guard, "secrets", ()) if s]
        if not secrets:
            return array
        scrubbed = []
        for entry in array:
            text = json.dumps(entry, ensure_ascii=False)
            if any(secret in text for secret in secrets):
                for secret in secrets:
                    text = text.replace(json.dumps(secret, ensure_ascii=False)[1:-1], "[secret]")
                entry = json.loads(text)
            scrubbed.append(entry)
        return tuple(scrubbed)

    async def run(self, call: ToolCall) -> ToolOutcome:
        """Run `call`: unknown tool, invalid JSON or arguments against the schema, a refusal, a
        timeout and a crash each give an outcome the model reads; nothing raises."""
        spec = self._specs.get(call.name)
        if spec is None:
            await self.specs()
            spec = self._specs.get(call.name)
        if spec is None:
            reason = f"there is no tool named {call.name!r} (offered: {', '.join(self._specs) or 'none'})"
            return _error(reason, "unavailable")
        try:
            arguments = self.guard.validate(spec, call.arguments)
        except ValueError as exc:
            return _error(str(exc), "error", risk=spec.risk)
        decision = await self.guard.decide(spec, arguments)
        if not decision.allowed:
            return ToolOutcome(json.dumps({"refused": decision.reason}, ensure_ascii=False), "refused",
                               {"reason": decision.reason, "risk": spec.risk, "summary": f"refused: {decision.reason}"})
        try:
            if spec.name in self.builtins:
                text, summary = await self.builtins[spec.name].call(arguments)
            else:
                text, summary = await self.mcp.call(spec, arguments)
        except ToolFailed as exc:
            return _error(str(exc), exc.status, risk=spec.risk)
        bounded = self.guard.bound(text)
        detail: dict[str, Any] = {"risk": spec.risk, "summary": summary, "allowed": decision.how}
        if len(bounded) != len(text):
            detail["truncated_from"] = len(text)
        return ToolOutcome(bounded, "ok", detail)


class RecordedOffer:
    """The `engine.tooling.ToolRunner` of a replay: offers exactly the `tools` array a past request
    sent (so the replayed request is that request), and runs a call through `live` (the
    playthrough's `Toolbox` today, guard and all) when it still has the tool; otherwise the model
    reads that the tool is unavailable.

    Args:
        offered: the recorded `tools` array (OpenAI form), sent as is at every step.
        live: the playthrough's toolbox now, or None (no tool configured today).
    """

    def __init__(self, offered: Sequence[dict[str, Any]], live: Toolbox | None) -> None:
        self._offered = tuple(dict(t) for t in offered)
        self.live = live

    async def offered(self) -> tuple[dict[str, Any], ...]:
        """The recorded array, unchanged."""
        return self._offered

    async def run(self, call: ToolCall) -> ToolOutcome:
        """`live.run(call)`, or an "unavailable" outcome when no tool of that name is configured now."""
        if self.live is None:
            return _error(f"{call.name} was offered when this request was first sent; no tool is configured now",
                          "unavailable")
        return await self.live.run(call)


def _error(reason: str, status: str, **detail: Any) -> ToolOutcome:
    return ToolOutcome(json.dumps({"error": reason}, ensure_ascii=False), status,
                       {"reason": reason, "summary": f"error: {reason}", **detail})


def offer_line(tools: Sequence[dict[str, Any]]) -> str:
    """The tools a preview lists, on one line: `roll_dice (safe, builtin), lab__wipe (high,
    mcp:lab, refused)`; the allowed state is named only when a call would not simply run
    ("ask": the TUI asks first; "refused"). Input: `ToolService.preview` rows."""
    return ", ".join(f"{t['name']} ({t['risk']}, {t['source']}"
                     + (f", {t['allowed']})" if t.get("allowed") not in (None, "allowed") else ")") for t in tools)


Asker = Callable[[ToolSpec, dict[str, Any]], Awaitable[str]]
"""Asks the person about one call: returns "once", "always" or "refuse" (the TUI's modal)."""
