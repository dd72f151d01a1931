"""Pilot tests at 80x24 (the classic terminal): the entry editor, the persona editor and its
remove/history modals stay inside the screen, with every field and Save reachable by Tab; the
branch tree keeps the "deleted" / "cut off" marks on screen; `d` in the tree asks first."""

from __future__ import annotations

from textual.app import App
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Button, Input

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.confirm import ConfirmScreen
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.persona.editor import PersonaEditor
from tavern_tui.tui.screens.persona.history import PersonaHistoryScreen
from tavern_tui.tui.screens.tree import VariantTree
from tests.tui.conftest import GATE, ScriptedProvider, wait_until, workers_idle
from tests.tui.test_app import open_seraphina, send
from tests.tui.test_lore import open_editor, open_lore_from_home, staging  # noqa: F401 (a fixture)
from tests.tui.test_persona_pane import open_pane
from tests.tui.test_tree import open_tree

NARROW = (80, 24)
WIDE = (120, 36)

ENTRY_FIELDS = ("keysecondary", "content", "position", "order", "probability", "constant", "disable", "save",
                "cancel")
"""The entry editor's focusable widgets after Keys (focused on opening), in Tab order."""

LONG_QUESTION = ("Where exactly am I, who are you, and how long was I lying in the forest before you found me "
                 "and carried me here?")
LONG_REPLY = ("*Seraphina smooths the blanket and sits beside you.* You are in my glade, deep in Eldoria; I found "
              "you at dusk.")


def screen_region(app: App[object]) -> Region:
    return Region(0, 0, *app.size)


def on_screen(app: App[object], widget: Widget) -> bool:
    """The widget is drawn whole inside the terminal (not past an edge)."""
    return bool(widget.region) and screen_region(app).contains_region(widget.region)


def shown_whole(app: App[object], widget: Widget) -> bool:
    """The widget is drawn whole inside the terminal and inside every container it sits in (a
    field scrolled out of its form is not)."""
    if not on_screen(app, widget):
        return False
    parent = widget.parent
    while isinstance(parent, Widget) and parent is not app.screen:
        if not parent.region.contains_region(widget.region):
            return False
        parent = parent.parent
    return True


async def tab_to(pilot: Pilot[object], widget: Widget, limit: int = 30) -> None:
    """Press Tab until `widget` has the focus, then let the scroll to it settle."""
    for _ in range(limit):
        if pilot.app.focused is widget:
            break
        await pilot.press("tab")
    assert pilot.app.focused is widget, f"Tab never reached #{widget.id}"
    widget.scroll_visible(animate=False)
    await pilot.pause()


async def test_entry_editor_fits_80x24_and_tab_reaches_every_field_and_save(corpus_tavern: Tavern,
                                                                            staging: int) -> None:  # noqa: F811
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        lore = await open_lore_from_home(pilot)
        editor = await open_editor(pilot, lore, 0)
        await pilot.pause()
        box = editor.query_one("#editor-box")
        assert on_screen(app, box), f"the editor {box.region} runs past the 80x24 screen"
        assert app.focused is editor.query_one("#keys", Input)
        for field in ENTRY_FIELDS:
            widget = editor.query_one(f"#{field}", Widget)
            await tab_to(pilot, widget)
            assert shown_whole(app, widget), f"#{field} at {widget.region} is not inside the editor on screen"
            if field == "order":
                widget.value = "77"  # type: ignore[attr-defined]
        save = editor.query_one("#save", Button)
        await tab_to(pilot, save)
        assert shown_whole(app, save) and on_screen(app, box)
        await pilot.press("enter")  # Save pressed from the keyboard, not Ctrl+S
        await wait_until(pilot, lambda: app.screen is lore)
        assert corpus_tavern.lore.world_book(staging).entries[0].order == 77


async def test_entry_editor_at_120x36_keeps_its_100_columns_and_needs_no_scroll(corpus_tavern: Tavern,
                                                                                 staging: int) -> None:  # noqa: F811
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=WIDE) as pilot:
        lore = await open_lore_from_home(pilot)
        editor = await open_editor(pilot, lore, 0)
        await pilot.pause()
        box = editor.query_one("#editor-box")
        assert box.region.width == 100 and on_screen(app, box)
        assert editor.query_one("#editor-form").max_scroll_y == 0  # the whole form shows at once
        for field in ("keys", *ENTRY_FIELDS):
            assert shown_whole(app, editor.query_one(f"#{field}", Widget)), field


async def test_persona_modals_fit_80_columns(corpus_tavern: Tavern) -> None:
    corpus_tavern.persona.edit_persona(0, add="I am a wandering herbalist who keeps a notebook of every plant I "
                                              "find in the forests of Eldoria, and I never travel without it.",
                                       where="test")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        pane = await open_pane(pilot, "f8")
        await wait_until(pilot, lambda: pane.selected_entry is not None)

        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, PersonaEditor) and app.screen.is_mounted)
        editor = app.screen
        await pilot.pause()
        box = editor.query_one("#persona-editor-box")
        assert on_screen(app, box), f"the persona editor {box.region} runs past the 80x24 screen"
        for field in ("persona-sensitivity", "save", "cancel"):
            widget = editor.query_one(f"#{field}", Widget)
            await tab_to(pilot, widget)
            assert shown_whole(app, widget), f"#{field} at {widget.region} is not inside the editor on screen"
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is pane)

        await pilot.press("x")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and bool(app.screen.query("#no")))
        confirm = app.screen
        await pilot.pause()
        box = confirm.query_one("#confirm-box")
        assert on_screen(app, box), f"the remove confirmation {box.region} runs past the 80x24 screen"
        for button in ("yes", "no", "confirm-keys"):
            assert shown_whole(app, confirm.query_one(f"#{button}", Widget)), button
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is pane)
        assert len(corpus_tavern.persona.persona().entries) == 1

        await pilot.press("h")
        await wait_until(pilot, lambda: isinstance(app.screen, PersonaHistoryScreen) and app.screen.loaded)
        await pilot.pause()
        assert on_screen(app, app.screen.query_one("#history-box"))


def visible_line(tree: VariantTree, ref: tuple[int, int]) -> str:
    """The tree line of `ref`'s node as drawn (cropped to the tree's width and scroll)."""
    row = tree.nodes[ref].line - tree.scroll_offset.y
    return tree.render_lines(Region(0, row, tree.size.width, 1))[0].text


async def chat_with_a_long_question_and_a_stopped_reply(pilot: Pilot[object],
                                                       scripted: ScriptedProvider) -> ChatScreen:
    """At 80 columns: the person's long question, a long reply, a short one, then a reply
    stopped (cut off) after 70 characters; the chat screen."""
    scripted.enqueue(LONG_REPLY)
    scripted.enqueue(LONG_REPLY[:70], GATE, " never reached.")
    chat = await open_seraphina(pilot)
    await send(pilot, chat, LONG_QUESTION)
    await send(pilot, chat, "And the wards?", wait=False)
    await wait_until(pilot, lambda: chat.reply_stream.box is not None and chat.reply_stream.box.text == LONG_REPLY[:70])
    await pilot.press("escape")  # stopped: the reply is kept, cut off
    await wait_until(pilot, lambda: not chat.generating)
    await workers_idle(pilot)  # (a cancelled worker makes `wait_for_complete` raise)
    return chat


async def test_tree_marks_show_at_80_columns(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        chat = await chat_with_a_long_question_and_a_stopped_reply(pilot, scripted)
        pid = chat.playthrough_id
        question = corpus_tavern.playthroughs.messages(pid)[1]
        assert question.content == LONG_QUESTION
        corpus_tavern.timeline.delete_message(pid, question.ref)

        tree_screen = await open_tree(pilot)
        tree = tree_screen.tree
        await pilot.pause()
        cut = tree_screen.current
        assert cut.partial
        line = visible_line(tree, cut.ref)
        assert line.rstrip().endswith("· cut off") and "Seraphina smooths" in line, line
        deleted = tree.nodes[question.ref].data
        assert deleted.deleted
        line = visible_line(tree, question.ref)
        assert line.rstrip().endswith("· deleted") and "Where exactly" in line, line
        assert tree.virtual_size.width <= tree.size.width  # no line runs past the right edge

        await pilot.resize_terminal(*WIDE)  # wider: the previews grow back, whole where they fit
        await wait_until(pilot, lambda: LONG_QUESTION[:60] in visible_line(tree, question.ref))
        assert visible_line(tree, question.ref).rstrip().endswith("· deleted")


async def test_d_in_the_tree_asks_before_deleting(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        chat = await chat_with_a_long_question_and_a_stopped_reply(pilot, scripted)
        pid = chat.playthrough_id
        before = [m.content for m in corpus_tavern.playthroughs.messages(pid)]
        tree_screen = await open_tree(pilot)
        await pilot.press("up", "up", "up")
        question = tree_screen.current
        assert question.preview.startswith("Where exactly am I") and not question.deleted

        for cancel in ("escape", "n"):
            await pilot.press("d")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and bool(app.screen.query("#no")))
            assert LONG_QUESTION[:40] in str(app.screen.query_one("#confirm-question").content)
            assert on_screen(app, app.screen.query_one("#confirm-box"))
            await pilot.press(cancel)
            await wait_until(pilot, lambda: app.screen is tree_screen)
            await pilot.pause()
            assert [m.content for m in corpus_tavern.playthroughs.messages(pid)] == before  # nothing hidden
            assert tree_screen.current == question and not tree_screen.current.deleted

        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and bool(app.screen.query("#no")))
        await pilot.press("y")
        await wait_until(pilot, lambda: app.screen is tree_screen and tree_screen.current is not None
                         and tree_screen.current.deleted)
        assert tree_screen.current.ref == question.ref
        assert ([m.content for m in corpus_tavern.playthroughs.messages(pid)]
                == [c for c in before if c != LONG_QUESTION])
