"""The `Provider` protocol declares `placeholder` and `prepare` besides `name`, `model` and `stream`:
an object lacking either is not a provider; `BaseProvider` gives the usual answers (not a placeholder,
every config accepted, no endpoint); the offline demo is a placeholder, the OpenAI-compatible adapter
is not."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from tavern_tui.engine.stream import (
    BaseProvider,
    CallContext,
    ChatRequest,
    Finished,
    Provider,
    StreamEvent,
    prepare_call,
)
from tavern_tui.errors import CallConfigError
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.providers.demo import DemoProvider
from tavern_tui.providers.openai_compat import OpenAICompatProvider


async def _finished(request: ChatRequest) -> AsyncIterator[StreamEvent]:
    yield Finished("stop")


class NoPlaceholder:
    """Everything a provider has but `placeholder`."""

    name = "no-placeholder"
    model = "m"

    def prepare(self, model: str, config: Mapping[str, Any]) -> CallContext:
        return CallContext(self.name, model or self.model)

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        return _finished(request)


class NoPrepare:
    """Everything a provider has but `prepare`."""

    name = "no-prepare"
    model = "m"
    placeholder = False

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        return _finished(request)


class Minimal(BaseProvider):
    """A provider that only names itself and streams: the rest is `BaseProvider`'s."""

    name = "minimal"
    model = "own-model"

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        return _finished(request)


class Refusing(Minimal):
    """A provider whose `prepare` refuses every config."""

    def prepare(self, model: str, config: Mapping[str, Any]) -> CallContext:
        raise CallConfigError("the preset sets 'stream'; remove it")


def test_a_provider_lacking_placeholder_or_prepare_is_not_a_provider() -> None:
    assert not isinstance(NoPlaceholder(), Provider)
    assert not isinstance(NoPrepare(), Provider)
    assert isinstance(Minimal(), Provider)


def test_the_base_class_is_no_placeholder_and_accepts_every_config() -> None:
    provider = Minimal()
    assert provider.placeholder is False
    config = {"temperature": 0.7, "stop": ["\n"]}
    context = provider.prepare("asked-model", config)
    assert context == CallContext("minimal", "asked-model", "", {"temperature": 0.7, "stop": ["\n"]})
    assert context.config is not config  # a copy: the caller's config stays its own
    assert provider.prepare("", {}) == CallContext("minimal", "own-model", "", {})  # "" = its own model
    assert prepare_call(provider, "", config) == CallContext("minimal", "own-model", "", config)


def test_prepare_call_is_the_providers_prepare() -> None:
    with pytest.raises(CallConfigError, match="remove it"):
        prepare_call(Refusing(), "m", {"stream": False})


def test_the_demo_is_a_placeholder_and_the_openai_compatible_adapter_is_not() -> None:
    demo = DemoProvider(delay=0)
    real = OpenAICompatProvider(ProviderSettings(base_url="http://127.0.0.1:9/v1", model="loop-1"))
    assert isinstance(demo, Provider) and isinstance(real, Provider)
    assert demo.placeholder is True and real.placeholder is False
    assert demo.prepare("", {"temperature": 1}) == CallContext("demo", "demo", "", {"temperature": 1})
    assert real.prepare("", {}) == CallContext("openai-compatible", "loop-1", "http://127.0.0.1:9", {})
