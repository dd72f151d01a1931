"""Each stage once per send (DESIGN.md "One step": assemble once, off the loop, the fitted assembly
is what is sent; the surface read once by the step's opening), counted through the stages' own
seams, not timed: the `Prebuilt` assembler the runner hands the engine, and the surface reads the
engine makes through its awaited view of the log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tavern_tui.service.steps.preparing as preparing_module
from tavern_tui.engine.log import ThreadedLog
from tavern_tui.engine.step import Prebuilt, StepSettled
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel


class Recorded(Prebuilt):
    """`Prebuilt`, remembering every instance the runner makes."""

    made: list[Recorded] = []

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        Recorded.made.append(self)


async def _send(tavern: Tavern, pid: int, text: str) -> StepSettled:
    updates = [u async for u in tavern.steps.send(pid, text)]
    settled = updates[-1]
    assert isinstance(settled, StepSettled)
    return settled


@pytest.fixture
def seraphina(tavern: Tavern, corpus_dir: Path) -> int:
    [result] = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])
    assert result.ok
    return tavern.playthroughs.new_playthrough(result.id).id  # type: ignore[arg-type]


async def test_a_send_builds_its_request_once_and_sends_that_build(tavern: Tavern, model: ScriptedModel,
                                                                  seraphina: int,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preparing_module, "Prebuilt", Recorded)
    Recorded.made = []
    model.enqueue("Welcome.")
    model.enqueue("Rest now.")
    await _send(tavern, seraphina, "hello")
    settled = await _send(tavern, seraphina, "thank you")
    assert len(Recorded.made) == 2  # one build a send, in the worker
    assert [made.builds for made in Recorded.made] == [0, 0]  # the assemble stage built nothing more
    assert [made.assembly for made in Recorded.made] == [None, None]  # each handed to its step
    assert settled.event.content == "Rest now."
    # The trace's assemble stage is the time the build ahead took (not the 0 ms of handing it over).
    assert settled.event.body["timing"]["stages"]["assemble"] == Recorded.made[1].build_ms > 0
    assert [m.content for m in tavern.playthroughs.messages(seraphina)][-2:] == ["thank you", "Rest now."]


async def test_a_line_queued_after_the_fit_is_built_again_with_it(tavern: Tavern, model: ScriptedModel,
                                                                  seraphina: int,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preparing_module, "Prebuilt", Recorded)
    Recorded.made = []
    model.enqueue("Welcome.")
    real_init = Recorded.__init__

    def queue_meanwhile(self: Recorded, *args: Any) -> None:
        real_init(self, *args)
        tavern.inbox.add(seraphina, "and one more thing")  # between the fit and the claim

    monkeypatch.setattr(Recorded, "__init__", queue_meanwhile)
    await _send(tavern, seraphina, "hello")
    assert [made.builds for made in Recorded.made] == [1]  # the claimed batch differed: built again
    users = [m.content for m in tavern.playthroughs.messages(seraphina) if m.role == "user"]
    assert users == ["and one more thing", "hello"] or users == ["hello", "and one more thing"]


async def test_the_steps_opening_reads_the_surface_once(tavern: Tavern, model: ScriptedModel, seraphina: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # The engine reads the log through `ThreadedLog` (its awaited view of the store's log); the
    # service's own reads (the fit, MVU after the settle) go to the store directly.
    reads: list[int] = []
    real = ThreadedLog.surface_events

    async def counted(self: ThreadedLog, session_id: int, through_seq: int | None = None) -> Any:
        reads.append(session_id)
        return await real(self, session_id, through_seq)

    monkeypatch.setattr(ThreadedLog, "surface_events", counted)
    model.enqueue("Welcome.")
    model.enqueue("Rest now.")
    await _send(tavern, seraphina, "hello")
    assert len(reads) == 1  # read to recover or refuse; the claim extends it with what it stored
    await _send(tavern, seraphina, "thank you")
    assert len(reads) == 2


async def test_a_send_in_a_chat_without_mvu_state_reads_no_surface_for_it(
        tavern: Tavern, model: ScriptedModel, seraphina: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Seraphina's card carries no MVU material: no record is ever made, so neither the request's
    # MVU macros nor the reply's settlement has a record to read (each read the whole surface to
    # find out, on every send: ~200 ms at 5,000 messages).
    from tavern_tui.service.mvu.service import MvuService

    reads: list[int] = []
    real = MvuService.surface_events
    monkeypatch.setattr(MvuService, "surface_events", lambda self, sid: reads.append(sid) or real(self, sid))
    model.enqueue("Welcome, traveller, to the glade.")
    settled = await _send(tavern, seraphina, "hello")
    assert settled.event.content == "Welcome, traveller, to the glade."
    assert reads == []
    assert tavern.mvu.head(seraphina).record is None
