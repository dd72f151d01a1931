"""Provides matching of known secrets **by value** (issue 23 item 3): the configured API key and
the credentials of the base URL, in every encoding a trial slipped past a shape-based scanner.

Forms matched for a secret `s` (after dropping separators, at least `MIN_SECRET` characters):
plain; dash-less and spaced (the characters of `s` in order with any run of whitespace, "-", "_",
"." or ":" between them, so "token-abc123", "tokenabc123" and "t o k e n a b c 1 2 3" all match);
base64 and URL-safe base64 of any text holding `s` (the three alignments of `s` in a base64
stream each leave a fixed core of characters, which is what is looked for, with line breaks
ignored). Every pattern is literal characters with a separator class that cannot match them,
so a match costs linear time in the text.
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

MIN_SECRET = 8
"""Secrets shorter than this (after dropping separators) are not matched: too many false hits."""

_SEPARATORS = "\\s\\-_.:"
_SEPARATOR_CHARS = re.compile(f"[{_SEPARATORS}]+")
REDACTED = "[redacted]"


def _core(secret: str) -> str:
    return _SEPARATOR_CHARS.sub("", secret)


def _base64_cores(raw: bytes) -> list[str]:
    """For each of the 3 alignments of `raw` in a base64 stream, the characters that depend on
    `raw` alone (the first and last 4-character groups may mix in neighbouring bytes)."""
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw + b"\0\0\0").decode("ascii")
        start = 4 if offset else 0
        end = ((offset + len(raw)) // 3) * 4  # whole groups made of prefix + raw only
        core = encoded[start:end]
        if len(core) >= 8:
            cores.append(core)
    return cores


@functools.lru_cache(maxsize=64)
def _patterns(secret: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    core = _core(secret)
    spaced = re.compile(f"[{_SEPARATORS}]*".join(re.escape(c) for c in core))
    cores = _base64_cores(secret.encode("utf-8"))
    urlsafe = [c.replace("+", "-").replace("/", "_") for c in cores]
    return spaced, tuple(dict.fromkeys(cores + urlsafe))


def usable(secrets: Iterable[str | None]) -> list[str]:
    """The secrets long enough to match (see `MIN_SECRET`), without duplicates."""
    return list(dict.fromkeys(s.strip() for s in secrets if s and len(_core(s.strip())) >= MIN_SECRET))


def holds_secret(text: str, secrets: Iterable[str | None]) -> bool:
    """Whether `text` holds one of `secrets` in any form this module matches."""
    found = usable(secrets)
    if not found or not text:
        return False
    compact = re.sub(r"\s+", "", text)
    for secret in found:
        spaced, cores = _patterns(secret)
        if spaced.search(text) or any(core in compact for core in cores):
            return True
    return False


def redact_secrets(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with every plain, dash-less, spaced or base64 form of `secrets` replaced by
    "[redacted]" (a base64 form is replaced with the whole base64 word around it)."""
    for secret in usable(secrets):
        spaced, cores = _patterns(secret)
        text = spaced.sub(REDACTED, text)
        for core in cores:
            if core in text:
                text = re.sub(r"[A-Za-z0-9+/_\-]*" + re.escape(core) + r"[A-Za-z0-9+/_\-]*=*", REDACTED, text)
    return text


def url_credentials(url: str) -> list[str]:
    """The user name and password in a URL's authority ("" parts left out)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    return [p for p in (parts.username, parts.password) if p]


def without_credentials(url: str) -> str:
    """`url` with any `user:password@` removed (for showing it)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
