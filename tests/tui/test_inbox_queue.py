"""Pilot tests of the inbox strip as a widget (`QueueEditor`): it keeps the edit and the draft held
aside, posts what is to be stored (an edit, a cancel, the last sent line to edit) and the chat
screen turns those into inbox calls."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from textual import on
from textual.app import App, ComposeResult
from textual.message import Message

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import sending
from tavern_tui.tui.widgets.composer import Composer
from tavern_tui.tui.widgets.inbox_queue import QueueEditor
from tavern_tui.views import InboxItemView
from tests.tui.conftest import ScriptedProvider, noted, wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina
from tests.tui.test_composer import start_gated_reply, type_and_enter

FIRST = InboxItemView(id="q1", position=1, target="next-turn", text="first queued", queued_at=datetime.now(UTC))
SECOND = InboxItemView(id="q2", position=2, target="next-turn", text="second queued", queued_at=datetime.now(UTC))


class QueueApp(App[None]):
    """The strip and its composer alone, wired as the chat screen wires them; records what the strip posts."""

    def __init__(self) -> None:
        super().__init__()
        self.posted: list[Message] = []

    def compose(self) -> ComposeResult:
        composer = Composer(id="prompt")
        yield QueueEditor(composer, id="inbox")
        yield composer

    @property
    def queue(self) -> QueueEditor:
        return self.query_one(QueueEditor)

    @on(Composer.EditPrevious)
    def _up(self, event: Composer.EditPrevious) -> None:
        self.queue.edit_previous()

    @on(Composer.Submitted)
    def _enter(self, event: Composer.Submitted) -> None:
        self.queue.save_edit(event.text.strip())

    @on(QueueEditor.EditSaved)
    @on(QueueEditor.CancelRequested)
    @on(QueueEditor.EditLastSent)
    def _record(self, event: Message) -> None:
        self.posted.append(event)


async def test_the_queue_editor_holds_the_draft_aside_and_gives_it_back() -> None:
    app = QueueApp()
    async with app.run_test() as pilot:
        queue, composer = app.queue, app.query_one(Composer)
        queue.show([FIRST, SECOND])
        composer.value = "half a thought"
        queue.edit_previous()  # ↑: the last item, the draft held aside
        assert composer.value == "second queued" and queue.editing == "q2"
        assert queue.held_draft == "half a thought" and queue.draft == "half a thought"
        assert str(queue.content).splitlines() == ["1 · queued · first queued",
                                                   "✎ 2 · queued · editing · second queued"]
        await pilot.press("up")  # on the first line of the edited item: the one before
        assert composer.value == "first queued" and queue.editing == "q1"
        await pilot.press("up")  # nothing before the first
        assert queue.editing == "q1"
        queue.leave_edit()  # Esc
        assert composer.value == "half a thought" and queue.editing is None and queue.held_draft == ""
        assert queue.draft == "half a thought" and app.posted == []
        # An edit whose item is claimed meanwhile ends the same way.
        queue.edit_previous()
        queue.show([FIRST])
        assert queue.editing is None and composer.value == "half a thought"
        assert str(queue.content).splitlines() == ["1 · queued · first queued"]


async def test_the_queue_editor_posts_a_saved_edit_and_refuses_an_empty_one() -> None:
    app = QueueApp()
    seen: list[Message] = []
    async with app.run_test(message_hook=seen.append) as pilot:
        queue, composer = app.queue, app.query_one(Composer)
        composer.focus()
        queue.show([FIRST, SECOND])
        await pilot.press("up", "up", "end", *", edited", "enter")
        await wait_until(pilot, lambda: len(app.posted) == 1)
        saved = app.posted[0]
        assert isinstance(saved, QueueEditor.EditSaved)
        assert (saved.item_id, saved.text) == ("q1", "first queued, edited")
        assert queue.editing is None and composer.value == ""
        await pilot.press("up")
        composer.value = "  "
        await pilot.press("enter")  # empty: refused, the edit goes on
        await noted(pilot, seen, "An edit cannot be empty: F9 cancels the item instead.")
        assert queue.editing == "q2" and len(app.posted) == 1


async def test_the_queue_editor_posts_cancels_and_asks_for_the_last_sent_line() -> None:
    app = QueueApp()
    async with app.run_test() as pilot:
        queue = app.queue
        queue.show([FIRST, SECOND])
        queue.cancel()  # no edit: the last item
        queue.edit_previous()
        queue.edit_previous()
        queue.cancel()  # the item being edited, leaving the edit
        assert queue.editing is None
        queue.show([])
        queue.edit_previous()  # nothing queued: the last line sent is to be edited
        queue.cancel()  # nothing to cancel
        await wait_until(pilot, lambda: len(app.posted) == 3)
        await pilot.pause()
        assert [type(m) for m in app.posted] == [QueueEditor.CancelRequested, QueueEditor.CancelRequested,
                                                 QueueEditor.EditLastSent]
        assert [m.item_id for m in app.posted[:2]] == ["q2", "q1"]  # type: ignore[attr-defined]


async def test_the_chat_stores_the_edit_the_strip_posts_and_esc_leaves_the_item(
        corpus_tavern: Tavern, scripted: ScriptedProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    posted: list[Message] = []

    def hook(message: Message) -> None:
        # Seen once by the strip and once more as it bubbles to the screen.
        fresh = all(m is not message for m in posted)
        if isinstance(message, QueueEditor.EditSaved | QueueEditor.CancelRequested) and fresh:
            posted.append(message)

    drafts: list[str] = []  # every text written as the draft
    save_draft = corpus_tavern.inbox.save_draft

    def recorded(playthrough_id: int, text: str) -> bool:
        drafts.append(text)
        return save_draft(playthrough_id, text)

    corpus_tavern.inbox.save_draft = recorded  # type: ignore[method-assign]
    monkeypatch.setattr(sending, "DRAFT_DELAY", 0.001)  # each composer change is a draft save
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        chat = await open_seraphina(pilot)
        await start_gated_reply(pilot, chat, scripted)
        await type_and_enter(pilot, "first queued")
        await wait_until(pilot, lambda: len(chat.queue.items) == 1)
        item = chat.queue.items[0]
        await pilot.press("up")
        assert chat.queue.editing == item.id and chat.prompt.value == "first queued"
        await pilot.press("end", *" changed", "escape")  # Esc: the item stays as it was, no edit posted
        assert chat.queue.editing is None and chat.prompt.value == "" and chat.generating
        await pilot.press("up", "end", *", edited", "enter")
        await wait_until(pilot, lambda: bool(chat.queue.items) and chat.queue.items[0].text == "first queued, edited")
        assert [(m.item_id, m.text) for m in posted] == [(item.id, "first queued, edited")]  # type: ignore[attr-defined]
        assert corpus_tavern.inbox.pending(chat.playthrough_id)[0].text == "first queued, edited"
        scripted.gate.set()
        await wait_until(pilot, lambda: not chat.generating and not chat.queue.items, timeout=10)
        await wait_until(pilot, lambda: chat.sending.draft.timer is None)
        await workers_idle(pilot)
        # Every change is saved at once (no debounce): the queued item's text, edited in the
        # composer, was never written as the draft; the last draft is the emptied composer.
        assert drafts and not [text for text in drafts if "changed" in text or "edited" in text]
        assert corpus_tavern.inbox.draft(chat.playthrough_id) == ""
