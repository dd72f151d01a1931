"""A draft's first send prepares its playthrough and associates it only after admission (seed 000
§7: "First send prepares a real session and associates it only after admission"; §1: a stage
before admission that fails admits nothing and leaves the input). Until the input is admitted
the playthrough is the draft's: not listed, the draft kept with the line. The pre-step stage's
hooks (`StepRunner.pre_step_hooks`) stand in for a stage failing before admission."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavern_tui.engine.step import Proposed, Rejection
from tavern_tui.errors import TavernError
from tavern_tui.service import Tavern
from tests.service.test_openings import qingkong, send_first
from tests.support.loopback import LoopbackServer, sse_chunks_for


def listed(tavern: Tavern) -> list[int]:
    return [p.id for p in tavern.playthroughs.playthroughs(include_archived=True)]


async def test_the_playthrough_is_listed_only_once_its_first_line_is_admitted(
        service: Tavern, server: LoopbackServer, corpus_dir: Path) -> None:
    draft = service.openings.new_draft(qingkong(service, corpus_dir))
    seen: list[tuple[list[int], list[int]]] = []

    def look(proposed: Proposed) -> None:  # the pre-step: before anything of the step is admitted
        seen.append((listed(service), [d.id for d in service.openings.drafts()]))

    service.steps.pre_step_hooks.append(look)
    server.enqueue_sse(sse_chunks_for("Welcome."))
    pid = await send_first(service, draft.id, "Hello there.")
    assert seen == [([], [draft.id])]
    assert listed(service) == [pid] and service.openings.drafts() == []
    assert [m.content for m in service.playthroughs.messages(pid)][1:] == ["Hello there.", "Welcome."]


async def test_a_first_line_rejected_before_admission_keeps_the_draft_and_lists_nothing(
        service: Tavern, server: LoopbackServer, corpus_dir: Path) -> None:
    cid = qingkong(service, corpus_dir)
    draft = service.openings.new_draft(cid, greeting=2)

    def refuse(proposed: Proposed) -> None:
        raise Rejection(f"not in character: {proposed.texts[0]!r}")

    service.steps.pre_step_hooks.append(refuse)
    started: list[int] = []
    with pytest.raises(TavernError, match="not in character: 'Hello there.'"):
        async for _ in service.openings.send_first(draft.id, "Hello there.", started=lambda v: started.append(v.id)):
            pass
    assert server.requests == []
    assert listed(service) == [] and service.playthroughs.playthroughs(cid) == []
    kept = service.openings.draft(draft.id)
    assert (kept.greeting_index, kept.line) == (2, "Hello there.")
    # Sent again once nothing refuses it: a new playthrough, listed; the first is given up.
    service.steps.pre_step_hooks.clear()
    server.enqueue_sse(sse_chunks_for("Welcome."))
    pid = await send_first(service, draft.id, "Hello again.")
    assert pid != started[0]
    assert listed(service) == [pid] and service.openings.drafts() == []
    assert [m.content for m in service.playthroughs.messages(pid)][1:] == ["Hello again.", "Welcome."]


async def test_a_first_line_admitted_before_a_crash_is_listed_when_the_draft_is_sent_again(
        service: Tavern, server: LoopbackServer, corpus_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    draft = service.openings.new_draft(qingkong(service, corpus_dir))
    # The process stops between the admission and the association: the association never runs.
    monkeypatch.setattr(type(service.playthroughs), "associate_opening", lambda self, playthrough_id: None)
    server.enqueue_sse(sse_chunks_for("Welcome."))
    pid = await send_first(service, draft.id, "Hello there.")
    assert listed(service) == [] and [d.id for d in service.openings.drafts()] == [draft.id]
    with pytest.raises(TavernError, match=f"already sent: it is playthrough #{pid}"):
        service.openings.begin(draft.id, "Hello again.")
    assert listed(service) == [pid] and service.openings.drafts() == []
    assert [m.content for m in service.playthroughs.messages(pid)][1:] == ["Hello there.", "Welcome."]


async def test_discarding_a_draft_gives_up_the_playthrough_its_refused_send_prepared(
        service: Tavern, server: LoopbackServer, corpus_dir: Path) -> None:
    draft = service.openings.new_draft(qingkong(service, corpus_dir))

    def refuse(proposed: Proposed) -> None:
        raise Rejection("no")

    service.steps.pre_step_hooks.append(refuse)
    with pytest.raises(TavernError):
        await send_first(service, draft.id, "Hello there.")
    service.openings.discard(draft.id)
    assert listed(service) == [] and service.openings.drafts() == []
    with service.store.unit_of_work(write=False) as uow:
        assert uow.openings.prepared(draft.id) is None
