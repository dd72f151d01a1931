"""Enter on a line the person paused over sends the request built during the pause (the draft kept,
then `StepRunner.build_ahead` in the same worker), and what they typed after the pause is what
is sent (the build ahead of the older text is not)."""

from __future__ import annotations

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tests.tui.conftest import ScriptedProvider, wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina


async def test_a_line_sent_after_a_pause_sends_its_build_ahead(corpus_tavern: Tavern,
                                                              scripted: ScriptedProvider) -> None:
    scripted.enqueue("By the river.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        pid = chat.playthrough_id
        await pilot.press(*"Where is the mill?")
        await wait_until(pilot, lambda: corpus_tavern.steps.ahead.has(pid, "Where is the mill?"))
        preview = corpus_tavern.steps.preview(pid, "Where is the mill?")  # the request a step would send now
        expected = [(m["role"], m["content"]) for m in preview["messages"]]
        await pilot.press("enter")
        await workers_idle(pilot, timeout=30)
        await wait_until(pilot, lambda: not chat.generating)
        assert corpus_tavern.steps.ahead.taken == 1
        assert [(m["role"], m["content"]) for m in scripted.requests[-1].messages] == expected
        stored = corpus_tavern.playthroughs.messages(pid)
        assert [(m.role, m.content) for m in stored[-2:]] == [("user", "Where is the mill?"),
                                                              ("assistant", "By the river.")]
        assert chat.transcript.boxes[-1].text == "By the river."


async def test_what_is_typed_after_the_pause_is_sent(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        pid = chat.playthrough_id
        await pilot.press(*"Where is")
        await wait_until(pilot, lambda: corpus_tavern.steps.ahead.has(pid, "Where is"))
        await pilot.press(*" the mill?", "enter")
        await workers_idle(pilot, timeout=30)
        await wait_until(pilot, lambda: not chat.generating)
        assert corpus_tavern.steps.ahead.taken == 0
        assert scripted.requests[-1].messages[-1]["content"] == "Where is the mill?"
        assert corpus_tavern.playthroughs.messages(pid)[-2].content == "Where is the mill?"
