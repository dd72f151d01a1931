"""Trace (issue 6): every request recorded by reference and hash, verified against the body the
loopback server really received; tampering is reported; retries keep their omissions."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.service import Tavern
from tests.support.cli import run_cli
from tests.support.loopback import LoopbackServer, sse_chunks_for

SECRET = "sk-trace-secret-4242"
BOOK = {"entries": {
    "0": {"uid": 0, "key": ["lantern"], "content": "The lantern is cursed.", "position": 4, "depth": 1, "role": 0},
    "1": {"uid": 1, "key": ["storm"], "content": "A storm is coming.", "position": 0},
}}



def playing_with_lore(server: LoopbackServer, db_url: str, corpus_dir: Path, tmp_path: Path, key: str,
                      book: dict) -> tuple[Tavern, int]:
    """A service on the loopback server with Seraphina, the ST default preset and `book` as chat lore."""
    settings = Settings(db_url=db_url, provider=ProviderSettings(base_url=server.base_url, model="loop-1",
                                                                 api_key=key, timeout=10))
    service = Tavern(settings)
    path = tmp_path / "Lanterns.json"
    path.write_text(json.dumps(book))
    card, preset, lore = service.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png",
                                                       corpus_dir / "presets" / "st_openai_default_staging.json", path])
    assert card.ok and preset.ok and lore.ok
    pid = service.playthroughs.new_playthrough(card.id, user_name="Ann").id
    service.presets.bind_preset(pid, preset.id)
    service.lore.bind_world_book(lore.id, "playthrough", pid)
    return service, pid


@pytest.fixture
def live(server: LoopbackServer, db_url: str, corpus_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    service, pid = playing_with_lore(server, db_url, corpus_dir, tmp_path, SECRET, BOOK)
    yield service, pid
    service.close()


async def say(service: Tavern, pid: int, text: str) -> None:
    async for _ in service.steps.send(pid, text):
        pass


@pytest.mark.parametrize("strategy", ["compat", "preset-roles-first", "preset-slots-first", "projection"])
async def test_verify_rebuilds_exactly_what_the_server_received(live, server: LoopbackServer, strategy: str) -> None:  # type: ignore[no-untyped-def]
    service, pid = live
    service.strategies.apply_strategy(pid, strategy)
    for reply in ("One.", "Two."):
        server.enqueue_sse(sse_chunks_for(reply))
    await say(service, pid, "I light the lantern.")  # fires the @depth entry
    await say(service, pid, "Is a storm coming?")
    traces = service.traces.traces(pid)
    assert [t.strategy for t in traces] == [strategy, strategy] and all(t.outcome == "ok" for t in traces)
    for trace, request in zip(traces, server.requests):
        result = service.traces.verify_trace(trace.id)
        assert result.ok, result.checks
        assert result.messages == request.json["messages"]  # the exact array sent
        sent_config = {k: request.json[k] for k in result.config}
        assert sent_config == result.config
        assert trace.usage == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    shown = service.traces.trace(traces[0].id)
    fired = {(d["uid"], d["reason"]) for d in shown["world_info"]["fired"]}
    assert (0, "key") in fired
    # No secret in any trace or header.
    assert SECRET not in json.dumps([service.traces.trace(t.id) for t in traces])


async def test_a_tampered_body_is_reported_changed(live, server: LoopbackServer, db_url: str) -> None:  # type: ignore[no-untyped-def]
    service, pid = live
    server.enqueue_sse(sse_chunks_for("Hello."))
    await say(service, pid, "Hi there.")
    [trace] = service.traces.traces(pid)
    record = service.traces.trace(trace.id)["record"]
    user = next(m for m in record["messages"] if m["source"] == "input")
    tampered = json.dumps({"content": "Something else."})
    if db_url.startswith("sqlite"):
        path = db_url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as db:  # bypass the append-only guard, in this test only
            db.execute("DROP TRIGGER IF EXISTS events_no_update")
            db.execute("UPDATE events SET body = ? WHERE session_id = ? AND seq = ?", (tampered, *user["ref"]))
    else:  # PostgreSQL: the same bypass, its guard being a row trigger
        import sqlalchemy

        with service.ctx.store.engine.begin() as conn:
            conn.execute(sqlalchemy.text("ALTER TABLE events DISABLE TRIGGER USER"))
            conn.execute(sqlalchemy.text("UPDATE events SET body = :b WHERE session_id = :s AND seq = :q"),
                         {"b": tampered, "s": user["ref"][0], "q": user["ref"][1]})
            conn.execute(sqlalchemy.text("ALTER TABLE events ENABLE TRIGGER USER"))
    result = service.traces.verify_trace(trace.id)
    assert not result.ok
    changed = [c for c in result.checks if c.status != "ok"]
    assert [(c.status, list(c.ref)) for c in changed] == [("changed", user["ref"])]
    assert result.messages[changed[0].position] is None  # never silently replaced


async def test_a_retry_without_a_rejected_parameter_is_recorded(live, server: LoopbackServer) -> None:  # type: ignore[no-untyped-def]
    service, pid = live
    server.enqueue_json(400, {"error": {"message": "Unsupported parameter: 'temperature' is not supported with this "
                                                   "model.", "type": "invalid_request_error", "param": "temperature",
                                        "code": "unsupported_parameter"}})
    server.enqueue_sse(sse_chunks_for("Fine."))
    await say(service, pid, "Hello?")
    # One record per provider request: the refused one and its retry, which names the omission.
    trace, retry = service.traces.traces(pid)
    assert (trace.attempt, retry.attempt, retry.retry_of) == (1, 2, trace.id)
    assert trace.outcome == "retried (400)" and retry.outcome == "ok"
    assert "temperature" in trace.config and trace.omitted == {}
    assert "temperature" not in retry.config and "temperature" in retry.omitted
    assert retry.config == {k: v for k, v in server.requests[1].json.items()
                            if k not in ("model", "messages", "stream", "stream_options")}
    assert len(trace.attempts) == 2
    assert "temperature" not in server.requests[1].json
    assert service.traces.trace(retry.id)["config_adjusted"]["omitted"].keys() == {"temperature"}
    # Both requests sent the same messages: both verify against the log.
    for record in (trace, retry):
        result = service.traces.verify_trace(record.id)
        assert result.ok and result.messages == server.requests[0].json["messages"]


def test_cli_trace_verify_exits_non_zero_on_a_mismatch(tmp_path: Path, corpus_dir: Path) -> None:
    home = tmp_path / "home"
    env = {"TAVERN_HOME": str(home), "PATH": "/usr/bin:/bin"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(args, env)

    assert run("import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")).returncode == 0
    assert run("chat", "Seraphina", "--say", "Hello").returncode == 0  # the offline demo model
    listed = json.loads(run("trace", "list", "--json").stdout)
    assert len(listed) == 1 and listed[0]["outcome"] == "ok"
    ok = run("trace", "verify", "--all")
    assert ok.returncode == 0 and "verified" in ok.stdout
    ref = next(m for m in json.loads(run("trace", "show", listed[0]["id"], "--json").stdout)["record"]["messages"]
               if m["source"] == "input")["ref"]
    replayed = run("trace", "replay", listed[0]["id"])
    assert replayed.returncode == 0, replayed.stderr
    assert len(json.loads(run("trace", "list", "--json").stdout)) == 2
    with sqlite3.connect(home / "data" / "tavern.sqlite3") as db:
        db.execute("DROP TRIGGER IF EXISTS events_no_update")
        db.execute("UPDATE events SET body = '{\"content\":\"x\"}' WHERE session_id = ? AND seq = ?", ref)
    bad = run("trace", "verify", listed[0]["id"])
    assert bad.returncode == 1 and "MISMATCH" in bad.stdout and "changed" in bad.stdout
    refused = run("trace", "replay", listed[0]["id"])
    assert refused.returncode == 1 and "does not verify" in refused.stderr


async def test_replay_sends_the_same_bytes_as_a_sibling_and_links_the_trace(live, server: LoopbackServer) -> None:  # type: ignore[no-untyped-def]
    service, pid = live
    service.strategies.apply_strategy(pid, "projection")
    server.enqueue_sse(sse_chunks_for("First answer."))
    server.enqueue_sse(sse_chunks_for("Second answer."))
    await say(service, pid, "I light the lantern.")
    [original] = service.traces.traces(pid)
    async for _ in service.traces.replay(original.id, model="loop-2"):
        pass
    first, second = server.requests
    assert second.json["messages"] == first.json["messages"]
    assert second.json["model"] == "loop-2"
    assert {k: second.json[k] for k in original.config} == original.config
    # A new sibling of the replayed reply; the new trace names the old one.
    assert service.timeline.swipe_state(pid).label == "2/2"
    assert [m.content for m in service.playthroughs.messages(pid)][-1] == "Second answer."
    replayed = service.traces.traces(pid)[-1]
    assert service.traces.trace(replayed.id)["record"]["replay_of"] == original.id
    assert service.traces.verify_trace(replayed.id).ok
