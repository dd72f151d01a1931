"""Pilot tests of the strategy & preset pane (F6 in the chat) on the real app and service, and its
SVG snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, Select, Static

from tavern_tui.assembly.strategies import BASES, BUILTINS, OPTIONS, SLOTS_FIRST, StrategySpec
from tavern_tui.errors import NotFound, TavernError
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.strategy import StrategyScreen
from tavern_tui.tui.screens.strategy.editor import StrategyEditor
from tavern_tui.tui.screens.strategy.labels import PREVIEW_LABEL, preview_content
from tests.tui.conftest import noted, notes, wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina

DEFAULT_PRESET = "st_openai_default_staging"
"""The corpus's copy of SillyTavern's Default preset, named after its file."""


@pytest.fixture
def default_preset(corpus_tavern: Tavern, corpus_dir: Path) -> int:
    """Import the corpus's Default preset; its id."""
    [result] = corpus_tavern.imports.import_paths([corpus_dir / "presets" / f"{DEFAULT_PRESET}.json"])
    assert result.ok and result.kind == "preset"
    return result.id  # type: ignore[return-value]



def lines(listing: OptionList) -> list[str]:
    """The options of a list as shown (plain text, every line of each)."""
    return [str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count)]


def line_of(listing: OptionList, option_id: str) -> str:
    """One option as shown (plain text, every line)."""
    return str(listing.get_option(option_id).prompt)


def applied_lines(listing: OptionList) -> list[str]:
    """The strategies marked as applied, as "first line | mark line"."""
    return [" | ".join(line.split("\n")[:2]) for line in lines(listing) if "● " in line]


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


async def open_editor(pilot: Pilot[object], screen: StrategyScreen, name: str) -> StrategyEditor:
    """Highlight strategy `name` and press c; the editor once it shows."""
    await highlight(pilot, screen.strategies, name)
    await pilot.press("c")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, StrategyEditor) and pilot.app.screen.is_mounted)
    editor = pilot.app.screen
    assert isinstance(editor, StrategyEditor)
    return editor


async def type_name(pilot: Pilot[object], editor: StrategyEditor, name: str) -> None:
    """Clear the editor's name field and type `name` into it."""
    field = editor.query_one("#strategy-name", Input)
    field.focus()
    field.value = ""
    await pilot.press(*name)
    assert editor.name_text == name


async def choose(pilot: Pilot[object], editor: StrategyEditor, option: str, value: str) -> None:
    """Pick `value` in the option's drop-down with the keyboard (focus, Enter, arrows, Enter)."""
    select = editor.query_one(f"#option-{option}", Select)
    select.focus()
    await pilot.press("enter")
    await pilot.pause()
    values = list(OPTIONS[editor.spec.base][option][0])  # the drop-down lists them in this order
    step = values.index(value) - values.index(select.value)
    await pilot.press(*(["down"] * step if step > 0 else ["up"] * -step), "enter")
    await wait_until(pilot, lambda: select.value == value)


async def save(pilot: Pilot[object]) -> None:
    """Ctrl+S in the editor, then wait until it closed."""
    await pilot.press("ctrl+s")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, StrategyScreen) and pilot.app.screen.is_mounted)
    await workers_idle(pilot)  # the list and the notice come from the save's worker and the refresh after it


async def test_preview_apply_bind_and_back(corpus_tavern: Tavern, default_preset: int) -> None:
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        pid = chat.playthrough_id
        screen = await open_strategy(pilot)
        panel = screen.query_one("#preview")
        assert panel.border_title == PREVIEW_LABEL == "PREVIEW — not sent"
        # a new playthrough starts on preset-slots-first (seed 000 §2.1)
        assert corpus_tavern.strategies.applied_strategy(pid) == BUILTINS[SLOTS_FIRST]
        assert "applied: preset-slots-first v1" in str(screen.query_one("#strategy-title", Static).content)

        # the service's strategies (the built-in ones: nothing saved yet), the applied one marked
        # and highlighted; its preview shown
        strategies = screen.strategies
        assert [strategies.get_option_at_index(i).id for i in range(strategies.option_count)] == \
            [spec.name for spec in corpus_tavern.strategies.strategies()] == list(BASES)
        assert line_of(strategies, "compat").startswith("compat · v1 · built in\n  card + world info")
        assert applied_lines(strategies) == ["preset-slots-first · v1 · built in |   ● applied"]
        assert screen.highlighted_strategy == SLOTS_FIRST and screen.shown_key == (SLOTS_FIRST, 1, None)
        slots_text = screen.preview_text
        assert slots_text.startswith("preset-slots-first with SillyTavern default · 2 messages")
        assert "[Start a new Chat]" not in slots_text and "system · system" in slots_text
        assert panel.border_subtitle == "preset-slots-first v1 · SillyTavern default"

        # the built-in default first, bound; then the imported preset
        presets = lines(screen.preset_list)
        assert presets[0].startswith("SillyTavern default  ● bound")
        assert presets[1].startswith(DEFAULT_PRESET) and "● bound" not in presets[1]

        # moving the cursor previews projection and changes nothing
        await highlight(pilot, strategies, "projection")
        await wait_until(pilot, lambda: screen.shown_key == ("projection", 1, None))
        projection_text = screen.preview_text
        assert projection_text != slots_text
        assert "system · new_chat\n[Start a new Chat]" in projection_text
        assert "adjustments" in projection_text and "tokens  ~" in projection_text
        assert corpus_tavern.strategies.applied_strategy(pid).name == SLOTS_FIRST
        assert corpus_tavern.playthroughs.playthrough(pid).strategy == SLOTS_FIRST
        expected = corpus_tavern.steps.preview(pid, "", strategy="projection")
        assert projection_text == preview_content(expected, "SillyTavern default").plain

        # Enter applies it (the version listed)
        await pilot.press("enter")
        await wait_until(pilot, lambda: corpus_tavern.strategies.applied_strategy(pid).name == "projection")
        assert corpus_tavern.strategies.applied_strategy(pid) == BUILTINS["projection"]
        assert corpus_tavern.playthroughs.playthrough(pid).strategy == "projection"
        await noted(pilot, seen, f"Applied projection v1 to #{pid}: the next steps use it.")
        # the list and the title are relabelled by a worker after the apply
        await wait_until(pilot, lambda: applied_lines(strategies) == ["projection · v1 · built in |   ● applied"]
                         and "applied: projection v1" in str(screen.query_one("#strategy-title", Static).content))
        await pilot.press("enter")  # again: nothing to do
        await wait_until(pilot, lambda: f"projection v1 is already applied to #{pid}." in notes(seen))

        # Tab to the presets; highlighting one binds nothing, Enter binds it and the preview follows
        await pilot.press("tab")
        assert app.focused is screen.preset_list
        await highlight(pilot, screen.preset_list, str(default_preset))
        await pilot.pause()
        assert corpus_tavern.playthroughs.playthrough(pid).preset_id is None
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.shown_key == ("projection", 1, default_preset))
        assert corpus_tavern.playthroughs.playthrough(pid).preset_id == default_preset
        assert f"with {DEFAULT_PRESET}" in screen.preview_text
        assert "● bound" in lines(screen.preset_list)[1] and "● bound" not in lines(screen.preset_list)[0]

        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat)
        # The preset's name, read off the event loop (its id shows until the name arrives).
        await wait_until(pilot, lambda: f"· projection · preset {DEFAULT_PRESET}"
                         in str(chat.query_one("#chat-title", Static).content))


async def test_service_errors_are_notifications(corpus_tavern: Tavern, monkeypatch: pytest.MonkeyPatch) -> None:
    # A strategy the service lists but cannot build (the list is read from the service at
    # runtime) and a refused apply: both are notifications, the screen stays.
    listed = corpus_tavern.strategies.strategies
    monkeypatch.setattr(corpus_tavern.strategies, "strategies", lambda: [*listed(), StrategySpec("bogus", 1, "compat")])

    def refuse(playthrough_id: int, name: str, version: int | None = None) -> None:
        raise TavernError(f"cannot apply {name} v{version}")

    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        screen = await open_strategy(pilot)
        assert line_of(screen.strategies, "bogus") == "bogus · v1 · compat\n  no options"
        await highlight(pilot, screen.strategies, "bogus")
        await wait_until(pilot, lambda: screen.shown_key == ("bogus", 1, None))
        assert screen.preview_text.startswith("No preview: unknown strategy 'bogus'")
        await noted(pilot, seen, lambda note: "unknown strategy 'bogus'" in note)

        monkeypatch.setattr(corpus_tavern.strategies, "apply_strategy", refuse)
        await pilot.press("enter")
        await wait_until(pilot, lambda: "cannot apply bogus v1" in notes(seen))
        assert app.screen is screen
        assert corpus_tavern.strategies.applied_strategy(chat.playthrough_id).name == SLOTS_FIRST


async def test_copy_save_apply_and_next_version(corpus_tavern: Tavern) -> None:
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        pid = chat.playthrough_id
        screen = await open_strategy(pilot)
        before = corpus_tavern.strategies.applied_strategy(pid)
        assert before == BUILTINS[SLOTS_FIRST]

        # Esc cancels: nothing saved
        editor = await open_editor(pilot, screen, SLOTS_FIRST)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)
        assert [s.name for s in corpus_tavern.strategies.strategies()] == list(BASES)

        # c on a built-in: a copy named "<name> copy", base read-only, its options as they are
        editor = await open_editor(pilot, screen, SLOTS_FIRST)
        assert editor.name_text == "preset-slots-first copy"
        assert str(editor.query_one("#strategy-base", Static).content) == "preset-slots-first (read-only)"
        assert editor.options == {"examples": "system"}
        assert editor.saves_as_text == "Saves preset-slots-first copy v1 (a new strategy)."
        await type_name(pilot, editor, "lean")
        assert editor.saves_as_text == "Saves lean v1 (a new strategy)."
        await choose(pilot, editor, "examples", "omit")
        await save(pilot)

        # stored as lean v1; saving applied nothing
        assert corpus_tavern.strategies.strategy_spec("lean") == StrategySpec("lean", 1, SLOTS_FIRST,
                                                                               {"examples": "omit"})
        assert corpus_tavern.strategies.applied_strategy(pid) == before
        assert corpus_tavern.playthroughs.playthrough(pid).strategy == SLOTS_FIRST
        await noted(pilot, seen, "Saved lean v1 — not applied; press Enter to apply")
        await wait_until(pilot, lambda: line_of(screen.strategies, "lean")
                         == "lean · v1 · preset-slots-first\n  examples=omit")
        assert applied_lines(screen.strategies) == ["preset-slots-first · v1 · built in |   ● applied"]
        # the saved version is highlighted (the list focused) and previewed
        assert app.focused is screen.strategies and screen.highlighted_strategy == "lean"
        await wait_until(pilot, lambda: screen.shown_key == ("lean", 1, None))
        assert screen.preview_text.startswith("lean with SillyTavern default")

        # Enter applies it
        await pilot.press("enter")
        await wait_until(pilot, lambda: corpus_tavern.strategies.applied_strategy(pid).name == "lean")
        await workers_idle(pilot)  # the list is relabelled by a worker after the apply
        assert corpus_tavern.strategies.applied_strategy(pid) == corpus_tavern.strategies.strategy_spec("lean", 1)
        await noted(pilot, seen, f"Applied lean v1 to #{pid}: the next steps use it.")
        assert applied_lines(screen.strategies) == ["lean · v1 · preset-slots-first |   ● applied"]

        # c on a saved strategy edits it: the same name saves its next version, still not applied
        editor = await open_editor(pilot, screen, "lean")
        assert editor.name_text == "lean" and editor.options == {"examples": "omit"}
        assert editor.saves_as_text == "Saves lean v2 (the next version of lean v1)."
        await choose(pilot, editor, "examples", "system")
        await save(pilot)
        assert corpus_tavern.strategies.strategy_spec("lean") == StrategySpec("lean", 2, SLOTS_FIRST,
                                                                               {"examples": "system"})
        assert corpus_tavern.strategies.applied_strategy(pid) == StrategySpec("lean", 1, SLOTS_FIRST,
                                                                               {"examples": "omit"})
        await noted(pilot, seen, "Saved lean v2 — not applied; press Enter to apply")
        await wait_until(pilot, lambda: line_of(screen.strategies, "lean")
                         == "lean · v2 · preset-slots-first\n  ● v1 applied · v2 saved, not applied\n  examples=system")
        assert "applied: lean v1" in str(screen.query_one("#strategy-title", Static).content)
        await wait_until(pilot, lambda: screen.shown_key == ("lean", 2, None))

        # Enter applies the version listed
        await pilot.press("enter")
        await wait_until(pilot, lambda: corpus_tavern.strategies.applied_strategy(pid).version == 2)
        await workers_idle(pilot)  # the list is relabelled by a worker after the apply
        assert line_of(screen.strategies, "lean") == "lean · v2 · preset-slots-first\n  ● applied\n  examples=system"


async def test_refusals_and_conflicts_stay_in_the_editor(corpus_tavern: Tavern) -> None:
    corpus_tavern.strategies.save_strategy("lean", SLOTS_FIRST, {"examples": "omit"})
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        pid = chat.playthrough_id
        screen = await open_strategy(pilot)
        editor = await open_editor(pilot, screen, "lean")

        # a built-in name is refused: said in the editor, which stays open with nothing written
        await type_name(pilot, editor, "compat")
        assert editor.saves_as_text == "compat is built in and read-only: choose another name."
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "read-only" in editor.error_text)
        assert editor.error_text.startswith("Not saved, nothing was written:")
        assert app.screen is editor

        # someone saves lean v2 behind the editor's back; Save (expecting v1) is a conflict
        await type_name(pilot, editor, "lean")
        await choose(pilot, editor, "examples", "system")
        corpus_tavern.strategies.save_strategy("lean", SLOTS_FIRST, {"examples": "system"}, expected_version=1)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "gained a version" in editor.error_text)
        assert editor.error_text == ("Not saved, nothing was written: lean gained a version since this pane read it "
                                     "(v1, now v2). Cancel and copy it again, or save under another name.")
        assert app.screen is editor and not editor.saving
        assert corpus_tavern.strategies.strategy_spec("lean").version == 2
        with pytest.raises(NotFound):
            corpus_tavern.strategies.strategy_spec("lean", 3)
        assert corpus_tavern.strategies.applied_strategy(pid) == BUILTINS[SLOTS_FIRST]
        assert not any(note.startswith("Saved ") for note in notes(seen))

        # another name saves a new strategy from the same form
        await type_name(pilot, editor, "lean 2")
        await save(pilot)
        assert corpus_tavern.strategies.strategy_spec("lean 2") == StrategySpec("lean 2", 1, SLOTS_FIRST,
                                                                                 {"examples": "system"})
        assert corpus_tavern.strategies.applied_strategy(pid) == BUILTINS[SLOTS_FIRST]
        assert screen.highlighted_strategy == "lean 2"


@pytest.mark.usefixtures("no_cursor_blink")
def test_strategy_screen_snapshot(snap_compare, corpus_tavern: Tavern, default_preset: int) -> None:
    # lean v1 applied, v2 saved since: the list says so; projection highlighted and previewed
    corpus_tavern.strategies.save_strategy("lean", SLOTS_FIRST, {"examples": "omit"})

    async def _preview_projection(pilot: Pilot[object]) -> None:
        chat = await open_seraphina(pilot)
        corpus_tavern.strategies.apply_strategy(chat.playthrough_id, "lean")
        corpus_tavern.strategies.save_strategy("lean", SLOTS_FIRST, {"examples": "system"}, expected_version=1)
        screen = await open_strategy(pilot)
        await highlight(pilot, screen.strategies, "projection")
        await wait_until(pilot, lambda: screen.shown_key == ("projection", 1, None))
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=(120, 40), run_before=_preview_projection)


@pytest.mark.usefixtures("no_cursor_blink")
def test_strategy_editor_snapshot(snap_compare, corpus_tavern: Tavern) -> None:
    async def _copy_roles_first(pilot: Pilot[object]) -> None:
        await open_seraphina(pilot)
        screen = await open_strategy(pilot)
        editor = await open_editor(pilot, screen, "preset-roles-first")
        await choose(pilot, editor, "after_history", "context")
        editor.query_one("#strategy-name", Input).focus()
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=(120, 40), run_before=_copy_roles_first)


async def test_highlighting_a_preset_previews_it_without_binding(corpus_tavern: Tavern, default_preset: int) -> None:
    # Issue 20 item 3: the pane's preview binds nothing; Enter on a preset binds it.
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        pid = chat.playthrough_id
        with corpus_tavern.store.unit_of_work(write=False) as uow:
            row = uow.playthroughs.get(pid)
        version = corpus_tavern.store.events.version()
        screen = await open_strategy(pilot)
        screen.preset_list.focus()
        await highlight(pilot, screen.preset_list, str(default_preset))
        await wait_until(pilot, lambda: screen.shown_key is not None and screen.shown_key[2] == default_preset)
        panel = screen.query_one("#preview")
        assert str(panel.border_subtitle).endswith(DEFAULT_PRESET)
        with corpus_tavern.store.unit_of_work(write=False) as uow:
            assert uow.playthroughs.get(pid) == row
        assert corpus_tavern.store.events.version() == version
