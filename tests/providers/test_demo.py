"""Tests for the offline `DemoProvider`."""

from __future__ import annotations

import asyncio

import pytest

from tavern_tui.engine.stream import ChatRequest, Finished, Provider, TextDelta, Usage
from tavern_tui.providers.demo import DEMO_LABEL, DemoProvider


def request(text: str) -> ChatRequest:
    return ChatRequest(messages=[{"role": "system", "content": "Be an innkeeper."}, {"role": "user", "content": text}])


async def reply(provider: DemoProvider, req: ChatRequest) -> tuple[str, list]:
    events = [e async for e in provider.stream(req)]
    return "".join(e.text for e in events if isinstance(e, TextDelta)), events


async def test_enqueued_replies_are_used_in_order_then_canned() -> None:
    provider = DemoProvider(delay=0)
    provider.enqueue("First exact reply.", "Second  reply,\nwith lines.")
    assert (await reply(provider, request("a")))[0] == "First exact reply."
    text, events = await reply(provider, request("b"))
    assert text == "Second  reply,\nwith lines."
    assert sum(isinstance(e, TextDelta) for e in events) > 1  # streamed in pieces
    assert (await reply(provider, request("c")))[0].startswith(DEMO_LABEL)
    assert [r.messages[-1]["content"] for r in provider.requests] == ["a", "b", "c"]


async def test_canned_reply_is_labelled_quotes_user_and_explains_setup() -> None:
    provider = DemoProvider(delay=0)
    long_message = "Tell me   about the dragon that sleeps beneath the old mill, and why nobody wakes it."
    text, events = await reply(provider, request(long_message))
    assert text.startswith("[demo reply — no model is configured]")
    quoted = text.split('"', 1)[1].split(", you say?", 1)[0]
    assert quoted.startswith("Tell me about the dragon that sleeps beneath the old mill")  # whitespace collapsed
    assert quoted.endswith("…") and len(quoted) <= 60
    for name in ("ctrl+s", "TAVERN_API_BASE", "TAVERN_MODEL", "TAVERN_API_KEY", "config file"):
        assert name in text
    usage, finished = events[-2:]
    assert isinstance(usage, Usage) and usage.completion_tokens and usage.prompt_tokens
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert finished == Finished("stop", saw_done=True)
    assert isinstance(provider, Provider) and (provider.name, provider.model) == ("demo", "demo")


@pytest.mark.parametrize(("said", "echoed"), [
    ("Tell me about the shadowfang.", '"Tell me about the shadowfang, you say? A fine tale'),
    ("Wait...", '"Wait, you say? A fine tale'),
    ("Is it true?", '"Is it true? you say? A fine tale'),
    ("Run!", '"Run! you say? A fine tale'),
    ("Hello there", '"Hello there, you say? A fine tale'),
    ("...", '"... you say? A fine tale'),
])
async def test_canned_reply_echoes_a_line_ending_in_punctuation_without_doubling_it(said: str, echoed: str) -> None:
    text, _ = await reply(DemoProvider(delay=0), request(said))
    assert echoed in text


async def test_canned_reply_without_user_message() -> None:
    text, _ = await reply(DemoProvider(delay=0), ChatRequest(messages=[]))
    assert text.startswith(DEMO_LABEL) and "TAVERN_API_BASE" in text


async def test_cancellation_mid_stream_propagates() -> None:
    provider = DemoProvider(delay=0.05)
    provider.enqueue("one two three four five six seven eight")
    received: list[str] = []
    started = asyncio.Event()

    async def consume() -> None:
        async for event in provider.stream(request("hi")):
            if isinstance(event, TextDelta):
                received.append(event.text)
                started.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 0.2)  # lands at once, not after the remaining pieces
    assert task.cancelled()
    assert 0 < len(received) < 8  # at least the first piece, far from all of them


async def test_canned_replies_take_their_gestures_in_turn_so_swipes_differ() -> None:
    provider = DemoProvider(delay=0)
    texts = [(await reply(provider, request("Hello.")))[0] for _ in range(4)]
    assert len(set(texts[:3])) == 3 and texts[3] == texts[0]
    assert all('"Hello, you say? A fine tale' in text for text in texts)
