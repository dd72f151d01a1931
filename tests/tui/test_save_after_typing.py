"""Ctrl+S in an editor saves what was typed before it, however fast the keys came: the editors'
Ctrl+S is a priority binding (the app's own Ctrl+S opens the settings), which the app answers
as the key arrives, while the keys before it may still wait in the text field's queue (a trial
typed a persona entry and pressed Ctrl+S at once: "{{user}} is a" was saved of "{{user}} is a
wandering cartographer named Ada.")."""

from __future__ import annotations

from textual import events
from textual.app import App
from textual.pilot import Pilot

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.edit_message import EditMessageScreen
from tavern_tui.tui.screens.persona.editor import PersonaEditor
from tests.tui.conftest import wait_until
from tests.tui.test_app import SIZE
from tests.tui.test_persona_pane import open_editor, open_pane

TYPED = "{{user}} is a wandering cartographer named Ada."


def _send(pilot: Pilot[object], *keys: str) -> None:
    """Keys as a terminal sends them: queued at once, none waited for."""
    for key in keys:
        event = events.Key(key, " " if key == "space" else key if len(key) == 1 else None)
        event.set_sender(pilot.app)
        pilot.app._driver.send_message(event)  # type: ignore[union-attr]


async def test_a_persona_entry_typed_and_saved_at_once_is_saved_whole(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        pane = await open_pane(pilot, "f8")
        await open_editor(pilot, "a")
        loads = pane.loads
        _send(pilot, *[("space" if c == " " else c) for c in TYPED], "ctrl+s")
        await wait_until(pilot, lambda: not isinstance(app.screen, PersonaEditor))
        await wait_until(pilot, lambda: pane.loads > loads and not pane.busy)
        assert [e.text for e in corpus_tavern.persona.persona().entries] == [TYPED]


class _Editing(App[None]):
    """An app that opens the message editor on "Draft" and keeps what it answers."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[str | None] = []

    def on_mount(self) -> None:
        self.push_screen(EditMessageScreen("Ann", "Draft"), self.answers.append)


async def test_a_message_edit_typed_and_saved_at_once_is_saved_whole() -> None:
    app = _Editing()
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, EditMessageScreen) and app.screen.is_mounted)
        _send(pilot, *[("space" if c == " " else c) for c in " of the letter, then the rest."], "ctrl+s")
        await wait_until(pilot, lambda: bool(app.answers))
        assert app.answers == ["Draft of the letter, then the rest."]
