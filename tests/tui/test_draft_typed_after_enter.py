"""An opening draft's first line shows under the greeting as soon as Enter is pressed, and what the
person types right after (while the draft is made a playthrough) is in the new chat's composer,
not lost with the draft screen."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tavern_tui.service import Tavern
from tavern_tui.service.openings import OpeningService
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.draft import DraftScreen
from tavern_tui.tui.widgets.message_box import MessageBox
from tests.tui.conftest import ScriptedProvider, open_character, wait_until
from tests.tui.test_app import SIZE


def _held(monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> threading.Event:
    """Make `owner.name` wait in its worker thread until the returned event is set."""
    go = threading.Event()
    original = getattr(owner, name)

    def held(self: Any, *args: Any, **kwargs: Any) -> Any:
        go.wait(30)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(owner, name, held)
    return go


async def _first_line(pilot: Any, text: str) -> DraftScreen:
    """Open Skynet's opening draft, type `text` and press Enter; the draft screen."""
    await open_character(pilot, "Skynet", playthrough=False)
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, DraftScreen) and pilot.app.screen.draft is not None)
    draft = pilot.app.screen
    await pilot.press(*text, "enter")
    return draft  # type: ignore[no-any-return]


async def test_keys_typed_while_the_first_line_starts_the_playthrough_stay(
        corpus_tavern: Tavern, scripted: ScriptedProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    made = _held(monkeypatch, OpeningService, "begin")  # the playthrough is being made: the person goes on typing
    scripted.enqueue("Welcome, traveller.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        draft = await _first_line(pilot, "Hello")
        # The line shows under the greeting at once, while the playthrough is still being made.
        await wait_until(pilot, lambda: [box.text for box in draft.query(MessageBox)] == ["Hello"])
        assert not made.is_set()
        await pilot.press(*"and more")
        await wait_until(pilot, lambda: draft.prompt.value == "and more")
        made.set()
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)
        chat = app.screen
        await wait_until(pilot, lambda: [b.text for b in chat.transcript.boxes][-2:]
                         == ["Hello", "Welcome, traveller."])
        assert chat.prompt.value == "and more"


async def test_the_first_line_stays_in_sight_as_the_chat_opens_and_shows_once(
        corpus_tavern: Tavern, scripted: ScriptedProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    from tavern_tui.service.steps.runner import StepRunner

    going = _held(monkeypatch, StepRunner, "_prepare_step")  # the chat is open; its step has not begun
    scripted.enqueue("Welcome, traveller.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await _first_line(pilot, "Hello")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted
                         and bool(app.screen.transcript.boxes))
        chat = app.screen
        await wait_until(pilot, lambda: [b.text for b in chat.transcript.boxes][-1:] == ["Hello"])
        assert not going.is_set() and chat.generating  # shown before the step began
        going.set()
        await wait_until(pilot, lambda: not chat.generating)
        texts = [b.text for b in chat.transcript.boxes]
        assert texts[-2:] == ["Hello", "Welcome, traveller."] and texts.count("Hello") == 1


async def test_a_first_line_refused_as_the_chat_opens_leaves_the_chat_and_goes_back_to_the_composer(
        corpus_tavern: Tavern, scripted: ScriptedProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    from tavern_tui.errors import TavernError
    from tavern_tui.service.steps.runner import StepRunner

    def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise TavernError("the line cannot fit the context")  # refused before the step began

    monkeypatch.setattr(StepRunner, "_prepare_step", refuse)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await _first_line(pilot, "Hello")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted
                         and app.screen.prompt.value == "Hello" and not app.screen.generating)
        chat = app.screen
        await wait_until(pilot, lambda: "Hello" not in [b.text for b in chat.transcript.boxes])
    assert scripted.requests == []
