"""A draft's first line that a stage before admission refuses (a pre-step hook: seed 000 §1, a
stage that fails before admission admits nothing and keeps the input) opens the prepared chat
with the line queued, but the playthrough is not listed and the draft stays until the line is
admitted (seed 000 §7: a first send associates the session only after admission); Enter on the
empty composer then answers the queued line, and the chat becomes the character's."""

from __future__ import annotations

from textual.message import Message

from tavern_tui.engine.step import Proposed, Rejection
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tests.tui.conftest import ScriptedProvider, notes, wait_until, workers_idle
from tests.tui.test_draft_prepare import send_from_a_new_draft

SIZE = (120, 40)


async def test_a_refused_first_line_is_admitted_later_and_only_then_listed(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    def refuse(proposed: Proposed) -> None:
        raise Rejection("stay in character")

    corpus_tavern.steps.pre_step_hooks.append(refuse)
    skynet = corpus_tavern.library.find_character("Skynet")
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await send_from_a_new_draft(pilot, "Skynet", "Hello")
        await wait_until(pilot, lambda: any("stay in character" in n for n in notes(seen)))
        await workers_idle(pilot)
        chat = app.screen
        assert isinstance(chat, ChatScreen) and scripted.requests == []
        assert [item.text for item in chat.queue.items] == ["Hello"]
        assert corpus_tavern.playthroughs.playthroughs(skynet.id) == []
        assert [d.character_id for d in corpus_tavern.openings.drafts()] == [skynet.id]
        corpus_tavern.steps.pre_step_hooks.clear()
        scripted.enqueue("Affirmative.")
        await pilot.press("enter")  # the empty composer answers what is queued
        await wait_until(pilot, lambda: len(scripted.requests) == 1 and not chat.generating)
        await workers_idle(pilot)
        assert [p.id for p in corpus_tavern.playthroughs.playthroughs(skynet.id)] == [chat.playthrough_id]
        assert corpus_tavern.openings.drafts() == []
        assert [m.content for m in corpus_tavern.playthroughs.messages(chat.playthrough_id)][-2:] == [
            "Hello", "Affirmative."]
