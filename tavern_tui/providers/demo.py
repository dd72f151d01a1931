"""Provides the offline demo provider used when no endpoint is configured, and in tests."""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import AsyncGenerator
from typing import Any

from tavern_tui.engine.stream import BaseProvider, ChatRequest, Finished, StreamEvent, TextDelta, Usage

__all__ = ["DemoProvider", "DEMO_LABEL", "canned_reply"]

DEMO_LABEL = "[demo reply — no model is configured]"
"""First line of every canned reply, so nobody mistakes it for a model's answer."""

_QUOTE_LIMIT = 60
_PIECE = re.compile(r"\s*\S+\s*|\s+")  # a word with the spaces around it


def _text_of(content: Any) -> str:
    """Text of an OpenAI message `content`: a string, or a list of `{"type": "text", "text": ...}` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _quote(text: str, limit: int = _QUOTE_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _echo(text: str) -> str:
    """`text` quoted (`_quote`) and followed by ", you say?" with no doubled punctuation: a
    trailing ".", ",", ";" or ":" gives way to the comma, and after "?", "!" or a line of
    punctuation alone there is no comma."""
    quoted = _quote(text)
    trimmed = quoted.rstrip(".,;:").rstrip()
    if not trimmed:  # only punctuation ("..."): kept as typed
        return f"{quoted} you say?"
    if trimmed.endswith(("?", "!")):
        return f"{trimmed} you say?"
    return f"{trimmed}, you say?"


_GESTURES = ("*The innkeeper sets down a mug and leans closer.*", "*The innkeeper wipes the counter and looks up.*",
             "*The innkeeper tilts her head, a cloth over one shoulder.*")
"""The canned reply's opening gestures, taken in turn: a swipe or a regenerate shows another."""


def canned_reply(request: ChatRequest, turn: int = 0) -> str:
    """The labelled demo text for `request`; `turn` picks the gesture it opens with (`_GESTURES`,
    in turn), so variants of one reply differ.

    Returns:
        `DEMO_LABEL`, a short in-character line quoting the last user message (whitespace
        collapsed, at most 60 characters, "…" when cut), and how to configure a real endpoint.
    """
    last_user = next(
        (_text_of(m.get("content")) for m in reversed(request.messages) if m.get("role") == "user"),
        "",
    )
    if last_user.strip():
        line = (
            f"{_GESTURES[turn % len(_GESTURES)]} \"{_echo(last_user)} "
            "A fine tale — but tonight I'm only a placeholder, with no voice of my own.\""
        )
    else:
        line = "*The innkeeper waves.* \"Say something, traveller — though tonight I'm only a placeholder.\""
    return (
        f"{DEMO_LABEL}\n\n{line}\n\n"
        "To talk to a real model, press ctrl+s in the app (Settings: endpoint URL, model, key), "
        "or set TAVERN_API_BASE (e.g. http://localhost:11434/v1), TAVERN_MODEL and, if the endpoint "
        "needs one, TAVERN_API_KEY — or put base_url, model and api_key in the config file."
    )


def _rough_tokens(text: str) -> int:
    """About four characters per token: good enough for a demo's usage line."""
    return max(1, (len(text) + 3) // 4) if text else 0


class DemoProvider(BaseProvider):
    """Streams canned or scripted replies without any network.

    Args:
        delay: seconds between pieces (0 still yields to the event loop between pieces,
            so cancellation lands promptly).

    `stream()` pops the next reply queued with `enqueue`, else uses `canned_reply`. It
    yields the text in word-sized `TextDelta`s, then `Usage` (rough counts: ~4 characters
    per token) and `Finished("stop")`. `asyncio.CancelledError` is never caught. It accepts
    every call config (`BaseProvider.prepare`: nothing is sent anywhere, so no endpoint).
    """

    name = "demo"
    model = "demo"
    placeholder = True
    """Its replies are the app's, not a model's: stored with origin engine and never sent to a model."""

    def __init__(self, delay: float = 0.02) -> None:
        self.delay = delay
        self._queue: deque[str] = deque()
        self._turns = 0  # canned replies made: the next one opens with the next gesture
        self.requests: list[ChatRequest] = []

    def enqueue(self, *replies: str) -> None:
        """Script exact replies: each later `stream()` call uses the next one, in order."""
        self._queue.extend(replies)

    def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        """Stream one reply; the queue is popped at call time, not at first iteration.

        Also records `request` in `self.requests` (tests assert what the engine sent).
        """
        self.requests.append(request)
        if self._queue:
            text = self._queue.popleft()
        else:
            text, self._turns = canned_reply(request, self._turns), self._turns + 1
        return self._play(text, request)

    async def _play(self, text: str, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        for piece in _PIECE.findall(text):
            await asyncio.sleep(self.delay)
            yield TextDelta(piece)
        prompt = _rough_tokens(" ".join(_text_of(m.get("content")) for m in request.messages))
        completion = _rough_tokens(text)
        yield Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)
        yield Finished("stop", saw_done=True)
