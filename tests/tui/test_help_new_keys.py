"""Issue 21 item 2 for the keys added since the help was built: ctrl+g (State), the message
cursor's keys (x opens a tool line), the tool question's keys and the opening draft's keys are
in the help (generated from the bindings), the footer and the command palette."""

from __future__ import annotations

from textual.command import CommandList, CommandPalette
from textual.screen import Screen
from textual.widgets import Collapsible

from tavern_tui.engine.stream import TextDelta
from tavern_tui.service import Tavern
from tavern_tui.tools import Toolbox
from tavern_tui.tools.builtin import RollDice
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.keymap import all_bindings
from tavern_tui.tui.modals.tool_ask import ToolAskScreen
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.draft import DraftScreen
from tavern_tui.tui.screens.group_round import GROUP_BINDINGS
from tavern_tui.tui.screens.help import HelpScreen, help_rows
from tavern_tui.tui.screens.state import StateScreen
from tests.tui.conftest import open_character, screen_text, wait_until, workers_idle
from tests.tui.test_narrow import NARROW, WIDE, cut_keys, footer_keys
from tests.tui.test_tool_calls import Notes, ToolModel, calls, model, tavern  # noqa: F401 - fixtures


def _declared(owner: str) -> set[str]:
    return {b.binding.id for b in all_bindings() if b.owner == owner and not b.binding.system}


def _listed(screen: Screen[object]) -> dict[str, str]:
    """binding id → the keys the help shows for it."""
    return {row.binding_id: row.keys for rows in help_rows(screen).values() for row in rows}


async def _help_text(pilot) -> str:  # type: ignore[no-untyped-def]
    """Everything the open help screen shows, scrolled through page by page."""
    keys = pilot.app.screen.query_one("#help-keys")
    await pilot.pause()
    seen = [screen_text(pilot.app)]
    while keys.scroll_y < keys.max_scroll_y:
        keys.scroll_page_down(animate=False)
        await pilot.pause()
        seen.append(screen_text(pilot.app))
    return "\n".join(seen)


async def _palette_names(pilot, query: str) -> list[str]:  # type: ignore[no-untyped-def]
    await pilot.press("ctrl+p")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, CommandPalette) and pilot.app.screen.is_mounted)
    await pilot.press(*query)
    results = pilot.app.screen.query_one(CommandList)
    await wait_until(pilot, lambda: results.option_count > 0 and results.highlighted == 0)
    await pilot.pause(0.2)  # the palette searches in the background
    names = [str(results.get_option_at_index(i).prompt) for i in range(results.option_count)]
    await pilot.press("escape")
    return names


async def test_chat_help_footer_and_palette_have_state_and_the_cursor_keys(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(140, 36)) as pilot:
        await open_character(pilot, "Seraphina")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and bool(app.screen.transcript.boxes))
        chat = app.screen
        await workers_idle(pilot)
        # 140 columns: State is in the footer; at 120 the footer is full and it gives way first.
        await wait_until(pilot, lambda: ("^g", "State") in footer_keys(chat))
        assert cut_keys(chat) == []
        await pilot.resize_terminal(*WIDE)
        # (the footer lays out again after the resize: wait for the narrower set, not a moment of it)
        await wait_until(pilot, lambda: ("f8", "Persona") in footer_keys(chat) and cut_keys(chat) == []
                         and ("^g", "State") not in footer_keys(chat))
        listed = _listed(chat)
        group_keys = {binding.id for binding in GROUP_BINDINGS}
        # A chat with one character: every key of the chat but a group chat's.
        assert _declared("ChatScreen") - group_keys <= set(listed) and not group_keys & set(listed)
        assert (listed["chat.state"], listed["chat.cursor_expand"], listed["chat.cursor_trace"]) == ("^g", "x", "t")
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen.is_mounted)
        shown = await _help_text(pilot)
        assert "chat.state" in shown and "chat.cursor_expand" in shown and "Message" in shown
        await pilot.press("escape")
        assert any(name.startswith("State") for name in await _palette_names(pilot, "State"))
        await pilot.press("ctrl+g")  # the key itself opens the pane
        await wait_until(pilot, lambda: isinstance(app.screen, StateScreen) and app.screen.is_mounted)
        assert "state.refresh" in _listed(app.screen)
        assert any(name.startswith("Refresh") for name in await _palette_names(pilot, "Refresh"))
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat)
        await pilot.resize_terminal(*NARROW)  # 80 columns: the play keys stay, State gives way first
        await wait_until(pilot, lambda: ("f4", "Impersonate") in footer_keys(chat) and cut_keys(chat) == [])
        assert ("^g", "State") not in footer_keys(chat)


async def test_draft_keys_in_help_footer_and_palette(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        await workers_idle(pilot)
        await pilot.press("ctrl+n")  # an opening draft of the highlighted character
        await wait_until(pilot, lambda: isinstance(app.screen, DraftScreen) and app.screen.draft is not None)
        draft = app.screen
        assert _declared("DraftScreen") <= set(_listed(draft))
        await wait_until(pilot, lambda: {("f6", "Preview"), ("esc", "Back (keep draft)")} <= footer_keys(draft))
        assert cut_keys(draft) == []
        names = await _palette_names(pilot, "Discard")
        assert any(name.startswith("Discard draft") for name in names)
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen.is_mounted)
        shown = await _help_text(pilot)
        assert "draft.preview" in shown and "draft.swipe_left" in shown and "Greeting" in shown


async def test_tool_question_keys_and_x_opens_a_tool_line(tavern: Tavern, model: ToolModel,  # noqa: F811
                                                         monkeypatch) -> None:  # type: ignore[no-untyped-def]
    notes = Notes()
    monkeypatch.setattr(tavern.tools, "toolbox", lambda _pid: Toolbox([RollDice(), notes], tavern.tools.guard))
    model.scripts = [[calls(("call_b", "burn_notes", '{"which": "diary"}'))], [TextDelta("Done.")]]
    async with TavernApp(tavern).run_test(size=WIDE) as pilot:
        await open_character(pilot, "Seraphina")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChatScreen)
                         and pilot.app.screen.is_mounted and bool(pilot.app.screen.transcript.boxes))
        chat = pilot.app.screen
        await pilot.press(*"Burn my diary.")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ToolAskScreen) and pilot.app.screen.is_mounted)
        ask = pilot.app.screen
        assert {"tool_ask.once": "o", "tool_ask.always": "a"}.items() <= _listed(ask).items()
        assert _listed(ask)["tool_ask.refuse"] == "esc r"
        await pilot.press("o")  # allow once
        await wait_until(pilot, lambda: not chat.generating
                         and any(b.has_class("-tool") for b in chat.transcript.boxes))
        await workers_idle(pilot)
        assert notes.ran == [{"which": "diary"}]
        # The tool line under the message cursor: x opens its arguments and result, x again closes them.
        tool_box = next(b for b in chat.transcript.boxes if b.has_class("-tool"))
        section = tool_box.query_one(".tool-call", Collapsible)
        while chat.cursor_box() is not tool_box:
            await pilot.press("alt+up")
        assert section.collapsed
        await pilot.press("x")
        await wait_until(pilot, lambda: not section.collapsed)
        assert 'arguments: {"which": "diary"}' in str(tool_box.body.content)
        await pilot.press("x")
        await wait_until(pilot, lambda: section.collapsed)

