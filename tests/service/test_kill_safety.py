"""Kill-safety and step ownership (issue 23 items 1 and 4): a `tavern chat` killed mid-stream keeps
what it had shown, the next command recovers it at once (marked why) and is not refused, and two
steps started together in one playthrough never both stream."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.engine.step import INTERRUPTED_REASON, StepBusy, StepSettled
from tavern_tui.engine.stream import TextDelta
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel
from tests.support.loopback import LoopbackServer, sse_chunks_for

pytestmark = pytest.mark.slow  # real processes streaming in real time (tests/conftest.py runs these first)

KILL_RUNS = 6
"""Bounded: each run streams a few seconds before its kill."""
PIECES = 300
PIECE_DELAY = 0.02  # seconds between SSE pieces: ~6 s of streaming per reply
KEPT_TARGET = 0.95  # issue 23 item 1: ≥ 95 % of the streamed text kept across kills


def _env(home: Path, base_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env.update({"TAVERN_HOME": str(home), "TAVERN_API_BASE": base_url, "TAVERN_MODEL": "loop-1"})
    return env


def _reply_text(run: int) -> str:
    return "".join(f" r{run}w{i:03d}" for i in range(PIECES))


class _Reader(threading.Thread):
    """Collects a subprocess's stdout as it arrives, noting when the first byte came."""

    def __init__(self, stream) -> None:  # type: ignore[no-untyped-def]
        super().__init__(daemon=True)
        self.stream = stream
        self.data = bytearray()
        self.first = threading.Event()

    def run(self) -> None:
        while chunk := os.read(self.stream.fileno(), 4096):
            self.data += chunk
            self.first.set()


def _db(home: Path) -> str:
    return f"sqlite:///{home / 'data' / 'tavern.sqlite3'}"


def test_sigkill_mid_stream_keeps_the_shown_text_and_the_next_send_goes_on(isolated_profile: Path,
                                                                           corpus_dir: Path) -> None:
    home = isolated_profile
    card = corpus_dir / "cards" / "seraphina_chara_ccv3.png"
    rng = random.Random(23)  # fixed kill points: the run is repeatable, the points still spread
    shown_total = kept_total = 0
    with LoopbackServer() as server:
        env = _env(home, server.base_url)
        imported = subprocess.run([sys.executable, "-m", "tavern_tui", "import", str(card)], env=env,
                                  capture_output=True, text=True, timeout=120, check=False)
        assert imported.returncode == 0, imported.stderr
        for run in range(KILL_RUNS):
            text = _reply_text(run)
            server.enqueue_sse(sse_chunks_for(text, pieces=PIECES), delay=PIECE_DELAY)
            which = ["--new"] if run == 0 else ["--playthrough", "1"]
            process = subprocess.Popen([sys.executable, "-m", "tavern_tui", "chat", "Seraphina", *which,
                                        "--say", f"turn {run}"], env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE)
            reader = _Reader(process.stdout)
            reader.start()
            try:
                # A refused send (busy) would exit without printing: the first byte must come.
                assert reader.first.wait(60), process.stderr.read().decode() if process.poll() is not None else ""
                time.sleep(rng.uniform(2.0, 4.5))
            finally:
                process.send_signal(signal.SIGKILL)
                process.wait(30)
                reader.join(10)
                process.stdout.close()
                process.stderr.close()
            shown = reader.data.decode("utf-8", "replace")
            assert 0 < len(shown) < len(text), f"run {run}: killed after the whole reply; lengthen the stream"
            # The next open recovers it at once (no waiting out a timeout), marked with why.
            tavern = Tavern(Settings(db_url=_db(home)), provider=ScriptedModel(delay=0))
            try:
                tavern.playthroughs.open_playthrough(1)
                last = tavern.playthroughs.messages(1)[-1]
            finally:
                tavern.close()
            assert last.partial and last.error is not None and last.error.startswith(INTERRUPTED_REASON)
            assert text.startswith(last.content), "the kept text is what the server sent, in order"
            shown_total += len(shown)
            kept_total += min(len(last.content), len(shown))
        print(f"kept {kept_total}/{shown_total} = {kept_total / shown_total:.3f}")
        assert kept_total / shown_total >= KEPT_TARGET, (kept_total, shown_total)
        # And the chat goes on in a new process, not refused as busy.
        server.enqueue_sse(sse_chunks_for("*She nods.* Go on.", pieces=3))
        done = subprocess.run([sys.executable, "-m", "tavern_tui", "chat", "Seraphina", "--playthrough", "1",
                               "--say", "still there?"], env=env, capture_output=True, text=True, timeout=120,
                              check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "*She nods.* Go on."


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_settle_the_reply_like_ctrl_c(sig: signal.Signals, isolated_profile: Path,
                                                         corpus_dir: Path) -> None:
    home = isolated_profile
    text = _reply_text(0)
    with LoopbackServer() as server:
        env = _env(home, server.base_url)
        assert subprocess.run([sys.executable, "-m", "tavern_tui", "import",
                               str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], env=env,
                              capture_output=True, timeout=120, check=False).returncode == 0
        server.enqueue_sse(sse_chunks_for(text, pieces=PIECES), delay=PIECE_DELAY)
        process = subprocess.Popen([sys.executable, "-m", "tavern_tui", "chat", "Seraphina", "--say", "hello"],
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        reader = _Reader(process.stdout)
        reader.start()
        assert reader.first.wait(60)
        time.sleep(1.0)
        process.send_signal(sig)
        _, err = process.communicate(timeout=60)
        reader.join(10)
    shown = reader.data.decode()
    assert process.returncode == 130, err  # EXIT_INTERRUPTED, as after Ctrl+C
    assert b"the partial reply is kept" in err
    tavern = Tavern(Settings(db_url=_db(home)), provider=ScriptedModel(delay=0))
    try:
        last = tavern.playthroughs.messages(1)[-1]
        events = tavern.ctx.store.events.surface_events(tavern.playthroughs.playthrough(1).session_id)
    finally:
        tavern.close()
    # Settled by the process itself (a cancelled attempt, not a recovery), with everything shown: a
    # piece that arrived as the signal landed may be stored without having been printed yet.
    assert last.partial and last.error is None and shown.strip()
    assert last.content.startswith(shown.rstrip("\n")) and text.startswith(last.content)
    attempt = [e for e in events if e.kind == EventKind.ASSISTANT_ATTEMPT][-1]
    assert attempt.body.get("cancelled") is True and "recovered" not in attempt.body


async def test_two_steps_started_together_in_one_playthrough_only_one_streams(db_url: str,
                                                                              corpus_dir: Path) -> None:
    setup = Tavern(Settings(db_url=db_url), provider=ScriptedModel(delay=0))
    try:
        cid = setup.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
        assert cid is not None
        pid = setup.playthroughs.new_playthrough(cid, user_name="Ada").id
    finally:
        setup.close()
    reply = " ".join(f"w{i}" for i in range(30))

    def contender(barrier: threading.Barrier, outcome: list[str]) -> None:
        # Its own service and engine, as a second window or command would have.
        model = ScriptedModel(delay=0.03)
        model.enqueue(reply)
        tavern = Tavern(Settings(db_url=db_url), provider=model)

        async def go() -> None:
            barrier.wait()
            try:
                async for update in tavern.steps.send(pid, "both at once"):
                    if isinstance(update, StepSettled):
                        outcome.append("streamed")
            except StepBusy:
                outcome.append("busy")

        try:
            asyncio.run(go())
        finally:
            tavern.close()

    for _ in range(5):
        barrier = threading.Barrier(2)
        outcome: list[str] = []
        threads = [threading.Thread(target=contender, args=(barrier, outcome)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert sorted(outcome) == ["busy", "streamed"]
    check = Tavern(Settings(db_url=db_url), provider=ScriptedModel(delay=0))
    try:
        contents = [m.content for m in check.playthroughs.messages(pid)[1:]]
    finally:
        check.close()
    # Five rounds, each one input and one reply: the loser wrote nothing.
    assert contents == ["both at once", reply] * 5


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


async def test_a_dead_owner_loses_the_step_at_once_and_a_live_one_keeps_it(db_url: str, corpus_dir: Path) -> None:
    from sqlalchemy import update

    from tavern_tui.store.leases import LEASES

    model = ScriptedModel(delay=0)
    tavern = Tavern(Settings(db_url=db_url), provider=model)
    try:
        cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
        assert cid is not None
        view = tavern.playthroughs.new_playthrough(cid, user_name="Ada")
        log, claims = tavern.ctx.store.events, tavern.ctx.store.claims
        # A step left open with a checkpoint, its claim held by a process that is gone.
        claim = claims.claim(view.session_id, stale_after=3600)
        checkpoint = {"content": "half a", "reasoning": ""}
        log.append(view.session_id, [NewEvent(EventKind.REQUEST_HEADER, None, {}),
                                     NewEvent(EventKind.STREAM_CHECKPOINT, None, checkpoint)])
        with tavern.ctx.store.write_engine.begin() as conn:
            conn.execute(update(LEASES).where(LEASES.c.token == claim.token).values(pid=_dead_pid()))
        # A live owner (another process on this host: our parent) keeps it: busy, nothing written.
        with tavern.ctx.store.write_engine.begin() as conn:
            conn.execute(update(LEASES).where(LEASES.c.token == claim.token).values(pid=os.getppid(), started=""))
        with pytest.raises(StepBusy, match=f"process {os.getppid()}"):
            async for _ in tavern.steps.send(view.id, "too soon"):
                pass
        with tavern.ctx.store.write_engine.begin() as conn:
            conn.execute(update(LEASES).where(LEASES.c.token == claim.token).values(pid=_dead_pid()))
        # The heartbeat is fresh (stale_after is an hour): only the dead pid tells, and at once.
        model.enqueue("Welcome back.")
        texts = [u.text async for u in tavern.steps.send(view.id, "I am back") if isinstance(u, TextDelta)]
        assert "".join(texts) == "Welcome back."
        messages = tavern.playthroughs.messages(view.id)
        assert [(m.content, m.partial) for m in messages[1:]] == [
            ("half a", True), ("I am back", False), ("Welcome back.", False)]
        assert messages[1].error is not None and messages[1].error.startswith(INTERRUPTED_REASON)
        assert model.requests[-1].messages[-2] == {"role": "assistant", "content": "half a"}
    finally:
        tavern.close()


def test_a_step_left_open_without_a_claim_is_recovered_on_the_next_open_and_marked(tavern: Tavern,
                                                                                  corpus_dir: Path) -> None:
    # E.g. a database from before leases: no claim row at all, so no live owner: recovered at once.
    from tavern_tui.tui.labels import message_mark

    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
    assert cid is not None
    view = tavern.playthroughs.new_playthrough(cid, user_name="Ada")
    tavern.ctx.store.events.append(view.session_id, [
        NewEvent(EventKind.USER_MESSAGE, "user", {"content": "hi"}), NewEvent(EventKind.REQUEST_HEADER, None, {}),
        NewEvent(EventKind.STREAM_CHECKPOINT, None, {"content": "She turns", "reasoning": ""})])
    tavern.playthroughs.open_playthrough(view.id)
    last = tavern.playthroughs.messages(view.id)[-1]
    assert (last.content, last.partial, last.error_category) == ("She turns", True, "interrupted")
    assert message_mark(last) == f"recovered · {INTERRUPTED_REASON}"


def test_a_step_a_kill_left_open_shows_as_partial_before_anything_settles_it(tavern: Tavern,
                                                                            corpus_dir: Path) -> None:
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
    assert cid is not None
    view = tavern.playthroughs.new_playthrough(cid, user_name="Ada")
    log = tavern.ctx.store.events
    log.append(view.session_id, [
        NewEvent(EventKind.USER_MESSAGE, "user", {"content": "hi"}), NewEvent(EventKind.REQUEST_HEADER, None, {}),
        NewEvent(EventKind.STREAM_CHECKPOINT, None, {"content": "She turns ", "reasoning": ""}),
        NewEvent(EventKind.STREAM_CHECKPOINT, None, {"content": "to the door", "reasoning": ""})])
    version = log.version()
    last = tavern.playthroughs.messages(view.id)[-1]  # what `tavern show` and `export` read
    assert (last.content, last.partial, last.error_category) == ("She turns to the door", True, "interrupted")
    assert last.error is not None and last.error.startswith(INTERRUPTED_REASON)
    assert log.version() == version  # a read: nothing was written
    claim = tavern.ctx.store.claims.claim(view.session_id, tavern.ctx.stale_after)  # a live owner streams
    try:
        assert tavern.playthroughs.messages(view.id)[-1].content == "hi"  # its reply is not shown as cut off
    finally:
        tavern.ctx.store.claims.release(claim.token)


def test_two_tavern_chat_processes_started_together_stream_one_after_the_other(db_url: str, corpus_dir: Path,
                                                                               isolated_profile: Path) -> None:
    # The race of issue 23 item 4 across processes: the claim is one insert, so only one process
    # streams; with the inbox (issue 15) the other queues its line, waits, then takes its own step.
    text = "".join(f" w{i:03d}" for i in range(120))
    with LoopbackServer() as server:
        env = {**_env(isolated_profile, server.base_url), "TAVERN_DB_URL": db_url}
        first = subprocess.run([sys.executable, "-m", "tavern_tui", "import",
                                str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], env=env,
                               capture_output=True, text=True, timeout=120, check=False)
        assert first.returncode == 0, first.stderr
        server.enqueue_sse(sse_chunks_for("*She nods.*"))
        assert subprocess.run([sys.executable, "-m", "tavern_tui", "chat", "Seraphina", "--new", "--say", "hi"],
                              env=env, capture_output=True, timeout=120, check=False).returncode == 0
        for round_ in range(2):
            server.enqueue_sse(sse_chunks_for(text, pieces=120), delay=0.05)  # ~6 s: both start meanwhile
            server.enqueue_sse(sse_chunks_for(f"*Reply {round_}.*"))
            racers = [subprocess.Popen([sys.executable, "-m", "tavern_tui", "chat", "Seraphina", "--playthrough",
                                        "1", "--say", f"racer {round_}.{n}"], env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True) for n in range(2)]
            outcomes = [(p.communicate(timeout=120), p.returncode) for p in racers]
            assert [code for _, code in outcomes] == [0, 0], outcomes
            assert "Traceback" not in "".join(err for (_, err), _ in outcomes), outcomes
            outs = sorted(out.strip() for (out, _), _ in outcomes)
            if outs == sorted([text.strip(), f"*Reply {round_}.*"]):  # the loser queued, waited, took its step
                assert sum("queued #1" in err for (_, err), _ in outcomes) == 1, outcomes
            else:  # it queued while the winner was opening: claimed in the winner's batch, said so, and
                # it prints the reply its line got (the winner's)
                assert outs == [text.strip(), text.strip()], outcomes
                assert any("was sent by another" in err for (_, err), _ in outcomes), outcomes
                assert server.clear() == 1
    tavern = Tavern(Settings(db_url=db_url), provider=ScriptedModel(delay=0))
    try:
        said = [(m.role, m.content) for m in tavern.playthroughs.messages(1) if m.role in ("user", "assistant")]
    finally:
        tavern.close()
    # Never two steps at once: each round's long reply is stored whole, once; no line is lost.
    users = [content for role, content in said if role == "user"]
    assert len(users) == 5 and users[0] == "hi"
    assert [content.strip() for role, content in said if role == "assistant"].count(text.strip()) == 2, said


def test_an_owner_on_another_host_keeps_the_step_while_it_beats_and_loses_it_when_it_stops(
        tavern: Tavern, corpus_dir: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import update

    from tavern_tui.store.leases import LEASES

    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
    assert cid is not None
    view = tavern.playthroughs.new_playthrough(cid, user_name="Ada")
    claims = tavern.ctx.store.claims
    held = claims.claim(view.session_id, stale_after=60)
    with tavern.ctx.store.write_engine.begin() as conn:  # its pid cannot be checked from here
        conn.execute(update(LEASES).where(LEASES.c.token == held.token).values(host="elsewhere", pid=1))
    with pytest.raises(StepBusy, match="process 1 on elsewhere"):
        claims.claim(view.session_id, stale_after=60)
    with tavern.ctx.store.write_engine.begin() as conn:  # no heartbeat for longer than stale_after
        conn.execute(update(LEASES).where(LEASES.c.token == held.token)
                     .values(heartbeat_at=datetime.now(UTC) - timedelta(seconds=61)))
    taken = claims.claim(view.session_id, stale_after=60)
    assert taken.displaced == "its owner on elsewhere stopped answering"
    claims.heartbeat(taken.token)
    claims.release(taken.token)
    assert claims.claim(view.session_id, stale_after=60).displaced is None  # released: nobody held it
