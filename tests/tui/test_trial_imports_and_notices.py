"""Import feedback: a file imported before never reports its warnings again; the notifications
list opens at the newest entry's top; the import picker's placeholder fits 80 columns."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import Input, RichLog

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.import_screen import ImportScreen
from tavern_tui.tui.screens.notices import NoticesScreen
from tests.tui.conftest import wait_until, workers_idle

pytestmark = pytest.mark.usefixtures("no_cursor_blink")


async def import_in_the_app(app: TavernApp, pilot, path: Path) -> str:  # type: ignore[no-untyped-def]
    """Import `path` through ctrl+o and return the summary line."""
    before = len([n for n in app.notices if n.title == "Import"])
    await pilot.press("ctrl+o")
    await wait_until(pilot, lambda: isinstance(app.screen, ImportScreen) and app.screen.is_mounted)
    app.screen.query_one("#import-path", Input).value = str(path)
    await pilot.press("enter")
    await wait_until(pilot, lambda: len([n for n in app.notices if n.title == "Import"]) > before, timeout=20)
    await workers_idle(pilot)
    return [n.text for n in app.notices if n.title == "Import"][-1]


async def test_reimporting_reports_no_warnings_again(corpus_tavern: Tavern, corpus_dir: Path,
                                                     tmp_path: Path) -> None:
    folder = tmp_path / "presets"
    shutil.copytree(corpus_dir / "presets", folder)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(120, 40)) as pilot:
        await workers_idle(pilot)
        first = await import_in_the_app(app, pilot, folder)
        assert first == "Imported 4 presets"
        warned = [n.title for n in app.notices if n.title.endswith("with warnings")]
        assert warned  # the corpus has presets with warnings: reported once, on the first import
        toasts = len([t for t in app._notifications if t.title == "Imported with warnings"])
        again = await import_in_the_app(app, pilot, folder)
        assert again == "4 already imported"
        assert [n.title for n in app.notices if n.title.endswith("with warnings")] == warned
        assert len([t for t in app._notifications if t.title == "Imported with warnings"]) == toasts


async def test_notifications_open_at_the_newest_entry(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(80, 24)) as pilot:
        await workers_idle(pilot)
        for n in range(30):
            app.record_notice("warning", f"Notice {n}", f"line one of {n}\nline two of {n}")
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: isinstance(app.screen, NoticesScreen) and app.screen.is_mounted)
        log = app.screen.query_one(RichLog)
        await wait_until(pilot, lambda: log.max_scroll_y > 0)
        await pilot.pause()
        assert log.scroll_y == 0
        assert log.lines[0].text.endswith("Notice 29") and log.lines[1].text == "line one of 29"


async def test_the_import_placeholder_fits_80_columns(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(80, 24)) as pilot:
        await workers_idle(pilot)
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, ImportScreen) and app.screen.is_mounted)
        await pilot.pause()
        field = app.screen.query_one("#import-path", Input)
        placeholder = str(field.placeholder)
        assert "folder" in placeholder and "several" in placeholder
        assert len(placeholder) < field.content_region.width, field.content_region  # room for the cursor
        row = app.screen._compositor.render_strips()[field.content_region.y].text  # type: ignore[attr-defined]
        assert placeholder in row
