"""Pilot tests of the strategy & preset pane (F6 in the chat) on the real app and service, and its
SVG snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.message import Message
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.widgets import OptionList, Static

from tavern_tui import service_presets
from tavern_tui.errors import TavernError
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.strategy import PREVIEW_LABEL, StrategyScreen, preview_content
from tests.tui.conftest import wait_until
from tests.tui.test_app import SIZE, open_seraphina

DEFAULT_PRESET = "st_openai_default_staging"
"""The corpus's copy of SillyTavern's Default preset, named after its file."""


@pytest.fixture
def default_preset(corpus_tavern: Tavern, corpus_dir: Path) -> int:
    """Import the corpus's Default preset; its id."""
    [result] = corpus_tavern.import_paths([corpus_dir / "presets" / f"{DEFAULT_PRESET}.json"])
    assert result.ok and result.kind == "preset"
    return result.id  # type: ignore[return-value]


def notes(seen: list[Message]) -> list[str]:
    """Every notification's message text so far."""
    return [m.notification.message for m in seen if isinstance(m, Notify)]


def lines(listing: OptionList) -> list[str]:
    """The options of a list as shown (plain text, both lines)."""
    return [str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count)]


async def open_strategy(pilot: Pilot[object]) -> StrategyScreen:
    """Press F6 in the chat and wait until the preview shows."""
    await pilot.press("f6")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, StrategyScreen)
                     and pilot.app.screen.shown_key is not None)
    screen = pilot.app.screen
    assert isinstance(screen, StrategyScreen)
    return screen


async def highlight(pilot: Pilot[object], listing: OptionList, option_id: str) -> None:
    """Move the focused list's cursor to `option_id` with the arrow keys."""
    ids = [listing.get_option_at_index(i).id for i in range(listing.option_count)]
    target = ids.index(option_id)
    while listing.highlighted != target:
        await pilot.press("down" if (listing.highlighted or 0) < target else "up")


async def test_preview_apply_bind_and_back(corpus_tavern: Tavern, default_preset: int) -> None:
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        pid = chat.playthrough_id
        screen = await open_strategy(pilot)
        panel = screen.query_one("#preview")
        assert panel.border_title == PREVIEW_LABEL == "PREVIEW — not sent"
        assert "applied: compat" in str(screen.query_one("#strategy-title", Static).content)

        # the strategies known now, the applied one marked and highlighted; its preview shown
        strategies = screen.strategies
        assert [strategies.get_option_at_index(i).id for i in range(strategies.option_count)] == \
            list(service_presets.STRATEGIES)
        marked = [line.split("\n")[0] for line in lines(strategies) if "● applied" in line]
        assert marked == ["compat  ● applied"]
        assert screen.highlighted_strategy == "compat" and screen.shown_key == ("compat", None)
        compat_text = screen.preview_text
        assert "[Start a new Chat]" not in compat_text and "system · system" in compat_text

        # the built-in default first, bound; then the imported preset
        presets = lines(screen.preset_list)
        assert presets[0].startswith("SillyTavern default  ● bound")
        assert presets[1].startswith(DEFAULT_PRESET) and "● bound" not in presets[1]

        # moving the cursor previews projection and changes nothing
        await highlight(pilot, strategies, "projection")
        await wait_until(pilot, lambda: screen.shown_key == ("projection", None))
        projection_text = screen.preview_text
        assert projection_text != compat_text
        assert "system · new_chat\n[Start a new Chat]" in projection_text
        assert "adjustments" in projection_text and "tokens  ~" in projection_text
        assert corpus_tavern.playthrough(pid).strategy == "compat"
        expected = corpus_tavern.preview(pid, "", strategy="projection")
        assert projection_text == preview_content(expected, "SillyTavern default").plain

        # Enter applies it
        await pilot.press("enter")
        await wait_until(pilot, lambda: corpus_tavern.playthrough(pid).strategy == "projection")
        assert f"Applied projection to #{pid}: the next steps use it." in notes(seen)
        marked = [line.split("\n")[0] for line in lines(strategies) if "● applied" in line]
        assert marked == ["projection  ● applied"]
        assert "applied: projection" in str(screen.query_one("#strategy-title", Static).content)

        # Tab to the presets; highlighting one binds nothing, Enter binds it and the preview follows
        await pilot.press("tab")
        assert app.focused is screen.preset_list
        await highlight(pilot, screen.preset_list, str(default_preset))
        await pilot.pause()
        assert corpus_tavern.playthrough(pid).preset_id is None
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.shown_key == ("projection", default_preset))
        assert corpus_tavern.playthrough(pid).preset_id == default_preset
        assert f"with {DEFAULT_PRESET}" in screen.preview_text
        assert "● bound" in lines(screen.preset_list)[1] and "● bound" not in lines(screen.preset_list)[0]

        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat)
        title = str(chat.query_one("#chat-title", Static).content)
        assert f"· projection · preset #{default_preset}" in title


async def test_service_errors_are_notifications(corpus_tavern: Tavern, monkeypatch: pytest.MonkeyPatch) -> None:
    # A strategy the service does not know (read at runtime, so an added one is listed) and a
    # refused apply: both are notifications, the screen stays.
    monkeypatch.setattr(service_presets, "STRATEGIES", (*service_presets.STRATEGIES, "bogus"))

    def refuse(playthrough_id: int, name: str) -> None:
        raise TavernError(f"cannot apply {name}")

    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        screen = await open_strategy(pilot)
        await highlight(pilot, screen.strategies, "bogus")
        await wait_until(pilot, lambda: screen.shown_key == ("bogus", None))
        assert screen.preview_text.startswith("No preview: unknown strategy 'bogus'")
        assert any("unknown strategy 'bogus'" in note for note in notes(seen))

        monkeypatch.setattr(corpus_tavern, "apply_strategy", refuse)
        await pilot.press("enter")
        await wait_until(pilot, lambda: "cannot apply bogus" in notes(seen))
        assert app.screen is screen and corpus_tavern.playthrough(chat.playthrough_id).strategy == "compat"


@pytest.mark.usefixtures("no_cursor_blink")
def test_strategy_screen_snapshot(snap_compare, corpus_tavern: Tavern, default_preset: int) -> None:
    async def _preview_projection(pilot: Pilot[object]) -> None:
        await open_seraphina(pilot)
        screen = await open_strategy(pilot)
        await highlight(pilot, screen.strategies, "projection")
        await wait_until(pilot, lambda: screen.shown_key == ("projection", None))
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=(120, 40), run_before=_preview_projection)
