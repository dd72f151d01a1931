"""Provides the retry policy of an OpenAI-compatible call: which failures are tried again
(`retryable`: rate limits, server errors and network errors, while retries remain) and how long to
wait first (`retry_delay`).

Rules: `Retry-After` is RFC 9110 §10.2.3 (seconds or an HTTP date), `retry-after-ms` is OpenAI's;
the jittered exponential backoff follows openai-python's `_calculate_retry_timeout`. Whether
anything already reached the caller (then nothing is retried) is the caller's to know.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping

from tavern_tui.errors import ProviderError

__all__ = ["RETRY_CAP", "RETRY_CATEGORIES", "retry_delay", "retryable"]

RETRY_CAP = 10.0
"""Longest wait between attempts, in seconds, whatever `Retry-After` asks for."""

RETRY_CATEGORIES = frozenset({"rate_limit", "server", "network"})
"""The `ProviderError.category`s worth another attempt (never timeouts or bad requests)."""


def retryable(error: ProviderError, retries: int, max_retries: int) -> bool:
    """Whether a failed attempt is tried again: `retries` so far below `max_retries`, and an
    error of a `RETRY_CATEGORIES` category."""
    return retries < max_retries and error.category in RETRY_CATEGORIES


def retry_delay(attempt: int, headers: Mapping[str, str] | None, backoff: float, *, cap: float = RETRY_CAP) -> float:
    """Seconds to wait before retry number `attempt + 1`.

    Args:
        attempt: 0 for the wait after the first failed attempt, 1 after the second, …
        headers: the failed response's headers, or None for a network error.
            `retry-after-ms` (OpenAI) or `Retry-After` (RFC 9110 §10.2.3: seconds or an
            HTTP date) wins when present and non-negative.
        backoff: base delay in seconds for the exponential fallback.
        cap: upper bound in seconds.

    Returns:
        The server's requested delay capped at `cap`, else `backoff * 2**attempt` capped at
        `cap` and shrunk by up to 25 % random jitter (as openai-python's
        `_calculate_retry_timeout` does), so parallel clients do not retry in lockstep.
    """
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    asked: float | None = None
    try:
        if "retry-after-ms" in lowered:
            asked = float(lowered["retry-after-ms"]) / 1000
        elif "retry-after" in lowered:
            asked = float(lowered["retry-after"])
    except ValueError:
        when = email.utils.parsedate_tz(lowered.get("retry-after", ""))
        if when is not None:
            asked = email.utils.mktime_tz(when) - time.time()
    if asked is not None and asked >= 0:
        return min(asked, cap)
    base = min(backoff * 2**attempt, cap)
    return base * (1 - 0.25 * random.random())
