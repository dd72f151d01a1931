"""Provides the default token estimate (no tokenizer is needed offline).

The estimate is ceil(UTF-8 bytes / 4): about right for English BPE tokenizers (≈4 characters a
token) and conservative for CJK text, whose characters are 3 bytes and about one token each.
SillyTavern's own fallback when no tokenizer is available is characters / 3.35
(public/scripts/tokenizers.js `guesstimate`); bytes / 4 stays closer for CJK.
"""

from __future__ import annotations

import math


def estimate_tokens(text: str) -> int:
    """Estimated token count of `text` (0 for "")."""
    return math.ceil(len(text.encode("utf-8")) / 4) if text else 0


def estimate_messages(messages: list[dict[str, object]]) -> int:
    """Estimated tokens of an OpenAI message array: content plus ~3 tokens of framing each."""
    return sum(estimate_tokens(str(m.get("content", ""))) + 3 for m in messages)
