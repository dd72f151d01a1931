"""Provides the typed stream events shared by providers, the engine and the UI."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the reply text, in arrival order."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning (`reasoning_content`), kept apart from the reply."""

    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage as the provider reported it (counts of tokens; None when not reported)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Finished:
    """The stream ended normally.

    Attributes:
        finish_reason: the provider's `finish_reason` ("stop", "length", …) or None.
        saw_done: True when the server sent `data: [DONE]`; False when it just closed.
    """

    finish_reason: str | None = None
    saw_done: bool = True


@dataclass(frozen=True, slots=True)
class ConfigAdjusted:
    """The call config actually sent differs from the requested one (preset fallback).

    Rule source, seed 000 §3: "Preset fallback omits only a rejected active preset override
    (temperature, maxTokens, reasoningEffort or stop), before output and when not canceled.
    Each field is tried at most once, with at most four native retries. Authentication,
    quota and unrelated network errors do not trigger this fallback. The original preset is
    unchanged; Trace records requested/effective values and omissions."

    A provider yields at most one, before any other event of the stream, and only when the
    effective config differs from the requested one.

    Attributes:
        requested: `ChatRequest.config` as the caller built it (never modified).
        effective: the config of the request that produced the stream.
        omitted: field → the provider's reason, e.g. "400: Unsupported parameter: 'temperature'
            is not supported with this model."; a field whose value moved to a replacement
            field ends its reason with "→ <replacement>" (e.g. "→ max_completion_tokens").
    """

    requested: dict[str, Any]
    effective: dict[str, Any]
    omitted: dict[str, str]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call a reply asked for, accumulated from its streamed deltas.

    Attributes:
        id: the provider's call id (`tool_calls[].id`), echoed back as the result's
            `tool_call_id`; "" when the server sent none (a stand-in is made by the engine).
        name: the function name (`tool_calls[].function.name`).
        arguments: the argument JSON text exactly as streamed (may be invalid JSON: the tool
            then answers with an error result).
        index: the call's `index` in the reply (OpenAI streams several calls interleaved by it).
    """

    id: str
    name: str
    arguments: str
    index: int = 0

    def to_wire(self) -> dict[str, Any]:
        """The OpenAI `tool_calls[]` entry sent back with the assistant message."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class ToolCalls:
    """The reply's tool calls, complete, in index order (yielded once, before `Usage`/`Finished`)."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class Attempts:
    """The HTTP attempts this stream made so far, one record each (`status`, `error`, `retry_delay`,
    `config`, `omitted`, perhaps `message`; never credentials). A provider that retries yields it
    before the stream's first other event, again before it raises, and last: the engine keeps them
    per stream (a trace record per retry, seed 000 §4), so two streams on one provider never mix
    their attempts. Providers that never retry need not yield it."""

    records: tuple[dict[str, Any], ...]


StreamEvent = TextDelta | ReasoningDelta | Usage | Finished | ConfigAdjusted | ToolCalls | Attempts
"""What `Provider.stream` yields. Errors are raised as `ProviderError`, never yielded."""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat-completions request, frozen before it is sent.

    Attributes:
        messages: the OpenAI-style message array, each `{"role": ..., "content": ...}`
            (plus optional `name`), in the exact order sent.
        model: model id; "" lets the provider use its configured default.
        config: call parameters other than messages/model/stream (temperature, max_tokens, …).
        tools: the OpenAI `tools` array offered (`{"type": "function", "function": {"name",
            "description", "parameters"}}` each); empty = the body carries no `tools`.
    """

    messages: list[dict[str, Any]]
    model: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    tools: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class CallContext:
    """The adapter context a request is made with: the provider's resolved call config, never a
    credential (seed 000 §1: "request/context records adapter context").

    Attributes:
        provider: the provider's `name`.
        model: the model id the request asks for ("" = the endpoint's own default).
        endpoint: where it goes, scheme, host and port only ("https://api.example.com"; no user,
            password, path or query); "" for a provider without a network endpoint.
        config: the call parameters sent besides messages/model/stream (temperature, …).
    """

    provider: str
    model: str
    endpoint: str = ""
    config: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The `request/context` body's `adapter` field."""
        return {"provider": self.provider, "model": self.model, "endpoint": self.endpoint,
                "config": dict(self.config)}


def prepare_call(provider: Provider, model: str, config: Mapping[str, Any]) -> CallContext:
    """Validate the call config and bind the adapter, before anything of a step is admitted
    (seed 000 §1 `prepareCall()`; DESIGN.md "One step"): `provider.prepare(model, config)`.

    Raises:
        CallConfigError: the provider cannot make this call as configured (its message says
            what to fix).
    """
    return provider.prepare(model, config)


@runtime_checkable
class Provider(Protocol):
    """Something that streams a chat completion (implemented in `tavern_tui.providers`).

    `name` labels the provider in the status line and the trace ("openai-compatible", "demo").
    `model` is the model id it will use when the request names none.
    `placeholder`, `prepare` and `warm` are described on their own below; `BaseProvider` gives
    the usual answers (not a placeholder, every config accepted, nothing to warm), so a provider
    subclasses it and overrides only what it needs.
    """

    name: str
    model: str
    placeholder: bool
    """True for a provider whose replies no model wrote (the offline demo): the engine stores
    them with origin engine and source "placeholder", never sends them to a model, and the
    services that need a real model (compaction, the model belief extractor) refuse or skip it.
    False for a provider that talks to a model."""

    def prepare(self, model: str, config: Mapping[str, Any]) -> CallContext:
        """Validate the call config and bind the adapter, before a step admits anything
        (`prepare_call`). No network is used.

        Args:
            model: the model id the request asks for ("" = the provider's own `model`).
            config: the call parameters to send besides messages/model/stream; not modified.

        Returns:
            The adapter context (`CallContext`) the step records; never a credential.

        Raises:
            CallConfigError: the provider cannot make this call as configured; the message
                names what to fix and where (the settings, a preset).
        """
        ...

    def warm(self) -> None:
        """Get ready for the first request ahead of it (e.g. make the HTTP client, whose TLS
        context loads the CA bundle: 20-40 ms that the first send would wait for on the event
        loop). Called from a worker thread after the chat is shown; no network is used; safe
        to call more than once."""
        ...

    def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        """Stream one completion (an async generator, so the engine can `aclose()` it early).

        Yields `TextDelta`, `ReasoningDelta`, `Usage` and finally `Finished`.

        Raises:
            ProviderError: a subclass classifying the failure, before or during the stream.
        """
        ...


class BaseProvider:
    """The `Provider` members most providers share: a subclass sets `name` and `model` and
    defines `stream`, and overrides `placeholder` or `prepare` only when it differs.

    Attributes:
        name: the provider's label (set by the subclass).
        model: its default model id (set by the subclass, as a class or instance attribute).
        placeholder: False: its replies are a model's.
    """

    name: str
    model: str
    placeholder: bool = False

    def prepare(self, model: str, config: Mapping[str, Any]) -> CallContext:
        """Accept every call config: the adapter context with this provider's `name`, `model`
        (else its own `model`), no endpoint ("") and a copy of `config` as given. Never raises
        `CallConfigError`: a provider that validates its config overrides this.
        """
        return CallContext(self.name, model or self.model, "", dict(config))

    def warm(self) -> None:
        """Nothing to get ready (a provider with a client to make overrides this)."""
