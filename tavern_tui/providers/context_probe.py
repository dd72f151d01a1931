"""Provides `probe_context`: the context window an OpenAI-compatible endpoint reports about itself,
for a provider's `context_window()`.

Sources, in order: `GET {base}/models` (the OpenAI list-models call), the configured model's (else
the only model's) `context_length` (OpenRouter), `max_model_len` (vLLM), `context_window` or
`max_context_length`; then llama.cpp's `GET {server root}/props`,
`default_generation_settings.n_ctx` or `n_ctx`. Synchronous; every request is bounded in time and
size, and any failure counts as "not reported".
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

__all__ = ["PROBE_MAX_BYTES", "PROBE_TIMEOUT", "probe_context"]

PROBE_TIMEOUT = 2.0
"""Seconds each context probe request may take (connect, and each read)."""
PROBE_MAX_BYTES = 8 * 1024 * 1024
"""The most a context probe reads of an answer (an OpenRouter `/models` list is a few MB)."""

_MODEL_KEYS = ("context_length", "max_model_len", "context_window", "max_context_length")


def _get_json(url: str, headers: dict[str, str], timeout: float) -> Any:
    """GET `url` and parse its JSON body; None on any HTTP or network error, a non-2xx status,
    a body over `PROBE_MAX_BYTES`, a total time past four `timeout`s, or a body that is not JSON."""
    deadline = time.monotonic() + 4 * timeout
    try:
        with httpx.stream("GET", url, headers=headers, timeout=timeout) as response:
            if not response.is_success:
                return None
            data = bytearray()
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) > PROBE_MAX_BYTES or time.monotonic() > deadline:
                    return None
        return json.loads(bytes(data))
    except (httpx.HTTPError, ValueError):
        return None


def _tokens(value: Any) -> int | None:
    """A reported context size: a positive int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def probe_context(base_url: str, model: str, headers: dict[str, str], timeout: float) -> tuple[int, str] | None:
    """The context the endpoint at `base_url` reports for `model`.

    Args:
        base_url: the API root (often …/v1); `/props` is asked of the server root (without `/v1`).
        model: the configured model id; when it is not listed, the only listed model counts.
        headers: the request headers (the key's `Authorization`).
        timeout: seconds each request may take (connect, and each read); four of them in all.

    Returns:
        (tokens, "endpoint:/models" | "endpoint:/props"), or None.
    """
    base = base_url.rstrip("/")
    listed = _get_json(base + "/models", headers, timeout)
    models = listed.get("data") if isinstance(listed, dict) else None
    if isinstance(models, list):
        chosen = [m for m in models if isinstance(m, dict) and m.get("id") == model]
        chosen = chosen or ([m for m in models if isinstance(m, dict)] if len(models) == 1 else [])
        for key in _MODEL_KEYS:
            value = _tokens(chosen[0].get(key) if chosen else None)
            if value is not None:
                return value, "endpoint:/models"
    root = base[:-3] if base.endswith("/v1") else base
    props = _get_json(root + "/props", headers, timeout)
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        value = settings.get("n_ctx") if isinstance(settings, dict) else None
        value = _tokens(value if value is not None else props.get("n_ctx"))
        if value is not None:
            return value, "endpoint:/props"
    return None
