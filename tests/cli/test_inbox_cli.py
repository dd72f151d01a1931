"""The inbox on the command line, in real subprocesses against the loopback SSE server: a second
`tavern chat --say` while another process streams queues and then runs its own step; `tavern
inbox` lists, adds, edits and cancels, and a canceled line never reaches the model."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_cli import _run, cli_env  # noqa: F401 - the fixture
from tests.support.loopback import LoopbackServer, sse_chunks_for

REPLY_A = "*Seraphina hums while she changes the bandage on your arm.* The forest guards us tonight."
REPLY_B = "*She smiles.* Yes, the glade is safe."


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tavern_tui", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_a_second_process_queues_while_the_first_streams_then_runs_its_step(
        cli_env: dict[str, str], corpus_dir: Path) -> None:  # noqa: F811
    assert _run(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], cli_env).returncode == 0
    assert _run(["chat", "Seraphina", "--new", "--reply"], cli_env).returncode != 0  # nothing to answer yet
    with LoopbackServer() as server:
        # A streams slowly (20 pieces, 0.25 s apart); B's reply is quick.
        server.enqueue_sse(sse_chunks_for(REPLY_A, pieces=20), delay=0.25)
        server.enqueue_sse(sse_chunks_for(REPLY_B, pieces=2))
        env = {**cli_env, "TAVERN_API_BASE": server.base_url, "TAVERN_MODEL": "loop-1"}
        first = _start(["chat", "Seraphina", "--playthrough", "1", "--say", "A: are we safe here?"], env)
        deadline = time.monotonic() + 60
        while not server.requests:
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "process 1 never sent its request"
            time.sleep(0.02)
        time.sleep(0.5)
        second = _start(["chat", "Seraphina", "--playthrough", "1", "--say", "B: is the glade safe?"], env)
        out1, err1 = first.communicate(timeout=120)
        out2, err2 = second.communicate(timeout=120)
        requests = [r.json for r in server.requests]
    assert first.returncode == 0, err1
    assert second.returncode == 0, err2
    assert out1.strip() == REPLY_A and out2.strip() == REPLY_B
    assert "queued #1" in err2 and "waiting for it to settle" in err2
    assert len(requests) == 2
    # The request for B carries the whole reply to A before B.
    assert [(m["role"], m["content"]) for m in requests[1]["messages"][-3:]] == [
        ("user", "A: are we safe here?"), ("assistant", REPLY_A), ("user", "B: is the glade safe?")]
    shown = json.loads(_run(["show", "1", "--json"], cli_env).stdout)["messages"]
    assert [(m["role"], m["content"]) for m in shown[1:]] == [
        ("user", "A: are we safe here?"), ("assistant", REPLY_A), ("user", "B: is the glade safe?"),
        ("assistant", REPLY_B)]


def test_inbox_add_edit_cancel_list_and_the_next_step_claims_what_is_left(
        cli_env: dict[str, str], corpus_dir: Path) -> None:  # noqa: F811
    assert _run(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], cli_env).returncode == 0
    assert _run(["chat", "Seraphina", "--new", "--say", "hello"], cli_env).returncode == 0  # demo provider
    assert _run(["inbox", "1"], cli_env).stdout.strip() == "nothing queued in playthrough 1"
    added = [json.loads(_run(["inbox", "add", "1", "--text", text, "--json", *flags], cli_env).stdout)
             for text, flags in (("first line\nsecond line", []), ("drop this", []), ("look behind you", ["--steer"]))]
    assert [a["done"] for a in added] == ["queued", "queued", "steer"]
    listed = json.loads(_run(["inbox", "1", "--json"], cli_env).stdout)
    # The steer stands before the next-turn items (claimed first).
    assert [(i["position"], i["target"], i["text"]) for i in listed] == [
        (1, "next-step", "look behind you"), (2, "next-turn", "first line\nsecond line"), (3, "next-turn", "drop this")]
    edit = _run(["inbox", "edit", "1", added[0]["id"], "--text", "first line, edited"], cli_env)
    assert edit.returncode == 0 and edit.stdout.strip() == f"edited #2 {added[0]['id']}"
    cancel = _run(["inbox", "cancel", "1", added[1]["id"]], cli_env)
    assert cancel.returncode == 0 and cancel.stdout.strip() == f"canceled #3 {added[1]['id']}"
    again = _run(["inbox", "cancel", "1", added[1]["id"]], cli_env)
    assert again.returncode == 1 and f"no pending inbox item '{added[1]['id']}'" in again.stderr
    text = _run(["inbox", "1"], cli_env).stdout
    assert "look behind you" in text and "first line, edited" in text and "drop this" not in text
    with LoopbackServer() as server:
        server.enqueue_sse(sse_chunks_for("*She turns.*", pieces=2))
        env = {**cli_env, "TAVERN_API_BASE": server.base_url, "TAVERN_MODEL": "loop-1"}
        chat = _run(["chat", "Seraphina", "--playthrough", "1", "--say", "and now?"], env)
        assert chat.returncode == 0, chat.stderr
        sent = server.requests[0].json["messages"]
    users = [m["content"] for m in sent if m["role"] == "user"]
    assert users[-3:] == ["look behind you", "first line, edited", "and now?"]
    assert all("drop this" not in m["content"] for m in sent)  # a canceled line never reaches the model
    assert _run(["inbox", "1", "--json"], cli_env).stdout.strip() == "[]"
    bad = _run(["inbox", "add", "1"], cli_env)
    assert bad.returncode == 1 and "needs --text" in bad.stderr


def test_lore_test_takes_the_pending_batch(cli_env: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    book = tmp_path / "book.json"
    book.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": ["lantern"], "content": "The lantern is cursed."}}}))
    alone = json.loads(_run(["lore", "test", str(book), "--input", "hello", "--json"], cli_env).stdout)
    assert [d["fired"] for d in alone] == [False]
    done = _run(["lore", "test", str(book), "--queued", "a lantern flickers", "--input", "hello", "--json"], cli_env)
    assert done.returncode == 0, done.stderr
    [decision] = json.loads(done.stdout)
    assert decision["fired"] and decision["matched_in"] == "input"


def test_say_steer_while_a_step_is_open_queues_a_steer_and_runs_once_it_settles(
        cli_env: dict[str, str], corpus_dir: Path) -> None:  # noqa: F811
    from tavern_tui.engine.events import EventKind, NewEvent
    from tavern_tui.store.store import Store

    assert _run(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], cli_env).returncode == 0
    assert _run(["chat", "Seraphina", "--new", "--say", "hello"], cli_env).returncode == 0  # demo provider
    store = Store(f"sqlite:///{Path(cli_env['TAVERN_HOME']) / 'data' / 'tavern.sqlite3'}")
    try:
        head = store.events.surface_events(1)[-1].session_id
        # Another process's step, as it looks while it streams: it holds the step's lease (this
        # test process, alive), and the log has a header and no settlement.
        lease = store.claims.claim(head, 75.0)
        store.events.append(head, [NewEvent(EventKind.REQUEST_HEADER, None, {"provider": "other", "model": "m"})])
        with LoopbackServer() as server:
            server.enqueue_sse(sse_chunks_for("*She ducks.*", pieces=2))
            env = {**cli_env, "TAVERN_API_BASE": server.base_url, "TAVERN_MODEL": "loop-1"}
            waiting = _start(["chat", "Seraphina", "--playthrough", "1", "--say", "Duck!", "--steer"], env)
            deadline = time.monotonic() + 60
            while not any(e.kind == EventKind.INBOX_SPLICED and e.body.get("target") == "next-step"
                          for e in store.events.surface_events(head)):
                assert waiting.poll() is None, waiting.communicate()
                assert time.monotonic() < deadline, "the steer was never queued"
                time.sleep(0.05)
            assert server.requests == []  # it waits for the open step
            settled = NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant", {"content": "done elsewhere"})
            store.events.append(head, [settled])
            store.claims.release(lease.token)
            out, err = waiting.communicate(timeout=120)
            sent = server.requests[0].json["messages"]
    finally:
        store.close()
    assert waiting.returncode == 0, err
    assert err.count("steer #1") == 1 and out.strip() == "*She ducks.*"
    assert [(m["role"], m["content"]) for m in sent[-2:]] == [("assistant", "done elsewhere"), ("user", "Duck!")]


def test_trace_show_names_the_inbox_events_a_step_consumed(cli_env: dict[str, str], corpus_dir: Path) -> None:  # noqa: F811
    assert _run(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], cli_env).returncode == 0
    assert _run(["chat", "Seraphina", "--new", "--say", "hello"], cli_env).returncode == 0
    queued = json.loads(_run(["inbox", "add", "1", "--text", "queued first", "--json"], cli_env).stdout)
    assert _run(["chat", "Seraphina", "--playthrough", "1", "--say", "then this"], cli_env).returncode == 0
    traces = json.loads(_run(["trace", "list", "--playthrough", "1", "--json"], cli_env).stdout)
    shown = _run(["trace", "show", traces[-1]["id"]], cli_env).stdout
    detail = json.loads(_run(["trace", "show", traces[-1]["id"], "--json"], cli_env).stdout)
    inbox = detail["record"]["inbox"]
    assert [i["id"] for i in inbox["items"]][0] == queued["id"] and len(inbox["items"]) == 2
    line = next(line for line in shown.splitlines() if line.startswith("inbox: claim "))
    assert f"answered item {queued['id']} (queued at " in line
    assert "queued first" not in json.dumps(detail["record"])  # references, never the queued text
    # Where the step's time went, stage by stage, in the order a step runs them (engine.step.STAGES).
    stages = detail["timing"]["stages"]
    assert set(stages) == {"gather", "claim", "assemble", "pre_step", "request", "prepare", "refresh", "admit",
                           "record", "first_byte", "stream"}
    [line] = [line for line in shown.splitlines() if line.startswith("stages: ")]
    assert [part.split(" ")[0] for part in line.removeprefix("stages: ").split(" · ")] == [
        "gather", "claim", "assemble", "pre", "request", "prepare", "refresh", "admit", "record", "first", "stream"]
    assert f"prepare {stages['prepare']:.0f} ms · refresh {stages['refresh']:.0f} ms" in line
    assert line.endswith(f"stream {stages['stream']:.0f} ms")
