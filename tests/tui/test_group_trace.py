"""Each member step as a normal step with its own trace, as the panes show it: the trace pane
says which member each request of a round was written for, and the trace and tree headers name
the group, not its first member."""

from __future__ import annotations

from textual.widgets import Static

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tests.tui.conftest import ScriptedProvider, wait_until, workers_idle
from tests.tui.test_group_chat import SIZE, _glade, open_group, say
from tests.tui.test_trace_pane import listed, open_trace
from tests.tui.test_tree import open_tree


async def test_the_trace_pane_names_each_requests_member_and_the_group(corpus_tavern: Tavern,
                                                                       scripted: ScriptedProvider) -> None:
    pid = _glade(corpus_tavern)
    scripted.enqueue("Welcome.")
    scripted.enqueue("Insect.")
    async with TavernApp(corpus_tavern).run_test(size=SIZE) as pilot:
        chat = await open_group(pilot)
        await say(pilot, chat, "Hello.", 2)
        trace = await open_trace(pilot)
        await wait_until(pilot, lambda: trace.loaded)
        lines = listed(trace)  # newest first: Shodan spoke second
        assert ["for Shodan" in lines[0], "for Seraphina" in lines[1]] == [True, True]
        assert "for Seraphina" not in lines[0]
        title = str(trace.query_one("#trace-title", Static).content)
        assert title.startswith(f"Requests · Glade #{pid} · 2 requests sent")
        assert trace.detail.border_subtitle is not None and trace.detail.border_subtitle.endswith("· for Shodan")
        await pilot.press("escape")
        await wait_until(pilot, lambda: pilot.app.screen is chat)
        await workers_idle(pilot)
        tree = await open_tree(pilot)
        await wait_until(pilot, lambda: tree.loaded)
        assert str(tree.query_one("#tree-title", Static).content).startswith(f"Branches · Glade #{pid} · ")
