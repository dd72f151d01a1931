"""Every message is followed by one blank row, however its body is drawn: stored bodies on first
open, a line sent and a reply streamed in this run, and after an edit in the middle or a jump to
another branch (which redraw some boxes and keep others)."""

from __future__ import annotations

import pytest
from textual.pilot import Pilot

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.edit_message import EditMessageScreen
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.tree import TreeScreen
from tests.tui.conftest import ScriptedProvider, open_character, wait_until, workers_idle

SIZE = (120, 60)

pytestmark = pytest.mark.usefixtures("no_cursor_blink")


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


def gaps(app: TavernApp, chat: ChatScreen) -> list[int]:
    """Blank rows on the screen between the last drawn row of each message and the next one's header."""
    rows = [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]
    boxes = [box.region for box in chat.transcript.boxes]
    found = []
    for region, following in zip(boxes, boxes[1:]):
        last = max(y for y in range(region.y, region.bottom) if rows[y].strip())
        found.append(following.y - last - 1)
    return found


async def settle(pilot: Pilot[object]) -> None:
    await workers_idle(pilot)
    await pilot.pause()


async def test_messages_are_one_blank_row_apart_after_sending_editing_and_a_branch_jump(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    pid = corpus_tavern.playthroughs.new_playthrough(corpus_tavern.library.find_character("Skynet").id).id
    for n in range(2):
        scripted.enqueue(f"*It hums.* Reply {n} says.")
        await drain(corpus_tavern.steps.send(pid, f"What happened {n}?"))
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await open_character(pilot, "Skynet")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and len(app.screen.transcript.boxes) == 5)
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await settle(pilot)
        assert gaps(app, chat) == [1] * 4  # the greeting too

        # A line sent and a reply streamed in this run are drawn as Markdown while shown.
        scripted.enqueue("First paragraph.\n\nSecond paragraph.")
        await pilot.press(*"And now?", "enter")
        await wait_until(pilot, lambda: len(chat.transcript.boxes) == 7 and not chat.generating)
        await settle(pilot)
        assert gaps(app, chat) == [1] * 6

        # An edit in the middle (the second user line) redraws the boxes from it.
        await pilot.press("alt+up", "alt+up", "alt+up", "alt+up")
        await wait_until(pilot, lambda: chat.cursor_message is not None
                         and chat.cursor_message.content == "What happened 1?")
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, EditMessageScreen) and app.screen.is_mounted)
        app.screen.query_one("#edit-text").text = "What happened, really?"  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen is chat and "What happened, really?"
                         in [b.text for b in chat.transcript.boxes])
        await settle(pilot)
        assert gaps(app, chat) == [1] * 6

        # Regenerate, then jump back to the first reply's branch in the tree.
        scripted.enqueue("Another take.")
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: not chat.generating and chat.transcript.boxes[-1].text == "Another take.")
        await settle(pilot)
        assert gaps(app, chat) == [1] * 6
        await pilot.press("f5")
        await wait_until(pilot, lambda: isinstance(app.screen, TreeScreen) and app.screen.current is not None)
        await pilot.press("left")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen is chat and chat.transcript.boxes[-1].text != "Another take.")
        await settle(pilot)
        assert [b.text for b in chat.transcript.boxes][-2:] == ["And now?", "First paragraph.\n\nSecond paragraph."]
        assert gaps(app, chat) == [1] * 6
