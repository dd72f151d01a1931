"""Pilot tests of the main screens at 80 columns (the classic terminal width) and at 120: the
footer keeps the important keys on screen (the others still work and the command palette lists
them), and the strategy editor's option list opens without covering the lines under it."""

from __future__ import annotations

from textual.command import CommandList, CommandPalette
from textual.screen import Screen
from textual.widgets import Footer, Select, Static
from textual.widgets._footer import FooterKey, FooterLabel

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.persona.labels import NARROW_TEXT_WIDTH
from tavern_tui.tui.screens.trace import TraceScreen
from tavern_tui.tui.screens.tree import TreeScreen
from tests.tui.conftest import GATE, ScriptedProvider, wait_until
from tests.tui.test_app import open_seraphina, send
from tests.tui.test_persona_pane import open_pane, two_nominations
from tests.tui.test_strategy import open_editor, open_strategy

NARROW = (80, 24)
WIDE = (120, 36)

CHAT_KEYS = {("^r", "Regen"), ("f3", "Continue"), ("f4", "Impersonate"), ("f5", "Tree"),
             ("^p", "palette · f1 help")}
"""The chat keys the footer must show at 80 columns (besides the Swipe group, checked apart):
the keys of play, and where help is (issue 21 item 2: F3/F4 used to vanish there)."""

CHAT_EXTRA = {("f2", "Lore"), ("f6", "Strategy"), ("f7", "Trace"), ("f8", "Persona")}
"""The chat keys that only fit a wider footer (the panes: the first left out)."""


def footer_keys(screen: Screen[object]) -> set[tuple[str, str]]:
    """(key, description) of each footer key shown whole: inside the footer, and for any key but
    the command palette's, clear of it (a key under the docked palette key is not readable)."""
    footer = screen.query_one(Footer)
    palette = [key.region for key in footer.query(FooterKey) if key.has_class("-command-palette")]
    shown = set()
    for key in footer.query(FooterKey):
        region = key.region
        if not region or not footer.region.contains_region(region):
            continue
        if not key.has_class("-command-palette") and any(region.overlaps(p) for p in palette):
            continue
        shown.add((key.key_display, key.description))
    return shown


def cut_keys(screen: Screen[object]) -> list[str]:
    """Footer keys and labels drawn only in part (past the edge, or under the palette key)."""
    footer = screen.query_one(Footer)
    palette = [key.region for key in footer.query(FooterKey) if key.has_class("-command-palette")]
    cut = []
    for widget in footer.query("FooterKey, FooterLabel"):
        region = widget.region
        if not region or widget.has_class("-command-palette"):
            continue
        if not footer.region.contains_region(region) or any(region.overlaps(p) for p in palette):
            cut.append(widget.key_display if isinstance(widget, FooterKey) else str(widget.content))
    return cut


def swipe_shown(screen: Screen[object]) -> bool:
    """The Swipe group (^← ^→ and its label) is shown whole."""
    footer = screen.query_one(Footer)
    labels = [label.region for label in footer.query(FooterLabel) if str(label.content) == "Swipe"]
    return (any(region and footer.region.contains_region(region) for region in labels)
            and {("^←", ""), ("^→", "")} <= footer_keys(screen))


async def test_chat_footer_at_80_columns_shows_the_important_keys(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        chat = await open_seraphina(pilot)
        await wait_until(pilot, lambda: CHAT_KEYS <= footer_keys(chat))
        assert swipe_shown(chat)
        assert cut_keys(chat) == []
        assert not CHAT_EXTRA & footer_keys(chat)  # left out for room; still bound (below)
        # The prompt's hint names Esc (Back is never in the footer; Stop is, while a reply streams).
        assert "Esc stops a reply or goes back" in chat.prompt.placeholder

        await pilot.press("f5")  # a key the footer left out still works
        await wait_until(pilot, lambda: isinstance(app.screen, TreeScreen) and app.screen.is_mounted)


async def test_chat_footer_at_80_columns_shows_stop_while_a_reply_streams(corpus_tavern: Tavern,
                                                                          scripted: ScriptedProvider) -> None:
    scripted.enqueue("The forest ", GATE, "is quiet.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "hi", wait=False)
        await wait_until(pilot, lambda: chat.generating and ("esc", "Stop") in footer_keys(chat))
        assert cut_keys(chat) == []
        assert swipe_shown(chat)
        scripted.gate.set()
        await app.workers.wait_for_complete()
        await wait_until(pilot, lambda: not chat.generating and CHAT_KEYS <= footer_keys(chat))
        assert ("esc", "Stop") not in footer_keys(chat) and cut_keys(chat) == []


async def test_chat_footer_at_120_columns_shows_every_key_and_follows_a_resize(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=WIDE) as pilot:
        chat = await open_seraphina(pilot)
        await wait_until(pilot, lambda: CHAT_KEYS | CHAT_EXTRA <= footer_keys(chat))
        assert swipe_shown(chat) and cut_keys(chat) == []

        await pilot.resize_terminal(*NARROW)
        # Until the footer refits (compact first, then the drops) keys may be cut for a frame.
        await wait_until(pilot, lambda: CHAT_KEYS <= footer_keys(chat) and not CHAT_EXTRA & footer_keys(chat)
                         and cut_keys(chat) == [])
        assert swipe_shown(chat)

        await pilot.resize_terminal(*WIDE)
        await wait_until(pilot, lambda: CHAT_KEYS | CHAT_EXTRA <= footer_keys(chat) and cut_keys(chat) == [])


async def test_the_command_palette_runs_a_chat_key_the_footer_left_out(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        await open_seraphina(pilot)
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette) and app.screen.is_mounted)
        await pilot.press(*"Tree")
        results = app.screen.query_one(CommandList)
        # The palette searches in the background: wait until "Tree" (F5) leads the results.
        await wait_until(pilot, lambda: results.option_count > 0 and results.highlighted == 0
                         and str(results.get_option_at_index(0).prompt).startswith("Tree"))
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TreeScreen) and app.screen.is_mounted)


async def test_persona_footer_at_80_columns_keeps_affirm_and_decline(corpus_tavern: Tavern) -> None:
    await two_nominations(corpus_tavern)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        await open_seraphina(pilot)
        screen = await open_pane(pilot, "f8")
        want = {("esc", "Back"), ("a", "Add"), ("e", "Edit"), ("x", "Remove"), ("y", "Affirm"), ("n", "Decline"),
                ("^p", "palette · f1 help")}
        await wait_until(pilot, lambda: want <= footer_keys(screen))
        assert cut_keys(screen) == []


async def test_persona_tables_at_80_columns_keep_every_column_on_screen(corpus_tavern: Tavern) -> None:
    await two_nominations(corpus_tavern)
    corpus_tavern.persona.edit_persona(0, add="Ann carries a lantern everywhere and never lets it go out at night.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        await open_seraphina(pilot)
        screen = await open_pane(pilot, "f8")
        await wait_until(pilot, lambda: screen.entries.row_count > 0 and screen.nomination_table.row_count > 0)
        await pilot.pause()
        for table in (screen.entries, screen.nomination_table):  # the last column (Marks, Sensitivity) not cut off
            assert table.virtual_size.width <= table.scrollable_content_region.width
        # The entry's text takes the room the other columns leave (a trial: cut at 28 characters
        # beside an empty Marks column), not a fixed narrow measure.
        shown = str(screen.entries.get_row_at(0)[1])
        assert len(shown) > NARROW_TEXT_WIDTH + 5 and shown.endswith("…")
        assert screen.entries.virtual_size.width >= screen.entries.scrollable_content_region.width - 2


async def test_strategy_pane_footer_at_80_columns(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        await open_seraphina(pilot)
        screen = await open_strategy(pilot)
        want = {("⏎", "Apply strategy"), ("esc", "Back"), ("c", "Copy & edit"), ("^p", "palette · f1 help")}
        await wait_until(pilot, lambda: want <= footer_keys(screen))
        assert cut_keys(screen) == []


async def test_an_open_option_list_in_the_strategy_editor_covers_no_line(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        await open_seraphina(pilot)
        editor = await open_editor(pilot, await open_strategy(pilot), "preset-roles-first")
        examples = editor.query_one("#option-examples", Select)
        examples.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: examples.expanded)
        await pilot.pause()
        overlay = examples.query_one("SelectOverlay").region
        box = editor.query_one("#strategy-editor-box").region
        assert overlay.height >= 2 and box.contains_region(overlay)
        # Everything under it (the next option, "Saves …", the buttons and keys line) moved below it.
        below = [editor.query_one("#option-after_history", Select), editor.query_one("#strategy-saves-as", Static),
                 editor.query_one("#strategy-editor-keys", Static)]
        for widget in below:
            assert widget.region and widget.region.y >= overlay.bottom, widget
            assert box.contains_region(widget.region), widget

        await pilot.press("down", "enter")  # choose "omit"; the list closes and the lines move back up
        await wait_until(pilot, lambda: not examples.expanded and examples.value == "omit")
        await pilot.pause()
        assert editor.query_one("#option-after_history", Select).region.y == examples.region.bottom + 1


async def test_world_book_and_tree_footers_at_80_columns(corpus_tavern: Tavern) -> None:
    from tavern_tui.tui.screens.lore import LoreScreen

    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        chat = await open_seraphina(pilot)
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, LoreScreen) and app.screen.is_mounted)
        lore = app.screen
        await wait_until(pilot, lambda: {("t", "Test"), ("i", "Import"), ("esc", "Back")} <= footer_keys(lore))
        assert cut_keys(lore) == []
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat)
        await pilot.press("f5")
        await wait_until(pilot, lambda: isinstance(app.screen, TreeScreen) and app.screen.is_mounted)
        tree = app.screen
        await wait_until(pilot, lambda: {("⏎", "Jump here"), ("r", "Roll back here"), ("b", "New playthrough"),
                                         ("esc", "Back")} <= footer_keys(tree))
        assert cut_keys(tree) == []


async def test_typing_dims_the_swipe_keys_in_place_without_rebuilding_the_footer(corpus_tavern: Tavern) -> None:
    # With text in the prompt, ctrl+←/→ move by word (check_action answers None: shown dimmed).
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=WIDE) as pilot:
        chat = await open_seraphina(pilot)
        footer = chat.query_one(Footer)
        await wait_until(pilot, lambda: CHAT_KEYS | CHAT_EXTRA <= footer_keys(chat))

        def swipe_keys() -> list[FooterKey]:
            return [key for key in footer.query(FooterKey) if key.action.startswith("swipe")]

        before = {id(key) for key in footer.query(FooterKey)}
        assert [key.has_class("-disabled") for key in swipe_keys()] == [False, False]
        await pilot.press("x")
        await wait_until(pilot, lambda: all(key.has_class("-disabled") for key in swipe_keys()))
        assert {id(key) for key in footer.query(FooterKey)} == before  # the same keys, dimmed in place
        await pilot.press("backspace")
        await wait_until(pilot, lambda: not any(key.has_class("-disabled") for key in swipe_keys()))
        assert {id(key) for key in footer.query(FooterKey)} == before and swipe_shown(chat)


async def test_stop_comes_and_goes_with_a_reply_without_rebuilding_the_footer(corpus_tavern: Tavern,
                                                                              scripted: ScriptedProvider) -> None:
    # Each rebuild mounted every key and laid the whole screen out again, twice a turn.
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=WIDE) as pilot:
        chat = await open_seraphina(pilot)
        footer = chat.query_one(Footer)
        await send(pilot, chat, "hi")  # the first reply builds the Stop key once
        await wait_until(pilot, lambda: not chat.generating and CHAT_KEYS | CHAT_EXTRA <= footer_keys(chat))
        built = {id(key) for key in footer.query(FooterKey)}
        scripted.enqueue("The forest ", GATE, "is quiet.")
        await send(pilot, chat, "and now?", wait=False)
        await wait_until(pilot, lambda: chat.generating and ("esc", "Stop") in footer_keys(chat))
        assert {id(key) for key in footer.query(FooterKey)} == built
        scripted.gate.set()
        await app.workers.wait_for_complete()
        await wait_until(pilot, lambda: not chat.generating and ("esc", "Stop") not in footer_keys(chat))
        assert CHAT_KEYS | CHAT_EXTRA <= footer_keys(chat) and cut_keys(chat) == []
        assert {id(key) for key in footer.query(FooterKey)} == built


async def test_trace_footer_at_80_columns_cuts_no_key(corpus_tavern: Tavern) -> None:
    # A trial at 80x24: the trace's footer ran past the palette key ("^q Qu▏").
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "Hello.")
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen.loaded)
        screen = app.screen
        want = {("esc", "Back"), ("v", "Verify"), ("^p", "palette · f1 help")}
        await wait_until(pilot, lambda: want <= footer_keys(screen))
        assert cut_keys(screen) == []
