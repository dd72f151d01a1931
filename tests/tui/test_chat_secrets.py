"""Pilot tests: a secret typed into the chat prompt is held back with a warning (the kind, never the
secret); Enter again on the same text sends it, except the configured provider API key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.message import Message
from textual.notifications import Notification, Notify

from tavern_tui.config import Settings
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tests.tui.conftest import ScriptedProvider, wait_until
from tests.tui.test_app import SIZE, open_seraphina

SK_KEY = "sk-" + "A1b2C3d4E5" * 4  # sk- and 40 alphanumerics
CONFIGURED = "local-9f8e7d6c5b4a3f2e1d0c"


def warnings(seen: list[Message]) -> list[Notification]:
    return [m.notification for m in seen if isinstance(m, Notify) and m.notification.severity == "warning"]


async def test_a_pasted_key_is_held_back_until_enter_again_on_the_same_text(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    text, reply = f"here is {SK_KEY}", "I will forget I saw that."
    scripted.enqueue(reply)
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        pid = chat.playthrough_id
        shown = corpus_tavern.playthroughs.messages(pid)
        await pilot.press(*text)
        assert chat.prompt.value == text
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(warnings(seen)) == 1)
        [note] = warnings(seen)
        assert "API key" in note.message and "Enter again" in note.message and SK_KEY not in note.message
        assert SK_KEY not in note.title
        await pilot.app.workers.wait_for_complete()
        assert chat.prompt.value == text and not chat.generating  # the text stays in the prompt
        assert scripted.requests == [] and corpus_tavern.playthroughs.messages(pid) == shown

        await pilot.press("!")  # changed text: warned again, still not sent
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(warnings(seen)) == 2)
        await pilot.press("backspace")  # the first text again, but the last warning was for the changed one
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(warnings(seen)) == 3)
        await pilot.app.workers.wait_for_complete()
        assert (scripted.requests == [] and corpus_tavern.playthroughs.messages(pid) == shown
                and chat.prompt.value == text)

        await pilot.press("enter")  # the same unchanged text again: sent
        await pilot.app.workers.wait_for_complete()
        await wait_until(pilot, lambda: not chat.generating and bool(scripted.requests))
        assert len(warnings(seen)) == 3
        assert scripted.requests[0].messages[-1]["content"] == text
        stored = corpus_tavern.playthroughs.messages(pid)
        assert [(m.role, m.content) for m in stored[-2:]] == [("user", text), ("assistant", reply)]
        assert chat.prompt.value == ""
        assert [b.text for b in chat.transcript.boxes[-2:]] == [text, reply]


@pytest.fixture
def keyed_tavern(db_url: str, corpus_dir: Path, scripted: ScriptedProvider) -> Iterator[Tavern]:
    service = Tavern(Settings(db_url=db_url, provider=ProviderSettings(api_key=CONFIGURED)), provider=scripted)
    assert all(r.ok for r in service.imports.import_paths([corpus_dir / "cards"]))
    yield service
    service.close()


async def test_the_configured_api_key_is_never_sent_from_the_prompt(keyed_tavern: Tavern,
                                                                     scripted: ScriptedProvider) -> None:
    text = f"my key {CONFIGURED}"
    seen: list[Message] = []
    app = TavernApp(keyed_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        shown = keyed_tavern.playthroughs.messages(chat.playthrough_id)
        await pilot.press(*text)
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(warnings(seen)) == 1)
        await pilot.press("enter")  # Enter again does not override it
        await wait_until(pilot, lambda: len(warnings(seen)) == 2)
        await pilot.app.workers.wait_for_complete()
        for note in warnings(seen):
            assert "configured provider API key" in note.message and CONFIGURED not in note.message
            assert "Enter again" not in note.message
        assert chat.prompt.value == text and not chat.generating
        assert scripted.requests == [] and keyed_tavern.playthroughs.messages(chat.playthrough_id) == shown
