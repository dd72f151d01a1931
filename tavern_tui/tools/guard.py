"""Provides the tool guard: argument validation, the roleplay permission check and the bound on
what a result may bring back.

Rules (issue 19 §4; seed 000 §3 "`tools.guard` … refuses high-risk execution; changing prompt
layout does not remove execution controls"):
- safe tools run; a tool named in the config's `[tools] allow` runs;
- a high-risk tool runs only when `[tools] allow` names it (the person is never asked);
- any other (unknown risk) call is asked about when an asker is set (the TUI: allow once /
  always for this tool / refuse), and refused otherwise (the CLI);
- arguments are validated against the tool's JSON schema (`jsonschema`, Draft 2020-12 unless
  the schema says) before anything runs; arguments holding a configured secret are refused;
- a result is cut to `max_result_chars` characters.
A refusal is an outcome: the model reads it as the tool's result, and the trace names it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tavern_tui.tools import Asker, ToolSpec

MAX_RESULT_CHARS = 8000
"""Characters of one tool result sent to the model at most (the rest is cut, and said so)."""

MAX_ARGUMENT_CHARS = 64 * 1024
"""Characters of one call's arguments accepted at most."""

ASK_ANSWERS = ("once", "always", "refuse")


@dataclass(frozen=True, slots=True)
class Decision:
    """The guard's verdict on one call: `allowed`, how ("safe", "config", "asked once",
    "asked always", "this session") or why not (`reason`)."""

    allowed: bool
    how: str = ""
    reason: str = ""


class Guard:
    """Decides whether a call runs.

    Args:
        allowed: tool names the config allows (`[tools] allow`), whatever their risk.
        asker: asks the person about an unknown-risk call (None: refuse it, the CLI's rule).
        secrets: values no tool may receive (the API key); a call whose arguments hold one is refused.
        max_result_chars: the result bound.
    """

    def __init__(self, allowed: Iterable[str] = (), asker: Asker | None = None, *, secrets: Iterable[str] = (),
                 max_result_chars: int = MAX_RESULT_CHARS) -> None:
        self.allowed = set(allowed)
        self.asker = asker
        self.secrets = [s for s in secrets if s]
        self.max_result_chars = max_result_chars
        self.session_allowed: set[str] = set()  # "always for this tool" answers, for this run

    def state(self, spec: ToolSpec) -> str:
        """How a call of `spec` would be decided now: "allowed", "ask" or "refused"."""
        if spec.name in self.allowed or spec.name in self.session_allowed or spec.risk == "safe":
            return "allowed"
        if spec.risk == "high" or self.asker is None:
            return "refused"
        return "ask"

    async def decide(self, spec: ToolSpec, arguments: dict[str, Any]) -> Decision:
        """Allow or refuse one call of `spec` with `arguments` (already validated)."""
        text = json.dumps(arguments, ensure_ascii=False)
        if any(secret in text for secret in self.secrets):
            return Decision(False, reason="the arguments hold a configured secret; a tool never receives it")
        if spec.name in self.allowed:
            return Decision(True, "config")
        if spec.name in self.session_allowed:
            return Decision(True, "this session")
        if spec.risk == "safe":
            return Decision(True, "safe")
        if spec.risk == "high":
            return Decision(False, reason=f"{spec.name} is high-risk; it runs only when [tools] allow names it")
        if self.asker is None:
            return Decision(False, reason=f"{spec.name} is not allowed in this session "
                                          "(its risk is unknown; add it to [tools] allow in the config)")
        answer = await self.asker(spec, arguments)
        if answer == "always":
            self.session_allowed.add(spec.name)
            return Decision(True, "asked always")
        if answer == "once":
            return Decision(True, "asked once")
        return Decision(False, reason=f"the person refused this call of {spec.name}")

    def validate(self, spec: ToolSpec, raw: str) -> dict[str, Any]:
        """The call's arguments parsed and checked against `spec.parameters`.

        Raises:
            ValueError: not JSON, not an object, too long, or not matching the schema; the
                message (what the model reads) names the problem and the field.
        """
        if len(raw) > MAX_ARGUMENT_CHARS:
            raise ValueError(f"the arguments of {spec.name} are over {MAX_ARGUMENT_CHARS} characters")
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            raise ValueError(f"the arguments of {spec.name} are not valid JSON ({exc.msg} at character "
                             f"{exc.pos}); send a JSON object matching its parameters") from None
        if not isinstance(arguments, dict):
            raise ValueError(f"the arguments of {spec.name} must be a JSON object, not {type(arguments).__name__}")
        import jsonschema  # here, not at import: it costs every command that never runs a tool ~0.1 s

        try:
            validator = jsonschema.validators.validator_for(spec.parameters, default=jsonschema.Draft202012Validator)
            error = jsonschema.exceptions.best_match(validator(spec.parameters).iter_errors(arguments))
        except jsonschema.exceptions.SchemaError as exc:
            raise ValueError(f"the tool {spec.name} has an invalid schema: {exc.message}") from None
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(the arguments)"
            raise ValueError(f"invalid arguments for {spec.name} at {where}: {error.message}")
        return arguments

    def bound(self, text: str) -> str:
        """`text` cut to the result bound, with a note saying how much was left out."""
        if len(text) <= self.max_result_chars:
            return text
        note = f"\n[result cut: {len(text) - self.max_result_chars} more characters not shown]"
        return text[:self.max_result_chars] + note
