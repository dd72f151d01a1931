"""The branch tree (F5) after a compaction: originals keep their text, marked summarised, and the
summary is one node naming its range; snapshots at 120×40 and 80×24 (`--snapshot-update` to regenerate)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from textual.pilot import Pilot

from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.tree import TreeScreen, variant_marks
from tests.tui.conftest import ScriptedProvider, started_on, wait_until, workers_idle

STARTED = datetime(2026, 12, 3, 18, 30, tzinfo=UTC)
RECAP = "Ann and Seraphina talked about the lantern by the river."


def played(tavern: Tavern, history: int) -> int:
    """A Seraphina playthrough (played as Ann) with `history` lines after the greeting."""
    seraphina = tavern.library.find_character("Seraphina")
    pid = tavern.playthroughs.new_playthrough(seraphina.id, user_name="Ann").id
    started_on(tavern, pid, STARTED)
    session = tavern.playthroughs.playthrough(pid).session_id
    tavern.store.events.append(session, [
        NewEvent(EventKind.USER_MESSAGE if n % 2 == 0 else EventKind.ASSISTANT_MESSAGE,
                 "user" if n % 2 == 0 else "assistant", {"content": f"Line {n:03d}: the lantern again."})
        for n in range(history)])
    return pid


async def compacted(tavern: Tavern, scripted: ScriptedProvider, history: int = 15) -> int:
    pid = played(tavern, history)
    scripted.enqueue(RECAP)
    done = await tavern.compaction.compact(pid, keep=4)
    assert done.covers == history + 1 - 4
    return pid


async def test_f5_after_a_compaction_shows_the_originals_and_one_summary_node(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    pid = await compacted(corpus_tavern, scripted)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(120, 40)) as pilot:
        chat = ChatScreen(corpus_tavern, pid)
        await pilot.app.push_screen(chat)
        await wait_until(pilot, lambda: bool(chat.transcript.boxes))
        await pilot.press("f5")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, TreeScreen) and pilot.app.screen.loaded)
        tree = pilot.app.screen
        assert isinstance(tree, TreeScreen)
        nodes = [n.data for n in tree.tree.nodes.values() if n.data is not None]
        summaries = [v for v in nodes if v.summary_of is not None]
        assert len(summaries) == 1 and summaries[0].preview == RECAP
        assert variant_marks(summaries[0]) == ["summary of messages 1–12"]
        line_005 = next(v for v in nodes if v.preview.startswith("Line 005"))
        assert variant_marks(line_005) == ["summarised"] and RECAP not in line_005.preview
        assert sum(v.preview == RECAP for v in nodes) == 1
        # The greeting and the 15 lines, all on the path (the summary is not a message of its own).
        assert "16 messages shown · 0 other variants" in str(tree.query_one("#tree-title").content)
        # Editing a summarised original is refused with a reason (the summary node is the one to edit).
        tree.tree.move_cursor(tree.tree.nodes[line_005.ref])
        await pilot.pause()
        await pilot.press("e")
        await wait_until(pilot, lambda: any("summarised" in n.message for n in pilot.app._notifications))
        assert isinstance(pilot.app.screen, TreeScreen)
        # Enter on the summary node jumps to the last message it covers (no error).
        tree.tree.move_cursor(tree.tree.nodes[summaries[0].ref])
        await pilot.pause()
        await pilot.press("enter")
        await wait_until(pilot, lambda: pilot.app.screen is chat)
        await workers_idle(pilot)


@pytest.mark.usefixtures("no_cursor_blink")
@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_tree_after_compaction_snapshot(snap_compare, corpus_tavern: Tavern, scripted: ScriptedProvider,
                                        size: tuple[int, int]) -> None:
    pid = played(corpus_tavern, 15)
    scripted.enqueue(RECAP)

    async def tree(pilot: Pilot[object]) -> None:
        await corpus_tavern.compaction.compact(pid, keep=4)
        await workers_idle(pilot)
        await pilot.app.push_screen(TreeScreen(corpus_tavern, pid))
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, TreeScreen) and pilot.app.screen.loaded)
        await workers_idle(pilot)
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=size, run_before=tree)
