"""Locking (issue 23 item 2): another process holds SQLite's write lock for 6 s (longer than the
5 s busy timeout) while a chat streams and while `tavern sessions` runs: no traceback, nothing
lost. Reads are deferred (a WAL snapshot, no lock); a streaming step keeps what arrived in memory
until its checkpoint or settlement lands."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.engine.events import EventKind
from tavern_tui.service import Tavern
from tavern_tui.store.db import BUSY_TIMEOUT_MS
from tests.conftest import ScriptedModel
from tests.support.loopback import LoopbackServer, sse_chunks_for

pytestmark = pytest.mark.slow  # real processes holding locks for seconds (tests/conftest.py runs these first)

HOLD_SECONDS = 6.0
assert HOLD_SECONDS * 1000 > BUSY_TIMEOUT_MS  # the hold outlasts one busy wait

_HOLDER = """
import select, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
select.select([sys.stdin], [], [], float(sys.argv[2]))  # the time is up, or the test closed stdin
db.execute("COMMIT")
"""


def _hold_lock(db: Path, seconds: float = HOLD_SECONDS) -> subprocess.Popen[str]:
    """Start a process that takes the write lock and holds it `seconds`, or until its stdin is closed;
    returns once it has it."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(db), str(seconds)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    return {**env, "TAVERN_HOME": str(home), **extra}


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tavern_tui", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_sessions_lists_while_another_process_holds_the_write_lock(isolated_profile: Path,
                                                                   corpus_dir: Path) -> None:
    env = _env(isolated_profile)
    assert _cli(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], env).returncode == 0
    assert _cli(["chat", "Seraphina", "--say", "hello"], env).returncode == 0  # the offline demo
    holder = _hold_lock(isolated_profile / "data" / "tavern.sqlite3", 300)  # held until both reads are done
    try:
        listed = _cli(["sessions", "--json"], env)
        shown = _cli(["show", "1", "--json"], env)
        still_locked = holder.poll() is None
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(30)
    assert still_locked, "the holder let go before the reads ran; the test proved nothing"
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert [(s["id"], s["character"], s["messages"]) for s in json.loads(listed.stdout)] == [(1, "Seraphina", 3)]
    assert shown.returncode == 0 and [m["content"] for m in json.loads(shown.stdout)["messages"]][1] == "hello"


def test_a_write_past_the_busy_timeout_fails_with_a_clear_message(isolated_profile: Path, corpus_dir: Path) -> None:
    env = _env(isolated_profile)
    assert _cli(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], env).returncode == 0
    holder = _hold_lock(isolated_profile / "data" / "tavern.sqlite3", 30)  # outlasts the CLI's start + wait
    try:
        imported = _cli(["import", str(corpus_dir / "cards" / "coding_sensei_v2.png")], env)
        still_locked = holder.poll() is None
    finally:
        holder.kill()
        holder.wait(30)
    assert still_locked
    assert imported.returncode == 1 and "Traceback" not in imported.stderr, imported.stderr
    assert "the database is busy: another tavern window or command has held its write lock" in imported.stderr


def test_a_chat_streaming_through_a_six_second_lock_keeps_every_word(isolated_profile: Path,
                                                                     corpus_dir: Path) -> None:
    text = "".join(f" word{i:03d}" for i in range(400))
    with LoopbackServer() as server:
        env = _env(isolated_profile, TAVERN_API_BASE=server.base_url, TAVERN_MODEL="loop-1")
        assert _cli(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], env).returncode == 0
        server.enqueue_sse(sse_chunks_for(text, pieces=400), delay=0.025)  # ~10 s of streaming
        chat = subprocess.Popen([sys.executable, "-m", "tavern_tui", "chat", "Seraphina", "--say", "tell me"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert chat.stdout is not None
        first = chat.stdout.read(8)  # streaming has begun
        holder = _hold_lock(isolated_profile / "data" / "tavern.sqlite3")
        out, err = chat.communicate(timeout=120)
        holder.wait(30)
    assert chat.returncode == 0 and "Traceback" not in err, err
    assert (first + out).strip() == text.strip()
    db = sqlite3.connect(isolated_profile / "data" / "tavern.sqlite3")
    try:
        rows = db.execute("SELECT kind, body FROM events ORDER BY id").fetchall()
    finally:
        db.close()
    assert rows[-1][0] == EventKind.ASSISTANT_MESSAGE and json.loads(rows[-1][1])["content"] == text


async def test_the_settlement_waits_out_a_lock_instead_of_losing_the_reply(tmp_path: Path, corpus_dir: Path) -> None:
    db = tmp_path / "tavern.sqlite3"
    model = ScriptedModel(delay=0)
    tavern = Tavern(Settings(db_url=f"sqlite:///{db}"), provider=model)
    try:
        cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
        assert cid is not None
        pid = tavern.playthroughs.new_playthrough(cid, user_name="Ada").id
        model.enqueue("*She waits.* Patience.")
        holder: list[subprocess.Popen[str]] = []
        async for update in tavern.steps.send(pid, "wait for it"):
            if not holder and type(update).__name__ == "TextDelta":
                holder.append(await _in_thread(_hold_lock, db))  # the lock lands mid-stream
        holder[0].wait(30)
        assert tavern.playthroughs.messages(pid)[-1].content == "*She waits.* Patience."
    finally:
        tavern.close()


async def _in_thread(fn, *args):  # type: ignore[no-untyped-def]
    import asyncio

    return await asyncio.to_thread(fn, *args)
