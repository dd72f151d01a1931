"""Provides provider settings; the `Provider` protocol itself is the engine's (`engine.stream`, not
imported here: the config reads these settings before the first screen paints)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from urllib.parse import urlsplit

from tavern_tui.text.secret_values import without_credentials

__all__ = ["ENDPOINT_FIX", "ProviderSettings", "endpoint_of", "endpoint_problem"]


@dataclass(frozen=True)
class ProviderSettings:
    """Where and how to reach an OpenAI-compatible endpoint.

    Attributes:
        base_url: API root such as "https://api.example.com/v1" (the adapter appends
            "/chat/completions"); "" means no endpoint is configured (the demo provider is used).
        model: model id sent as `model`.
        api_key: bearer token as given (flag, environment, config file); never logged, stored or
            shown (repr hides it). Read `key`, which also looks in the keyring.
        timeout: seconds to wait for connect and for each read.
        keyring: with no `api_key`, `key` calls this on first use for the key stored elsewhere (the
            settings pass `config.store.keyring_api_key`: finding the keyring's backend costs ~0.3 s,
            which a command that never calls the endpoint should not pay); None: no other place.
    """

    base_url: str = ""
    model: str = ""
    api_key: str = ""
    timeout: float = 60.0
    keyring: Callable[[], str] | None = field(default=None, compare=False)

    @cached_property
    def key(self) -> str:
        """The bearer token: `api_key`, else what `keyring` gives, else ""."""
        if self.api_key or self.keyring is None:
            return self.api_key
        return self.keyring()

    def __repr__(self) -> str:  # the key must never reach logs or the screen
        key = "set" if self.api_key else "keyring" if self.keyring is not None else "unset"
        # The base URL's user:password never shows either (issue 23 item 3).
        return (f"ProviderSettings(base_url={without_credentials(self.base_url)!r}, model={self.model!r}, "
                f"api_key=<{key}>, timeout={self.timeout})")


ENDPOINT_FIX = ("set [provider] base_url in config.toml, the TAVERN_API_BASE environment variable, --api-base, "
                "or the settings (ctrl+s)")
"""Where the endpoint URL is configured, named in every message about an unusable one."""


def endpoint_problem(base_url: str) -> str | None:
    """What makes `base_url` unusable as an OpenAI-compatible API root, or None when it is usable
    (or empty: no endpoint, the offline demo). Checked before a step admits anything (the service
    before it builds the request, `OpenAICompatProvider.prepare` in the step's prepare stage), so a
    typo in the settings leaves the typed text queued instead of a failed reply. The message names
    the URL (without credentials) and where to fix it (`ENDPOINT_FIX`).

    Rule: httpx sends only to http(s) URLs with a host (and a numeric port, if any); anything else
    fails at the first request.
    """
    if not base_url:
        return None
    shown = without_credentials(base_url)
    try:
        parts = urlsplit(base_url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return f"the endpoint URL {shown!r} is not a URL; {ENDPOINT_FIX}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (f"the endpoint URL {shown!r} must start with http:// or https:// and name a host (for example "
                f"http://127.0.0.1:5001/v1); {ENDPOINT_FIX}")
    return None


def endpoint_of(base_url: str) -> str:
    """`base_url` as scheme, host and port only ("https://api.example.com:8443"): what a request's
    records may say about where it went (no user, password, path or query, which can hold a key);
    "" for a URL that does not parse."""
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError:
        return ""
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{f':{port}' if port is not None else ''}" if host else ""
