"""Nothing queued is stranded unseen, in real subprocesses against the loopback SSE server: two
`tavern chat --say` queue behind a streaming one; whichever claims the batch answers it, and the
other prints that same reply (its line was in the batch). A `--say` stopped while it waits says
on stderr that its line is left for the next step, and `tavern inbox` lists it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.cli.test_cli import _run, cli_env  # noqa: F401 - the fixture
from tests.support.loopback import LoopbackServer, sse_chunks_for

pytestmark = pytest.mark.slow  # real processes streaming in real time (tests/conftest.py runs these first)

REPLY_A = "*Seraphina hums while she changes the bandage on your arm.* The forest guards us tonight."
REPLY_BATCH = "*She smiles at you both.* Yes, and yes: the glade is safe."


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tavern_tui", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for(condition, what: str, deadline: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, f"{what} never happened"
        time.sleep(0.05)


def _queued(env: dict[str, str]) -> list[dict[str, object]]:
    listed = _run(["inbox", "1", "--json"], env)
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


def _streaming_first(server: LoopbackServer, env: dict[str, str], gate: threading.Event) -> subprocess.Popen[str]:
    # Streams until the test opens `gate` (the others queue meanwhile, however slow the machine).
    server.enqueue_sse(sse_chunks_for(REPLY_A, pieces=40), delay=0.01, gate=gate, gate_after=3)
    first = _start(["chat", "Seraphina", "--playthrough", "1", "--say", "A: are we safe here?"], env)
    _wait_for(lambda: bool(server.requests) or first.poll() is not None, "process 1's request")
    assert first.poll() is None, first.communicate()
    return first


def test_two_queued_says_both_print_the_reply_to_their_batch(cli_env: dict[str, str],  # noqa: F811
                                                             corpus_dir: Path) -> None:
    assert _run(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], cli_env).returncode == 0
    assert _run(["chat", "Seraphina", "--new", "--say", "hello"], cli_env).returncode == 0  # demo provider
    with LoopbackServer() as server:
        env = {**cli_env, "TAVERN_API_BASE": server.base_url, "TAVERN_MODEL": "loop-1"}
        gate = threading.Event()
        first = _streaming_first(server, env, gate)
        server.enqueue_sse(sse_chunks_for(REPLY_BATCH, pieces=2))
        second = _start(["chat", "Seraphina", "--playthrough", "1", "--say", "B: is the glade safe?"], env)
        _wait_for(lambda: len(_queued(cli_env)) == 1, "B queued")
        third = _start(["chat", "Seraphina", "--playthrough", "1", "--say", "C: and the river?"], env)
        _wait_for(lambda: len(_queued(cli_env)) == 2, "C queued")
        gate.set()
        out1, err1 = first.communicate(timeout=120)
        out2, err2 = second.communicate(timeout=120)
        out3, err3 = third.communicate(timeout=120)
        requests = [r.json for r in server.requests]
    assert (first.returncode, second.returncode, third.returncode) == (0, 0, 0), (err1, err2, err3)
    assert out1.strip() == REPLY_A
    # One of B and C ran the step that claimed both lines; the other prints the reply it got.
    assert out2.strip() == REPLY_BATCH and out3.strip() == REPLY_BATCH, (err2, err3)
    assert len(requests) == 2
    assert [(m["role"], m["content"]) for m in requests[1]["messages"][-4:]] == [
        ("user", "A: are we safe here?"), ("assistant", REPLY_A), ("user", "B: is the glade safe?"),
        ("user", "C: and the river?")]
    assert sum("sent by another tavern window or command" in e for e in (err2, err3)) == 1
    assert "left for the next step" not in err2 + err3
    assert _queued(cli_env) == []


def test_a_say_stopped_while_it_waits_says_its_line_is_left(cli_env: dict[str, str],  # noqa: F811
                                                            corpus_dir: Path) -> None:
    assert _run(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], cli_env).returncode == 0
    assert _run(["chat", "Seraphina", "--new", "--say", "hello"], cli_env).returncode == 0
    with LoopbackServer() as server:
        env = {**cli_env, "TAVERN_API_BASE": server.base_url, "TAVERN_MODEL": "loop-1"}
        gate = threading.Event()
        first = _streaming_first(server, env, gate)
        second = _start(["chat", "Seraphina", "--playthrough", "1", "--say", "B: is the glade safe?"], env)
        _wait_for(lambda: len(_queued(cli_env)) == 1, "B queued")
        second.send_signal(signal.SIGTERM)
        out2, err2 = second.communicate(timeout=60)
        gate.set()
        out1, err1 = first.communicate(timeout=120)
    assert first.returncode == 0 and out1.strip() == REPLY_A, err1
    assert out2.strip() == ""
    left = [line for line in err2.splitlines() if "left for the next step" in line]
    assert left == ["1 queued line left for the next step in playthrough 1 (`tavern inbox 1` lists them)"], err2
    assert [(i["position"], i["text"]) for i in _queued(cli_env)] == [(1, "B: is the glade safe?")]
