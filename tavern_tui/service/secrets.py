"""Provides the by-value refusal of the configured credentials (issue 23 item 3): the provider's
API key and the user name and password of its base URL, refused on every write surface (chat
sends and edits, chat import, persona CLI and HTTP) in plain, dash-less, spaced and base64 forms
(`text.secret_values`). Rule: API keys never reach the database, request bodies, traces, logs or
the screen (seed 002 decision 11)."""

from __future__ import annotations

from typing import Any

from tavern_tui.errors import SecretRefused
from tavern_tui.text.secret_values import holds_secret, url_credentials, usable


def configured_secrets(settings: Any, provider: Any) -> list[str]:
    """The credentials configured for the provider: the API key in the settings and the
    provider's own, and the base URLs' user names and passwords (those long enough to match)."""
    own = getattr(provider, "settings", None)
    values = [settings.provider.key, getattr(own, "key", None) or getattr(own, "api_key", "")]
    for url in (settings.provider.base_url, getattr(own, "base_url", "")):
        values += url_credentials(url or "")
    return usable(v for v in values if isinstance(v, str))


def refuse_configured(text: str, secrets: list[str], where: str) -> None:
    """Return None when `text` holds none of `secrets` in any form.

    Raises:
        SecretRefused: `configured`, naming `where` and never the secret.
    """
    if holds_secret(text, secrets):
        raise SecretRefused("api_key", where, configured=True,
                            advice="it is never stored or sent to the model (remove it)")
