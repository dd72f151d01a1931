"""Provides the wire rules of an OpenAI-compatible `POST /chat/completions` call: the JSON body
(`wire_body`) and headers (`wire_headers`), the body fields a call config may not set
(`RESERVED_FIELDS`), and how a 400/422 answer is read (`judge_refusal`): the preset override it
rejects, a rejection of the offered tools, or another parameter it names (`OMIT_HINT`).
`ConfigFallback` keeps what the call-config fallback changed so far in one call.

Rules: the OpenAI chat-completions streaming request (`stream`, `stream_options.include_usage`);
the call-config fallback is seed 000 §3 ("Preset fallback omits only a rejected active preset
override (temperature, maxTokens, reasoningEffort or stop), before output and when not canceled.
Each field is tried at most once, with at most four native retries. Authentication, quota and
unrelated network errors do not trigger this fallback. The original preset is unchanged; Trace
records requested/effective values and omissions.").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from tavern_tui.engine.stream import ChatRequest, ConfigAdjusted
from tavern_tui.errors import BadRequestError, ProviderError
from tavern_tui.providers.errors import RejectedParameter, classify_http_error, redact, rejected_parameter

__all__ = ["MAX_CONFIG_FALLBACKS", "OMIT_HINT", "PRESET_OVERRIDES", "RESERVED_FIELDS", "ConfigFallback", "Refusal",
           "judge_refusal", "other_rejection", "rejects_tools", "wire_body", "wire_headers"]

MAX_CONFIG_FALLBACKS = 4
"""Call-config fallback retries per `stream()` call (seed 000 §3: "at most four native retries")."""

PRESET_OVERRIDES = ("temperature", "max_tokens", "max_completion_tokens", "reasoning_effort", "stop")
"""The only call fields the fallback drops (seed 000 §3: "a rejected active preset override
(`temperature`, `maxTokens`, `reasoningEffort` or `stop`)"); max_tokens and max_completion_tokens
are the one maxTokens field under its two names (tried once, under either)."""

OMIT_HINT = "leave {name!r} out for this playthrough ({how}) and send again"
"""How a rejection of another parameter tells the person the one step that gets past it; `how`
is filled by whoever knows the playthrough (the service), "tavern omit-param" by default."""


def other_rejection(error: BadRequestError, status: int, raw: bytes, effective: Mapping[str, Any],
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


def wire_headers(key: str | None) -> dict[str, str]:
    """Request headers; `Authorization: Bearer` only when a key is set."""
    headers = {"Accept": "text/event-stream, application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


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


class ConfigFallback:
    """What the call-config fallback changed so far in one `stream()` call.

    Attributes:
        requested: the call config the request asked for (never changed).
        effective: the call config sent now.
        omitted: fields left out of `effective` so far → the provider's reason; a moved field's
            reason ends with "→ <new field>"; "tools" when the offered tools were dropped.
        tried: fields already dropped or moved: never dropped or restored again.
        fallbacks: how many fields were dropped or moved (at most `MAX_CONFIG_FALLBACKS`).
        tools_dropped: a server that rejected `tools` gets one retry without them.
    """

    def __init__(self, requested: Mapping[str, Any]) -> None:
        self.requested = dict(requested)
        self.effective = dict(self.requested)
        self.omitted: dict[str, str] = {}
        self.tried: set[str] = set()
        self.fallbacks = 0
        self.tools_dropped = False

    def request(self, request: ChatRequest) -> ChatRequest:
        """What to send: `request` with the effective config, and without tools once they were rejected."""
        sent = replace(request, config=self.effective) if self.effective != self.requested else request
        return replace(sent, tools=()) if self.tools_dropped else sent

    def adjusted(self) -> ConfigAdjusted | None:
        """The event that tells the caller the request sent differs from the one asked for, else None."""
        if self.effective != self.requested or self.tools_dropped:
            return ConfigAdjusted(dict(self.requested), dict(self.effective), dict(self.omitted))
        return None

    def drop_tools(self, reason: str) -> None:
        """Send the next attempt without the offered tools."""
        self.tools_dropped = True
        self.omitted["tools"] = reason  # recorded as the parameter fallback is (seed 000 §3)

    def drop(self, rejected: RejectedParameter) -> None:
        """Send the next attempt without the rejected field, or with its value under the equivalent
        field the server named (once per field, under either name)."""
        self.fallbacks += 1
        self.tried.add(rejected.name)
        value = self.effective.pop(rejected.name)
        target = rejected.replacement
        if target is not None and target not in self.effective and target not in self.tried:
            self.effective[target] = value
            self.tried.add(target)  # the same maxTokens field: tried once, under either name
            self.omitted[rejected.name] = f"{rejected.reason} → {target}"
        else:
            self.omitted[rejected.name] = rejected.reason


@dataclass(frozen=True)
class Refusal:
    """How a non-2xx answer was read.

    Attributes:
        error: the error to raise when nothing gets past it.
        no_tools: the reason the endpoint rejected the offered tools (retry without them), else None.
        rejected: the preset override the endpoint rejected (retry without it), else None.
    """

    error: ProviderError
    no_tools: str | None = None
    rejected: RejectedParameter | None = None


def judge_refusal(status: int, raw: bytes, headers: Mapping[str, str], *, secrets: list[str], offers_tools: bool,
                  fallback: ConfigFallback) -> Refusal:
    """Read a non-2xx answer: its error (`classify_http_error`), and for a bad request whether the
    offered tools (`rejects_tools`, until they were dropped once) or a preset override still
    droppable (`rejected_parameter`, while fallbacks remain) is to blame; any other blamed call
    field makes the error name it (`other_rejection`)."""
    error = classify_http_error(status, raw, headers, secrets=secrets)
    if not isinstance(error, BadRequestError):
        return Refusal(error)
    no_tools = rejects_tools(status, raw, secrets) if offers_tools and not fallback.tools_dropped else None
    rejected: RejectedParameter | None = None
    if no_tools is None and fallback.fallbacks < MAX_CONFIG_FALLBACKS:
        candidates = [f for f in PRESET_OVERRIDES if f in fallback.effective and f not in fallback.tried]
        rejected = rejected_parameter(status, raw, candidates, secrets=secrets)
    if rejected is None and no_tools is None:
        error = other_rejection(error, status, raw, fallback.effective, secrets)
    return Refusal(error, no_tools, rejected)
