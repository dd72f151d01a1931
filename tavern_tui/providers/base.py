"""Provides provider settings; the `Provider` protocol itself is the engine's (engine/stream.py)."""

from __future__ import annotations

from dataclasses import dataclass

from tavern_tui.engine.stream import Provider
from tavern_tui.text.secret_values import without_credentials

__all__ = ["Provider", "ProviderSettings"]


@dataclass(frozen=True)
class ProviderSettings:
    """Where and how to reach an OpenAI-compatible endpoint.

    Attributes:
        base_url: API root such as "https://api.example.com/v1" (the adapter appends
            "/chat/completions"); "" means no endpoint is configured (the demo provider is used).
        model: model id sent as `model`.
        api_key: bearer token; never logged, stored or shown (repr hides it).
        timeout: seconds to wait for connect and for each read.
    """

    base_url: str = ""
    model: str = ""
    api_key: str = ""
    timeout: float = 60.0

    def __repr__(self) -> str:  # the key must never reach logs or the screen
        key = "set" if self.api_key else "unset"
        # The base URL's user:password never shows either (issue 23 item 3).
        return (f"ProviderSettings(base_url={without_credentials(self.base_url)!r}, model={self.model!r}, "
                f"api_key=<{key}>, timeout={self.timeout})")
