"""An open, idle chat shows what another window or command writes to it (a `tavern chat --say`,
a second app), without a key pressed: it polls the playthrough's revision and re-reads on a change."""

from __future__ import annotations

from collections.abc import Callable

from textual.widgets import Static

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tests.conftest import ScriptedModel
from tests.tui.conftest import GATE, ScriptedProvider, wait_until
from tests.tui.test_app import SIZE, open_seraphina


def shown(chat: object) -> list[str]:
    return [b.text for b in chat.transcript.boxes]  # type: ignore[attr-defined]


async def test_a_reply_written_by_another_process_shows_in_the_open_chat(
        make_tavern: Callable[..., Tavern], scripted: ScriptedProvider) -> None:
    here = make_tavern(scripted)
    other_model = ScriptedModel(delay=0)
    elsewhere = make_tavern(other_model, import_corpus=False)  # the same database, as a second process
    app = TavernApp(here)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        greeting = shown(chat)
        other_model.enqueue("*She looks up from the fire.* You came back.")
        [_ async for _ in elsewhere.steps.send(chat.playthrough_id, "Hello from the other window")]
        await wait_until(pilot, lambda: shown(chat) == [*greeting, "Hello from the other window",
                                                        "*She looks up from the fire.* You came back."])
        # And a line queued elsewhere shows in the inbox strip.
        elsewhere.inbox.add(chat.playthrough_id, "queued over there")
        await wait_until(pilot, lambda: "queued over there" in str(chat.queue.content))
    assert scripted.requests == []  # this window sent nothing


async def test_a_line_queued_elsewhere_while_a_reply_streams_here_shows_in_the_strip(
        make_tavern: Callable[..., Tavern], scripted: ScriptedProvider) -> None:
    here = make_tavern(scripted)
    elsewhere = make_tavern(ScriptedModel(delay=0), import_corpus=False)  # a second process
    app = TavernApp(here)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        scripted.enqueue("*She stirs the fire*", GATE, " and waits.")
        chat.prompt.value = "Tell me about the forest."
        await pilot.press("enter")
        await wait_until(pilot, lambda: chat.reply_stream.box is not None
                         and chat.reply_stream.box.text == "*She stirs the fire*")
        elsewhere.inbox.add(chat.playthrough_id, "queued from the command line")
        await wait_until(pilot, lambda: "queued from the command line" in str(chat.queue.content))
        assert chat.generating  # shown while the reply is still being written
        scripted.gate.set()
        await wait_until(pilot, lambda: not chat.generating)


async def test_a_persona_renamed_elsewhere_shows_in_the_open_chats_title_and_next_line(
        make_tavern: Callable[..., Tavern], scripted: ScriptedProvider) -> None:
    here = make_tavern(scripted)
    elsewhere = make_tavern(ScriptedModel(delay=0), import_corpus=False)  # `tavern persona rename` in another shell
    app = TavernApp(here)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        title = chat.query_one("#chat-title", Static)
        elsewhere.persona.rename_persona(None, "Wanderer")
        await wait_until(pilot, lambda: "playing as Wanderer" in str(title.render()))
        assert chat.playthrough.user_name == "Wanderer"  # the label the next line of yours gets


async def test_a_persona_renamed_elsewhere_while_a_reply_streams_shows_in_the_title_at_once(
        make_tavern: Callable[..., Tavern], scripted: ScriptedProvider) -> None:
    here = make_tavern(scripted)
    elsewhere = make_tavern(ScriptedModel(delay=0), import_corpus=False)
    app = TavernApp(here)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        title = chat.query_one("#chat-title", Static)
        scripted.enqueue("*She stirs the fire*", GATE, " and waits.")
        chat.prompt.value = "Tell me about the forest."
        await pilot.press("enter")
        await wait_until(pilot, lambda: chat.reply_stream.box is not None
                         and chat.reply_stream.box.text == "*She stirs the fire*")
        elsewhere.persona.rename_persona(None, "Wanderer")
        await wait_until(pilot, lambda: "playing as Wanderer" in str(title.render()))
        assert chat.generating  # a long reply does not hold the title back
        scripted.gate.set()
        await wait_until(pilot, lambda: not chat.generating)
