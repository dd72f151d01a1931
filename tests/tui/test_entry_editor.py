"""Pilot tests of the world-book entry editor's Save / Cancel, which it shares with the persona
and strategy editors (`SaveCancelModal`): Esc and Cancel save nothing, Cancel waits while a
save runs, a refused save keeps the editor open with the error and Save enabled again."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Button, Input, Static

from tavern_tui.service import Tavern, WorldBookView
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.entry_editor import EntryEditor
from tavern_tui.tui.screens.home import HomeScreen
from tests.tui.conftest import wait_until

SIZE = (120, 40)
BOOK = {"entries": {"0": {"uid": 0, "key": ["harbor"], "comment": "harbor", "content": "The harbor is old."},
                    "1": {"uid": 1, "key": ["lamp"], "comment": "lamp", "content": "The lamp never goes out."}}}


@pytest.fixture
def book_id(tavern: Tavern, tmp_path: Path) -> int:
    """A two-entry book (uids 0 and 1) imported into the service; its id."""
    (tmp_path / "Harbor.json").write_text(json.dumps(BOOK))
    [result] = tavern.imports.import_paths([tmp_path / "Harbor.json"])
    assert result.ok and result.kind == "world_book", result.error
    return result.id  # type: ignore[return-value]


@dataclass
class Editing:
    """The app under test and what its entry editors dismissed with."""

    app: TavernApp
    pilot: Pilot[object]
    tavern: Tavern
    book_id: int
    closed: list[WorldBookView | None] = field(default_factory=list)

    async def open(self, index: int) -> EntryEditor:
        """Push the editor on entry `index` from the home screen, as the lore pane does."""
        await wait_until(self.pilot, lambda: isinstance(self.app.screen, HomeScreen))
        editor = EntryEditor(self.tavern, self.book_id, self.tavern.lore.world_book(self.book_id), index)
        self.app.call_later(self.app.push_screen, editor, self.closed.append)
        await wait_until(self.pilot, lambda: self.app.screen is editor)
        return editor

    async def until_closed(self, editor: EntryEditor) -> None:
        await wait_until(self.pilot, lambda: self.app.screen is not editor)


@asynccontextmanager
async def editing(tavern: Tavern, book_id: int) -> AsyncIterator[Editing]:
    """Run the app on `tavern` with an `Editing` harness for the book."""
    app = TavernApp(tavern)
    async with app.run_test(size=SIZE) as pilot:
        yield Editing(app, pilot, tavern, book_id)


def error_of(editor: EntryEditor) -> str:
    return str(editor.query_one("#editor-error", Static).content)


def save_button(editor: EntryEditor) -> Button:
    return editor.query_one("#save", Button)


async def test_escape_and_the_cancel_button_discard_the_edits(tavern: Tavern, book_id: int) -> None:
    before = tavern.lore.export_world_book(book_id)
    async with editing(tavern, book_id) as run:
        editor = await run.open(1)
        editor.query_one("#title", Input).value = "changed by Esc"
        await run.pilot.press("escape")
        await run.until_closed(editor)
        editor = await run.open(1)
        editor.query_one("#title", Input).value = "changed by Cancel"
        await run.pilot.click("#cancel")
        await run.until_closed(editor)
    assert run.closed == [None, None]
    assert tavern.lore.export_world_book(book_id) == before


async def test_cancel_does_nothing_while_a_save_runs(tavern: Tavern, book_id: int) -> None:
    before = tavern.lore.export_world_book(book_id)
    async with editing(tavern, book_id) as run:
        editor = await run.open(1)
        editor.query_one("#title", Input).value = "kept"
        assert editor.begin_save()  # a save is running: its result decides how the editor closes
        assert not editor.begin_save()  # … and a second one does not start
        assert save_button(editor).disabled
        await run.pilot.press("escape")
        await run.pilot.click("#cancel")
        await run.pilot.pause()
        assert run.app.screen is editor and run.closed == []
        editor.save_refused("Not saved: the disk is full")  # the save's result: a refusal
        assert run.app.screen is editor and error_of(editor) == "Not saved: the disk is full"
        assert not save_button(editor).disabled
        assert editor.query_one("#title", Input).value == "kept"  # the edits stay
        await run.pilot.press("escape")  # no save running: Esc closes again
        await run.until_closed(editor)
    assert run.closed == [None]
    assert tavern.lore.export_world_book(book_id) == before


async def test_the_save_button_saves_after_a_refusal(tavern: Tavern, book_id: int) -> None:
    before = tavern.lore.export_world_book(book_id)
    async with editing(tavern, book_id) as run:
        editor = await run.open(1)
        editor.query_one("#uid", Input).value = "0"  # the other entry's uid: the service refuses the book
        editor.query_one("#title", Input).value = "lamp room"
        await run.pilot.click("#save")
        await run.pilot.pause()
        assert run.app.screen is editor and run.closed == []
        assert error_of(editor).startswith("Not saved:") and "duplicate uid 0" in error_of(editor)
        assert not save_button(editor).disabled and not editor.saving
        assert tavern.lore.export_world_book(book_id) == before

        editor.query_one("#uid", Input).value = "1"
        # A button ignores clicks while it flashes from the last one.
        await wait_until(run.pilot, lambda: not save_button(editor).has_class("-active"))
        await run.pilot.click("#save")
        await run.until_closed(editor)
    [view] = run.closed
    assert view is not None and view.id == book_id
    assert [e.comment for e in tavern.lore.world_book(book_id).entries] == ["harbor", "lamp room"]


async def test_an_unexpected_failure_is_shown_and_the_editor_stays_usable(tavern: Tavern, book_id: int,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    before = tavern.lore.export_world_book(book_id)

    def broken(_book_id: int, _book: object) -> WorldBookView:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(tavern.lore, "save_world_book", broken)
    async with editing(tavern, book_id) as run:
        editor = await run.open(0)
        editor.query_one("#title", Input).value = "harbour"
        await run.pilot.press("ctrl+s")  # the save (and its failure) runs in a worker
        await wait_until(run.pilot, lambda: error_of(editor) != "")
        assert run.app.screen is editor
        assert error_of(editor) == "Not saved: RuntimeError: database is locked"
        assert not editor.saving and not save_button(editor).disabled
        await run.pilot.press("escape")
        await run.until_closed(editor)
    assert run.closed == [None]
    assert tavern.lore.export_world_book(book_id) == before
