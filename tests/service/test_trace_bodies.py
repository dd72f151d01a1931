"""Trace bodies on demand (issue 24 item 1; seed 000 §4, §6: a trace's details cold-read and verify
the referenced bodies, and nothing fills in a missing one): `tavern trace show ID --bodies
[--json]` and `tavern trace export ID FILE` print and write the request exactly as the loopback
server received it, for every strategy, a retry, a continue, an impersonation and a replay; a
tampered body is reported "changed" with a non-zero exit and is never filled in."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest

from tavern_tui.cli import main
from tests.service.test_trace import playing_with_lore
from tests.support.loopback import LoopbackServer, sse_chunks_for

BOOK = {"entries": {
    "0": {"uid": 0, "key": ["lantern"], "content": "The lantern is cursed.", "position": 4, "depth": 1, "role": 0},
}}
# OpenAI's answer to `temperature` on a model that takes only the default (its error reference).
REJECT_TEMPERATURE = {"error": {"message": "Unsupported value: 'temperature' does not support 0.2 with this model. "
                                           "Only the default (1) value is supported.",
                                "type": "invalid_request_error", "param": "temperature", "code": "unsupported_value"}}



@pytest.fixture
def live(server: LoopbackServer, db_url: str, corpus_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    service, pid = playing_with_lore(server, db_url, corpus_dir, tmp_path, "sk-bodies-secret-77", BOOK)
    yield service, pid
    service.close()


def cli(db_url: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--db", db_url, *args], out, err)
    return code, out.getvalue(), err.getvalue()


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


@pytest.mark.parametrize("strategy", ["compat", "preset-roles-first", "preset-slots-first", "projection"])
async def test_bodies_equal_what_the_server_received(live, server: LoopbackServer, db_url: str, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                     strategy: str) -> None:
    service, pid = live
    service.strategies.apply_strategy(pid, strategy)
    server.enqueue_json(400, REJECT_TEMPERATURE)  # the first request is refused and retried without it
    for reply in ("One.", "Two", "Me, again.", "Replayed."):
        server.enqueue_sse(sse_chunks_for(reply))
    await drain(service.steps.send(pid, "I light the lantern."))
    await drain(service.steps.continue_reply(pid))
    await drain(service.steps.impersonate(pid))
    first = service.traces.traces(pid)[0]
    await drain(service.traces.replay(first.id))
    traces = service.traces.traces(pid)
    generations = [(t.generation, t.attempt) for t in traces]
    assert generations == [("normal", 1), ("normal", 2), ("continue", 1), ("impersonate", 1), ("regenerate", 1)]
    assert len(server.requests) == len(traces)
    assert "temperature" in server.requests[0].json and "temperature" not in server.requests[1].json
    for n, (trace, request) in enumerate(zip(traces, server.requests)):
        code, out, err = cli(db_url, "trace", "show", trace.id, "--bodies", "--json")
        assert code == 0, err
        shown = json.loads(out)
        assert shown["ok"] is True and {c["status"] for c in shown["checks"]} == {"ok"}
        assert shown["messages"] == request.json["messages"]  # the exact array the server parsed
        assert shown["body"] == request.json  # the whole body: model, stream fields, call config
        exported = tmp_path / f"request-{n}.json"
        code, _out, err = cli(db_url, "trace", "export", trace.id, str(exported))
        assert code == 0, err
        assert json.loads(exported.read_text(encoding="utf-8")) == request.json
        code, text, _err = cli(db_url, "trace", "show", trace.id, "--bodies")
        assert code == 0
        # Every message printed whole with its role; the input (and the continued text) verbatim.
        assert text.count("--- [") == len(request.json["messages"])
        for message in request.json["messages"]:
            assert message["content"] in text
    assert shown["omitted"] == {} and service.traces.request_bodies(traces[1].id)["omitted"].keys() == {"temperature"}


async def test_a_tampered_body_prints_changed_exits_1_and_writes_nothing(live, server: LoopbackServer,  # type: ignore[no-untyped-def]
                                                                        db_url: str, tmp_path: Path) -> None:
    service, pid = live
    server.enqueue_sse(sse_chunks_for("Hello."))
    await drain(service.steps.send(pid, "Hi there, I am Ann."))
    [trace] = service.traces.traces(pid)
    record = service.traces.trace(trace.id)["record"]
    position, user = next((i, m) for i, m in enumerate(record["messages"]) if m["source"] == "input")
    with sqlite3.connect(db_url.removeprefix("sqlite:///")) as db:  # bypass the append-only guard, in this test only
        db.execute("DROP TRIGGER IF EXISTS events_no_update")
        db.execute("UPDATE events SET body = ? WHERE session_id = ? AND seq = ?",
                   (json.dumps({"content": "Something else entirely."}), *user["ref"]))
    code, out, err = cli(db_url, "trace", "show", trace.id, "--bodies", "--json")
    assert code == 1
    shown = json.loads(out)
    assert shown["ok"] is False and shown["body"] is None
    assert shown["messages"][position] is None  # never filled in
    assert [c["status"] for c in shown["checks"]].count("changed") == 1
    assert shown["checks"][position]["status"] == "changed"
    # The messages that still verify are printed as sent.
    assert shown["messages"][:position] == server.requests[0].json["messages"][:position]
    code, text, err = cli(db_url, "trace", "show", trace.id, "--bodies")
    assert code == 1 and "CHANGED" in text and "changed" in err
    assert "Something else entirely." not in text and "Hi there, I am Ann." not in text
    target = tmp_path / "out.json"
    code, _out, err = cli(db_url, "trace", "export", trace.id, str(target))
    assert code == 1 and "changed" in err and not target.exists()


async def test_a_missing_body_prints_missing_and_exits_1(live, server: LoopbackServer, db_url: str) -> None:  # type: ignore[no-untyped-def]
    service, pid = live
    service.strategies.apply_strategy(pid, "projection")  # its request-only array lives in request/assembly
    server.enqueue_sse(sse_chunks_for("Hello."))
    await drain(service.steps.send(pid, "Hi there."))
    [trace] = service.traces.traces(pid)
    record = service.traces.trace(trace.id)["record"]
    ref = record["messages"][0]["ref"]
    with sqlite3.connect(db_url.removeprefix("sqlite:///")) as db:  # bypass the append-only guard, in this test only
        db.execute("DROP TRIGGER IF EXISTS events_no_delete")
        db.execute("DELETE FROM events WHERE session_id = ? AND seq = ?", ref)
    code, out, err = cli(db_url, "trace", "show", trace.id, "--bodies", "--json")
    shown = json.loads(out)
    assert code == 1 and shown["body"] is None
    assert {c["status"] for c in shown["checks"]} == {"missing"}  # every message was in that one event
    assert shown["messages"] == [None] * len(server.requests[0].json["messages"])
    code, text, err = cli(db_url, "trace", "show", trace.id, "--bodies")
    assert code == 1 and "MISSING" in text and "missing" in err
