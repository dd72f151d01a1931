"""A single line break in a message shows as a break, as SillyTavern (showdown with
`simpleLineBreaks`) shows it: in the person's sent message, in a reply while and after it
streams, and in stored messages read back. Code fences and lists keep their shape."""

from __future__ import annotations

import html
import re

import pytest
from textual.pilot import Pilot

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import TOKEN_DELAY, ChatScreen
from tavern_tui.tui.widgets.message_box import MessageBody
from tests.tui.conftest import GATE, ScriptedProvider, screen_text, wait_until, workers_idle
from tests.tui.test_app import open_seraphina

ACTION = "*Seraphina sets the cup down.*"
DIALOGUE = '"Drink slowly. The tea is strong."'
CODE = "```\nx = 1\n\ny = 2\n```"
LIST = "- moss\n- honey\n- rain water"


def rows(app: object) -> list[str]:
    """The terminal's rows as text, without the padding either side; a row with no text is ""
    (`screen_text` leaves such rows out, and the blank line inside a fence is one)."""
    found: dict[int, list[str]] = {}
    svg = app.export_screenshot()  # type: ignore[attr-defined]
    for line, text in re.findall(r'<text [^>]*clip-path="url\(#terminal-\d+-line-(\d+)\)">([^<]*)</text>', svg):
        found.setdefault(int(line), []).append(html.unescape(text).replace("\xa0", " "))
    return ["".join(found.get(n, [])).strip() for n in range(max(found, default=-1) + 1)]


async def _wait_for_reply(pilot: Pilot[object], chat: ChatScreen) -> None:
    await pilot.app.workers.wait_for_complete()
    await wait_until(pilot, lambda: not chat.generating)
    await workers_idle(pilot)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_sent_and_streamed_lines_stay_apart(corpus_tavern: Tavern, scripted: ScriptedProvider,
                                                  size: tuple[int, int]) -> None:
    scripted.enqueue(ACTION, "\n", DIALOGUE[:10], DIALOGUE[10:])
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=size) as pilot:
        chat = await open_seraphina(pilot)
        await pilot.press(*"first line", "ctrl+j", *"second line", "enter")
        await _wait_for_reply(pilot, chat)
        user_box, reply_box = chat.transcript.boxes[-2:]
        assert user_box.text == "first line\nsecond line"
        assert reply_box.text == f"{ACTION}\n{DIALOGUE}"
        await pilot.pause()
        shown = rows(app)
        assert "first line" in shown and "second line" in shown
        assert "first line second line" not in screen_text(app)
        # Markdown's emphasis is drawn as a style: the asterisks are gone, the rows stay apart.
        assert "Seraphina sets the cup down." in shown and DIALOGUE in shown


async def test_a_reply_shows_its_lines_while_it_streams(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue(ACTION, "\n", DIALOGUE, "\n", GATE, "Done.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(120, 40)) as pilot:
        chat = await open_seraphina(pilot)
        await pilot.press(*"hello", "enter")
        await wait_until(pilot, lambda: chat.generating and len(chat.transcript.boxes) == 3
                         and DIALOGUE in chat.transcript.boxes[-1].text)
        # The stream writes what arrived at its next flush (at most 1/30 s later), gated reply or not.
        await wait_until(pilot, lambda: DIALOGUE in rows(app), timeout=30)
        assert "Seraphina sets the cup down." in rows(app)
        scripted.gate.set()
        await _wait_for_reply(pilot, chat)
        await pilot.pause()
        shown = rows(app)
        assert DIALOGUE in shown and "Done." in shown


async def test_stored_messages_keep_breaks_fences_and_lists(corpus_tavern: Tavern,
                                                           scripted: ScriptedProvider) -> None:
    reply = f"{ACTION}\n{DIALOGUE}\n\n{CODE}\n\n{LIST}"
    scripted.enqueue(reply)
    seraphina = corpus_tavern.library.find_character("Seraphina")
    pid = corpus_tavern.playthroughs.new_playthrough(seraphina.id).id
    async for _ in corpus_tavern.steps.send(pid, "one\ntwo"):
        pass
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(80, 40)) as pilot:
        chat = await open_seraphina(pilot)
        await workers_idle(pilot)
        user_box, reply_box = chat.transcript.boxes[-2:]
        assert isinstance(reply_box.body, MessageBody) and reply_box.text == reply
        await pilot.pause()
        shown = rows(app)
        assert "one" in shown and "two" in shown
        assert "Seraphina sets the cup down." in shown and DIALOGUE in shown
        # The fence keeps its lines, its blank line between them, with nothing added to them.
        x, y = shown.index("x = 1"), shown.index("y = 2")
        assert y == x + 2 and shown[x + 1] == ""
        assert [row for row in shown if row.startswith("•")] == ["• moss", "• honey", "• rain water"]


async def test_streamed_fence_and_list_keep_their_shape(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue("Here:\n", CODE[:8], CODE[8:], "\n\n", LIST, GATE, "")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(120, 40)) as pilot:
        chat = await open_seraphina(pilot)
        await pilot.press(*"recipe?", "enter")
        # While it streams, the fence and the list already have their shape.
        await wait_until(pilot, lambda: chat.reply_stream.box is not None and chat.reply_stream.box.text.endswith(LIST)
                         and "• rain water" in rows(app))
        shown = rows(app)
        x, y = shown.index("x = 1"), shown.index("y = 2")
        assert y == x + 2 and shown[x + 1] == ""
        assert [row for row in shown if row.startswith("•")] == ["• moss", "• honey", "• rain water"]
        scripted.gate.set()
        await _wait_for_reply(pilot, chat)
        # Settled, the stored text is one body, as a stored message's (no widget per block).
        reply = chat.transcript.boxes[-1]
        assert len(reply.query(MessageBody)) == 1
        await pilot.pause()
        shown = rows(app)
        assert "Here:" in shown
        x, y = shown.index("x = 1"), shown.index("y = 2")
        assert y == x + 2 and shown[x + 1] == ""
        assert [row for row in shown if row.startswith("•")] == ["• moss", "• honey", "• rain water"]


@pytest.mark.usefixtures("no_cursor_blink")
@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_multi_line_reply_snapshot(snap_compare, corpus_tavern: Tavern, scripted: ScriptedProvider,
                                   size: tuple[int, int]) -> None:
    scripted.enqueue(ACTION, "\n", DIALOGUE, "\n", "*She smiles.*")

    async def chat(pilot: Pilot[object]) -> None:
        screen = await open_seraphina(pilot)
        await pilot.press(*"Where", "ctrl+j", *"am I?", "enter")
        await wait_until(pilot, lambda: not screen.generating and len(screen.transcript.boxes) >= 3)
        await pilot.pause(TOKEN_DELAY + 0.2)
        await workers_idle(pilot)
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=size, run_before=chat)
