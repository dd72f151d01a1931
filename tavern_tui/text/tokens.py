"""Provides token counting: the default estimate and a pluggable, cached `TokenCounter`.

The estimate is ceil(UTF-8 bytes / 4): about right for English BPE tokenizers (≈4 characters a
token) and conservative for CJK text, whose characters are 3 bytes and about one token each.
SillyTavern's own fallback when no tokenizer is available is characters / 3.35
(public/scripts/tokenizers.js `guesstimate`); bytes / 4 stays closer for CJK.

`TokenCounter` wraps a count function with a bounded LRU cache keyed by the text, so the same
history message is counted once across steps (SillyTavern caches per message the same way,
`tokenizers.js` `tokenCache`). `make_counter` builds an exact counter from a local Hugging Face
`tokenizer.json` when the optional `tokenizers` package is installed; it never downloads
anything and falls back to the estimate (with a logged warning) otherwise.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["CACHE_SIZE", "DEFAULT_COUNTER", "TokenCounter", "estimate_messages", "estimate_tokens", "make_counter"]

log = logging.getLogger(__name__)

CACHE_SIZE = 4096
"""Texts a `TokenCounter` remembers (least recently used ones are forgotten first)."""


def estimate_tokens(text: str) -> int:
    """Estimated token count of `text` (0 for "")."""
    return math.ceil(len(text.encode("utf-8")) / 4) if text else 0


def estimate_messages(messages: list[dict[str, object]]) -> int:
    """Estimated tokens of an OpenAI message array: content plus ~3 tokens of framing each."""
    return sum(estimate_tokens(str(m.get("content", ""))) + 3 for m in messages)


class TokenCounter:
    """A token count function with a bounded LRU cache: `counter(text) -> int`.

    Attributes:
        name: "estimate" for the default estimate, "tokenizers:<path>" for a tokenizer file, or
            what the caller passed.
        exact: True when the count is the model tokenizer's own (not an estimate).
        maxsize: the number of texts kept (≥ 1).
        hits, misses: cache statistics since creation / the last `clear()`.

    The cache is keyed by the text itself; "" is 0 without calling the function. Safe to share
    between threads (the cache is guarded by a lock; the count function runs outside it).
    """

    def __init__(self, count: Callable[[str], int] = estimate_tokens, *, name: str = "estimate",
                 exact: bool = False, maxsize: int = CACHE_SIZE) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, got {maxsize}")
        self.count = count
        self.name = name
        self.exact = exact
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, text: str) -> int:
        """Tokens of `text` (cached)."""
        if not text:
            return 0
        with self._lock:
            value = self._cache.get(text)
            if value is not None:
                self._cache.move_to_end(text)
                self.hits += 1
                return value
        value = int(self.count(text))
        with self._lock:
            self.misses += 1
            self._cache[text] = value
            self._cache.move_to_end(text)
            while len(self._cache) > self.maxsize:
                self._cache.popitem(last=False)
        return value

    def __len__(self) -> int:
        """Texts currently cached."""
        return len(self._cache)

    def clear(self) -> None:
        """Forget every cached count and reset the statistics."""
        with self._lock:
            self._cache.clear()
            self.hits = self.misses = 0

    def __repr__(self) -> str:
        return f"TokenCounter(name={self.name!r}, exact={self.exact}, cached={len(self)}/{self.maxsize})"


DEFAULT_COUNTER = TokenCounter()
"""The shared estimate counter: the default of `PromptInputs.count`, so repeated builds hit one cache."""

_made: dict[tuple[str, float | None], TokenCounter] = {}
_made_lock = threading.Lock()


def make_counter(tokenizer_path: str | None) -> TokenCounter:
    """The counter to use for a model.

    Args:
        tokenizer_path: a local Hugging Face `tokenizer.json`, or None for the estimate.

    Returns:
        A `TokenCounter` named "tokenizers:<path>" (exact) that counts
        `Tokenizer.from_file(path).encode(text, add_special_tokens=False)` ids, when the path
        is given, the file exists and loads, and the optional `tokenizers` package is
        importable; otherwise the shared `DEFAULT_COUNTER` ("estimate"), with a warning logged
        saying why. Never raises and never touches the network. The same path (same file
        modification time) returns the same counter, so its cache is shared across calls.
    """
    if not tokenizer_path:
        return DEFAULT_COUNTER
    path = os.path.expanduser(tokenizer_path)
    try:
        mtime: float | None = os.stat(path).st_mtime
    except OSError:
        mtime = None
    key = (path, mtime)
    with _made_lock:
        made = _made.get(key)
    if made is not None:
        return made
    made = _load(path, mtime)
    with _made_lock:
        _made[key] = made
    return made


def _load(path: str, mtime: float | None) -> TokenCounter:
    if mtime is None or not os.path.isfile(path):
        log.warning("tokenizer file %s not found: token counts are estimated (UTF-8 bytes / 4)", path)
        return DEFAULT_COUNTER
    try:
        from tokenizers import Tokenizer  # optional; not a dependency
    except ImportError:
        log.warning("the 'tokenizers' package is not installed: token counts are estimated (UTF-8 bytes / 4) "
                    "instead of using %s", path)
        return DEFAULT_COUNTER
    try:
        tokenizer = Tokenizer.from_file(path)
    except Exception as exc:  # noqa: BLE001 - any load failure falls back to the estimate
        log.warning("tokenizer file %s could not be loaded (%s): token counts are estimated", path, exc)
        return DEFAULT_COUNTER

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return TokenCounter(count, name=f"tokenizers:{path}", exact=True)
