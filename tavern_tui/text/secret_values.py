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
from typing import Any
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


class StreamRedactor:
    """`redact_secrets` over text that arrives in pieces (a streamed reply): a secret split across
    two pieces is still caught. Only a tail that could still grow into a secret is held back (it
    starts like a secret's spaced form or like one of its base64 cores), so ordinary text passes
    on in the pieces it came in.

    `feed(piece)` returns the text that is safe to pass on now (possibly ""), `flush()` the rest;
    `hits` counts the times a secret was replaced. A base64 word is replaced from its core on (the
    characters before the core, already passed on, depend on the text around the secret).
    """

    def __init__(self, secrets: Iterable[str | None]) -> None:
        import regex  # partial matching: does a tail start a secret?

        self.secrets = usable(secrets)
        self.hits = 0
        self._held = ""
        self._forms: list[tuple[Any, tuple[str, ...]]] = []
        for secret in self.secrets:
            spaced, cores = _patterns(secret)
            self._forms.append((regex.compile(spaced.pattern), cores))
        self._firsts = {_core(s)[0] for s in self.secrets} | {c[0] for _p, cores in self._forms for c in cores}
        # A spaced form with one separator between characters is the longest tail looked at.
        self._window = max((2 * len(_core(s)) + 8 for s in self.secrets), default=0)

    def feed(self, piece: str) -> str:
        """Add `piece`; return what can be passed on now, redacted."""
        if not self.secrets:
            return piece
        text = self._redact(self._held + piece)
        cut = self._could_start(text)
        self._held = text[cut:]
        return text[:cut]

    def flush(self) -> str:
        """The held tail, redacted (the stream ended)."""
        text, self._held = self._redact(self._held), ""
        return text

    def _could_start(self, text: str) -> int:
        """The first index from which `text` could still grow into a secret; len(text) if none."""
        for start in range(max(0, len(text) - self._window), len(text)):
            if text[start] not in self._firsts:
                continue
            tail = text[start:]
            for spaced, cores in self._forms:
                if spaced.fullmatch(tail, partial=True) or any(core.startswith(tail) for core in cores):
                    return start
        return len(text)

    def _redact(self, text: str) -> str:
        redacted = redact_secrets(text, self.secrets)
        if redacted != text:
            self.hits += 1
        return redacted
