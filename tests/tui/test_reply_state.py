"""The running step's state lives in one object, the chat's `ReplyStream`, not on the screen; and
`step_outcome` names how the generation worker ended."""

from __future__ import annotations

import pytest
from textual.worker import WorkerState

from tavern_tui.engine.step import InboxEmpty, StepBusy
from tavern_tui.errors import AuthenticationError, TavernError
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ReplyStream
from tavern_tui.tui.screens.chat.stream import step_outcome
from tests.tui.conftest import GATE, ScriptedProvider, wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina, send

STEP_STATE = {"_reply", "_generation", "_started", "_before", "_into_composer", "_settled_text", "_sent_text"}
"""The attributes the chat screen held the running step's state in before `ReplyStream`."""


@pytest.mark.parametrize(("state", "error", "started", "outcome"), [
    (WorkerState.SUCCESS, None, True, "settled"),
    (WorkerState.CANCELLED, None, True, "stopped"),
    (WorkerState.CANCELLED, None, False, "stopped"),
    (WorkerState.ERROR, StepBusy("busy"), False, "elsewhere"),
    (WorkerState.ERROR, InboxEmpty("empty"), False, "elsewhere"),
    (WorkerState.ERROR, TavernError("nothing to continue"), False, "refused"),
    (WorkerState.ERROR, TavernError("late"), True, "failed"),  # after its start: a failure, said as one
    (WorkerState.ERROR, AuthenticationError("Invalid API key"), False, "failed"),
    (WorkerState.ERROR, RuntimeError("bug"), False, "failed"),
])
def test_step_outcome_names_how_the_worker_ended(state: WorkerState, error: BaseException | None,
                                                 started: bool, outcome: str) -> None:
    assert step_outcome(state, error, started) == outcome


async def test_the_running_step_lives_in_the_reply_stream_and_ends_with_no_box(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue("The forest ", GATE, "is deep.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        assert isinstance(chat.reply_stream, ReplyStream) and chat.reply_stream.box is None
        stream = chat.reply_stream
        greeting = chat.transcript.boxes[0].view
        assert greeting is not None

        await send(pilot, chat, "hello there", wait=False)
        await wait_until(pilot, lambda: stream.box is not None and stream.box.text == "The forest ")
        assert (stream.generation, stream.started, stream.sent_text) == ("send", True, "hello there")
        assert greeting.ref in stream.before and not stream.fills_composer
        assert stream.box.has_class("-streaming") and chat.transcript.boxes[-1] is stream.box

        scripted.gate.set()
        await workers_idle(pilot, timeout=30)
        await wait_until(pilot, lambda: not chat.generating)
        stored = corpus_tavern.playthroughs.messages(chat.playthrough_id)[-1]
        assert stream.box is None and stream.settled_text == "The forest is deep." == stored.content
        assert chat.transcript.boxes[-1].view == stored and chat.status.state == "idle"
        assert chat.reply_stream is stream  # one object for the chat, begun afresh by each step
        assert not STEP_STATE & set(vars(chat))

        await send(pilot, chat, "and then?")
        assert stream.sent_text == "and then?" and stored.ref in stream.before and stream.box is None
