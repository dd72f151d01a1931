"""A compaction's summary request runs through a step's stages (DESIGN.md "One step"): it holds
the playthrough's step lease (a step and a summary request never run at once), the provider
prepares the call before anything is written, and its trace keeps the stream's HTTP attempts (a
record per retry) and the stage times. Requests go to the loopback OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.engine.step import StepBusy, stages_text
from tavern_tui.engine.step.types import applied_context
from tavern_tui.errors import TavernError
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.service import Tavern
from tests.support.cli import run_cli
from tests.support.loopback import LoopbackServer, sse_chunks_for

SUMMARY_STAGES = {"claim", "assemble", "prepare", "first_byte", "stream"}
"""The stages a summary request times (its records are written after its stream)."""


def make_service(base_url: str, db_url: str, corpus_dir: Path, tmp_path: Path,
                 history: int = 12) -> tuple[Tavern, int, int]:
    """(the service, a Seraphina playthrough with a 32k preset and `history` stored lines after the
    greeting, its session) on the endpoint `base_url`."""
    settings = Settings(db_url=db_url, provider=ProviderSettings(base_url=base_url, model="loop-1", timeout=10))
    service = Tavern(settings)
    preset = json.loads((corpus_dir / "presets" / "st_openai_default_staging.json").read_text())
    preset["openai_max_context"], preset["openai_max_tokens"] = 32768, 300
    preset_path = tmp_path / "ctx32k.json"
    preset_path.write_text(json.dumps(preset))
    card, bound = service.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png", preset_path])
    assert card.ok and bound.ok
    pid = service.playthroughs.new_playthrough(card.id, user_name="Ann").id
    service.presets.bind_preset(pid, bound.id)
    session = service.playthroughs.playthrough(pid).session_id
    service.store.events.append(session, [
        NewEvent(EventKind.USER_MESSAGE if n % 2 == 0 else EventKind.ASSISTANT_MESSAGE,
                 "user" if n % 2 == 0 else "assistant", {"content": f"Line {n} of the walk through the glade."})
        for n in range(history)])
    return service, pid, session


@pytest.fixture
def live(server: LoopbackServer, db_url: str, corpus_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    service, pid, session = make_service(server.base_url, db_url, corpus_dir, tmp_path)
    yield service, pid, session
    service.close()


async def say(service: Tavern, pid: int, text: str) -> None:
    async for _ in service.steps.send(pid, text):
        pass


async def test_a_compaction_while_another_holds_the_step_fails_and_writes_nothing(  # type: ignore[no-untyped-def]
        live, server: LoopbackServer) -> None:
    service, pid, session = live
    before = service.store.events.head_seq(session)
    held = service.store.claims.claim(session, 60)  # a step of another window, say
    try:
        with pytest.raises(StepBusy) as busy:
            await service.compaction.compact(pid, keep=4)
    finally:
        service.store.claims.release(held.token)
    assert "a reply is being written in this playthrough" in str(busy.value)  # as a second step is told
    assert service.store.events.head_seq(session) == before and server.requests == []
    # The lease free again, the same compaction runs, and lets go of the lease when done.
    server.enqueue_sse(sse_chunks_for("Ann walked through the glade."))
    done = await service.compaction.compact(pid, keep=4)
    assert done.text == "Ann walked through the glade."
    assert not service.store.claims.held(session, 60)


async def test_a_step_while_a_summary_streams_is_refused_as_busy(  # type: ignore[no-untyped-def]
        live, server: LoopbackServer) -> None:
    service, pid, session = live
    gate = threading.Event()
    server.enqueue_sse(sse_chunks_for("A recap of the walk."), gate=gate)
    compacting = asyncio.ensure_future(service.compaction.compact(pid, keep=4))
    try:
        for _ in range(500):  # the summary request went out: its lease is held
            if server.requests:
                break
            await asyncio.sleep(0.01)
        assert server.requests and service.store.claims.held(session, 60)
        before = service.store.events.head_seq(session)
        with pytest.raises(StepBusy):
            await say(service, pid, "Are we there yet?")
        assert service.store.events.head_seq(session) == before and len(server.requests) == 1
    finally:
        gate.set()
    done = await compacting
    assert done.text == "A recap of the walk."
    server.enqueue_sse(sse_chunks_for("Nearly."))
    await say(service, pid, "Are we there yet?")  # the summary settled its request and freed the step
    assert service.traces.traces(pid)[-1].outcome == "ok"


async def test_a_bad_endpoint_is_refused_before_anything_is_written(db_url: str, corpus_dir: Path,
                                                                   tmp_path: Path) -> None:
    service, pid, session = make_service("ftp://models.example/v1", db_url, corpus_dir, tmp_path)
    try:
        before = service.store.events.head_seq(session)
        with pytest.raises(TavernError) as refused:
            await service.compaction.compact(pid, keep=4)
        message = str(refused.value)
        assert message.startswith("the summary request could not be built (the endpoint URL")
        assert "must start with http:// or https://" in message and "nothing was sent or recorded" in message
        assert service.store.events.head_seq(session) == before
        assert not service.store.claims.held(session, 60)  # the lease was given back
    finally:
        service.close()


async def test_a_retried_summary_request_keeps_its_attempts_in_the_trace(  # type: ignore[no-untyped-def]
        live, server: LoopbackServer) -> None:
    service, pid, _ = live
    server.enqueue_json(503, {"error": {"message": "overloaded"}}, headers={"Retry-After": "0.01"})
    server.enqueue_sse(sse_chunks_for("Ann and Seraphina crossed the glade."))
    done = await service.compaction.compact(pid, keep=4)
    assert done.text == "Ann and Seraphina crossed the glade." and len(server.requests) == 2
    first, retry = service.traces.traces(pid)
    assert first.id == done.trace and (first.attempt, retry.attempt, retry.retry_of) == (1, 2, first.id)
    assert first.generation == retry.generation == "summary"
    record = service.traces.trace(first.id)["record"]
    assert [a["status"] for a in record["attempts"]] == [503, 200]
    assert record["attempts"][0]["error"] == "server" and record["attempts"][0]["retry_delay"] == 0.01
    retried = service.traces.trace(retry.id)["record"]
    assert "timing" not in retried and "attempts" not in retried  # the whole request's, kept on the first
    assert retried["messages"] == record["messages"] and retried["header"] == record["header"]
    for trace in (first, retry):  # both requests sent the same messages: both verify against the log
        result = service.traces.verify_trace(trace.id)
        assert result.ok and result.messages == server.requests[0].json["messages"]


async def test_a_summary_request_records_its_stages_and_adapter_context(  # type: ignore[no-untyped-def]
        live, server: LoopbackServer) -> None:
    service, pid, session = live
    server.enqueue_sse(sse_chunks_for("The walk so far."))
    done = await service.compaction.compact(pid, keep=4)
    shown = service.traces.trace(done.trace)
    record = shown["record"]
    timing = record["timing"]
    assert set(timing["stages"]) == SUMMARY_STAGES
    assert all(isinstance(ms, (int, float)) and ms >= 0 for ms in timing["stages"].values())
    assert timing["submitted"] == record["submitted_at"] <= timing["first_byte"] <= timing["last_byte"]
    assert stages_text(timing["stages"]).startswith("claim ") and "first byte" in stages_text(timing["stages"])
    assert "attempts" in record and [a["status"] for a in record["attempts"]] == [200]
    # The adapter context, as a step records it, and linked from the trace as a step's is.
    contexts = service.store.events.events_of_kind([str(EventKind.REQUEST_CONTEXT)], [session])
    assert [list(c.ref) for c in contexts] == [record["request_context"]]
    assert shown["request_context"] == {"adapter": {"provider": "openai-compatible", "model": "loop-1",
                                                    "endpoint": server.base_url.removesuffix("/v1"), "config": {}}}
    assert service.traces.verify_trace(done.trace).ok
    # The summary admits no runtime context: its record is not the "last step's" a step compares with.
    assert applied_context(service.store.events.surface_events(session)) is None
    # A step after it compares its runtime context with the last step's, not the summary's.
    server.enqueue_sse(sse_chunks_for("On we go."))
    await say(service, pid, "Onwards.")
    step = service.traces.trace(service.traces.traces(pid)[-1].id)
    assert step["request_context"]["context"]["cleared"] == []
    assert set(step["timing"]["stages"]) >= {"claim", "prepare", "record", "first_byte", "stream"}


async def test_trace_list_and_show_give_a_retried_summary_requests_stages_and_outcome(  # type: ignore[no-untyped-def]
        live, server: LoopbackServer, db_url: str, isolated_profile: Path) -> None:
    # The summary node that settles the request carries no timing or attempts: the trace record's own are shown.
    service, pid, _ = live
    server.enqueue_json(503, {"error": {"message": "overloaded"}}, headers={"Retry-After": "0.01"})
    server.enqueue_sse(sse_chunks_for("Ann and Seraphina crossed the glade."))
    done = await service.compaction.compact(pid, keep=4)
    first, retry = service.traces.traces(pid)
    assert first.id == done.trace
    assert (first.outcome, retry.outcome) == ("retried (503)", "ok")  # as a retried step's requests read
    for view in (first, retry):  # the whole request's attempts, as a step's reply gives both its requests
        assert [a["status"] for a in view.attempts] == [503, 200] and view.latency_ms is not None
    for trace_id in (first.id, retry.id):  # a retry's record leaves the stage times to the first request's
        assert set(service.traces.trace(trace_id)["timing"]["stages"]) == SUMMARY_STAGES
    # The provider's usage (the SSE usage chunk: prompt 10, completion 5) on the request that answered.
    assert (first.usage, retry.usage) == (None, {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})

    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")} | {"TAVERN_HOME": str(isolated_profile)}

    def cli(*args: str) -> str:
        ran = run_cli(["--db", db_url, "trace", *args], env)
        assert ran.returncode == 0, ran.stderr
        return ran.stdout

    rows = cli("list", "--playthrough", str(pid)).splitlines()[1:]  # after the header
    assert [row.split()[0] for row in rows] == [first.id, retry.id]
    assert rows[0].endswith("  retried (503)") and " ms  retried" in rows[0]  # a latency, not "-"
    assert rows[1].endswith(f"  ok  attempt 2 (retry of {first.id})")
    listed = json.loads(cli("list", "--playthrough", str(pid), "--json"))
    assert [t["outcome"] for t in listed] == ["retried (503)", "ok"]
    for trace_id in (first.id, retry.id):
        lines = cli("show", trace_id).splitlines()
        stages = next(line for line in lines if line.startswith("stages: "))
        assert stages.startswith("stages: claim ") and all(f"{name.replace('_', ' ')} " in stages
                                                           for name in SUMMARY_STAGES)
        attempts = [json.loads(line.removeprefix("attempt: ")) for line in lines if line.startswith("attempt: ")]
        assert [a["status"] for a in attempts] == [503, 200]
    assert "strategy summary · retried (503)" in cli("show", first.id).splitlines()[0]
    shown = json.loads(cli("show", first.id, "--json"))
    assert set(shown["timing"]["stages"]) == SUMMARY_STAGES and shown["view"]["outcome"] == "retried (503)"


async def test_a_single_summary_request_lists_as_ok_with_its_stages(  # type: ignore[no-untyped-def]
        live, server: LoopbackServer) -> None:
    service, pid, _ = live
    server.enqueue_sse(sse_chunks_for("The walk so far."))
    done = await service.compaction.compact(pid, keep=4)
    (view,) = service.traces.traces(pid)
    assert (view.id, view.outcome, [a["status"] for a in view.attempts]) == (done.trace, "ok", [200])
    assert view.latency_ms is not None and view.reply is not None
    assert set(service.traces.trace(view.id)["timing"]["stages"]) == SUMMARY_STAGES


async def test_a_sends_trace_times_the_reads_before_its_build(live, server: LoopbackServer) -> None:  # type: ignore[no-untyped-def]
    # The build a send makes ahead, in a worker, comes with the reads it needed (the playthrough,
    # MVU's initialisation, the batch, the history): the `gather` stage, first, so a slow step's
    # time before its claim is named too (B9: ~50 ms before the first byte were in no stage).
    from tavern_tui.engine.step import STAGES

    service, pid, _session = live
    server.enqueue_sse(sse_chunks_for("Hello there."))
    await say(service, pid, "Hi.")
    stages = service.traces.trace(service.traces.traces(pid)[-1].id)["timing"]["stages"]
    assert [s for s in STAGES if s in stages][:3] == ["gather", "claim", "assemble"]
    assert stages["gather"] > 0 and stages_text(stages).startswith("gather ")
