"""A tool step's request sent again exactly (issue 19 §5 and seed 000 §4): the `tools` array
it carried is kept with its request header (verified against the trace's schema hash), written
back out by `tavern trace export`, and sent again by a replay; a configured secret never enters
the array; a trace that kept names and hash only still verifies but is not sent again."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any

import pytest

from tavern_tui.engine.events import EventKind
from tavern_tui.engine.step import StepSettled, ToolResultStored
from tavern_tui.errors import TavernError
from tavern_tui.tools import Toolbox, ToolSpec
from tavern_tui.tools.builtin import RollDice
from tavern_tui.tools.guard import Guard
from tests.support.loopback import LoopbackServer, sse_chunks_for, sse_tool_call_chunks
from tests.tools.test_tool_turns import KEY, ROLL, drain, make_tavern, playthrough, session_events  # noqa: F401


def trace_ids(tavern: Any, pid: int) -> list[str]:
    return [f"{e.ref[0]}:{e.ref[1]}" for e in session_events(tavern, pid) if e.kind == "trace/request"]


async def test_export_and_replay_send_the_tools_array_sent(db_url: str, server: LoopbackServer,  # noqa: F811
                                                           playthrough: Any) -> None:  # noqa: F811
    tavern = make_tavern(db_url, server)
    pid = playthrough(tavern)
    server.enqueue_sse(sse_tool_call_chunks([ROLL]))
    server.enqueue_sse(sse_chunks_for("You act first."))
    await drain(tavern.steps.send(pid, "Roll for initiative!"))
    first, second = (r.json for r in server.requests)
    assert [t["function"]["name"] for t in first["tools"]] == ["roll_dice", "lore_search"]

    ids = trace_ids(tavern, pid)
    for trace_id, sent in zip(ids, (first, second)):
        shown = tavern.traces.request_bodies(trace_id)
        assert shown["tools_status"] == "ok" and shown["tools"] == sent["tools"]
        assert shown["body"] == sent  # the whole body as posted, tools included
    # Verifying every request at once reads each header's tools array too (it once reported them missing).
    verdicts = dict(tavern.traces.verify_all())
    assert [(verdicts[i].ok, verdicts[i].tools_status) for i in ids] == [(True, "ok"), (True, "ok")]
    # The request answered with tool calls only is timed by them (it had no text to time it by).
    assert {"first_byte", "stream"} <= set(tavern.traces.trace(ids[0])["timing"]["stages"])

    # Replay of the second step (the one answering the tool result): the same array again.
    server.enqueue_sse(sse_chunks_for("You still act first."))
    updates = await drain(tavern.traces.replay(ids[1]))
    replayed = server.requests[-1].json
    assert replayed["tools"] == second["tools"] and replayed["messages"] == second["messages"]
    assert any(isinstance(u, StepSettled) for u in updates)
    new_trace = [e for e in session_events(tavern, pid) if e.kind == "trace/request"][-1]
    schemas = json.dumps(second["tools"], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert new_trace.body["tools"]["sha256"] == hashlib.sha256(schemas.encode()).hexdigest()
    assert new_trace.body["replay_of"] == ids[1]
    tavern.close()


async def test_a_replayed_tool_call_runs_through_todays_toolbox(db_url: str, server: LoopbackServer,  # noqa: F811
                                                                playthrough: Any) -> None:  # noqa: F811
    tavern = make_tavern(db_url, server)
    pid = playthrough(tavern)
    server.enqueue_sse(sse_tool_call_chunks([ROLL]))
    server.enqueue_sse(sse_chunks_for("Seven."))
    await drain(tavern.steps.send(pid, "Roll."))
    first_id = trace_ids(tavern, pid)[0]
    sent = server.requests[0].json
    server.enqueue_sse(sse_tool_call_chunks([("call_x", "roll_dice", '{"expression": "d6", "seed": 7}')]))
    server.enqueue_sse(sse_chunks_for("Two."))
    updates = await drain(tavern.traces.replay(first_id))
    [stored] = [u for u in updates if isinstance(u, ToolResultStored)]
    assert json.loads(stored.event.content)["rolls"] == [2]  # 1 + floor(Random(7).random() * 6)
    again, answer = server.requests[-2].json, server.requests[-1].json
    assert again["tools"] == sent["tools"] and answer["tools"] == sent["tools"]
    assert answer["messages"][-1] == {"role": "tool", "tool_call_id": "call_x", "content": stored.event.content}
    tavern.close()


class Leaky:
    """A tool whose description holds the API key (a careless MCP server could do this)."""

    spec = ToolSpec("leaky", f"uses key {KEY} to look things up", {"type": "object", "properties": {}}, "safe")

    async def call(self, arguments: dict[str, Any]) -> tuple[str, str]:
        return "{}", "nothing"


async def test_no_secret_enters_the_tools_array(db_url: str, server: LoopbackServer, playthrough: Any,  # noqa: F811
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    tavern = make_tavern(db_url, server)
    pid = playthrough(tavern)
    monkeypatch.setattr(tavern.tools, "toolbox", lambda _pid: Toolbox([RollDice(), Leaky()], Guard(secrets=[KEY])))
    server.enqueue_sse(sse_chunks_for("Hello."))
    await drain(tavern.steps.send(pid, "Hi."))
    sent = server.requests[0].json
    assert sent["tools"][1]["function"]["description"] == "uses key [secret] to look things up"
    stored = json.dumps([e.body for e in session_events(tavern, pid)])
    assert KEY not in stored and KEY not in json.dumps(sent)
    assert tavern.traces.request_bodies(trace_ids(tavern, pid)[0])["tools"] == sent["tools"]
    tavern.close()


async def test_a_changed_or_unrecorded_array_is_never_sent(db_url: str, server: LoopbackServer,  # noqa: F811
                                                           playthrough: Any) -> None:  # noqa: F811
    tavern = make_tavern(db_url, server)
    pid = playthrough(tavern)
    server.enqueue_sse(sse_chunks_for("Hello."))
    await drain(tavern.steps.send(pid, "Hi."))
    [trace_id] = trace_ids(tavern, pid)
    header = next(e for e in session_events(tavern, pid) if e.kind == EventKind.REQUEST_HEADER)
    body = dict(header.body)

    def rewrite(tools: dict[str, Any]) -> None:  # as an old version (or a tampering hand) left the header
        tampered = json.dumps({**body, "tools": tools})
        if db_url.startswith("sqlite"):
            with sqlite3.connect(db_url.removeprefix("sqlite:///")) as db:  # bypass the append-only guard
                db.execute("DROP TRIGGER IF EXISTS events_no_update")
                db.execute("UPDATE events SET body = ? WHERE session_id = ? AND seq = ?", (tampered, *header.ref))
        else:  # PostgreSQL: the same bypass, its guard being a row trigger
            import sqlalchemy

            with tavern.store.engine.begin() as conn:
                conn.execute(sqlalchemy.text("ALTER TABLE events DISABLE TRIGGER USER"))
                conn.execute(sqlalchemy.text("UPDATE events SET body = :b WHERE session_id = :s AND seq = :q"),
                             {"b": tampered, "s": header.ref[0], "q": header.ref[1]})
                conn.execute(sqlalchemy.text("ALTER TABLE events ENABLE TRIGGER USER"))

    rewrite({"names": body["tools"]["names"], "sha256": body["tools"]["sha256"]})
    check = tavern.traces.verify_trace(trace_id)
    assert check.ok and check.tools_status == "unrecorded" and not check.sendable
    assert tavern.traces.request_bodies(trace_id)["body"] is None
    with pytest.raises(TavernError, match="tools unrecorded"):
        await drain(tavern.traces.replay(trace_id))

    changed = json.loads(json.dumps(body["tools"]))
    changed["offered"][0]["function"]["description"] = "Roll loaded dice."
    rewrite(changed)
    check = tavern.traces.verify_trace(trace_id)
    assert not check.ok and check.tools_status == "changed"
    assert len(server.requests) == 1  # nothing was sent again
    tavern.close()


async def test_a_retry_without_tools_exports_without_them(db_url: str, server: LoopbackServer,  # noqa: F811
                                                          playthrough: Any) -> None:  # noqa: F811
    tavern = make_tavern(db_url, server)
    pid = playthrough(tavern)
    server.enqueue_json(400, {"error": {"message": "this model does not support tools"}})
    server.enqueue_sse(sse_chunks_for("No dice."))
    await drain(tavern.steps.send(pid, "Roll?"))
    first, retry = (r.json for r in server.requests)
    assert "tools" in first and "tools" not in retry
    records = [e for e in session_events(tavern, pid) if e.kind == "trace/request"]
    assert [r.body.get("attempt", 1) for r in records] == [1, 2]
    for record, sent in zip(records, (first, retry)):
        shown = tavern.traces.request_bodies(f"{record.ref[0]}:{record.ref[1]}")
        assert shown["body"] == sent  # each attempt as it was posted: the retry without tools
    server.enqueue_sse(sse_chunks_for("Still no dice."))
    await drain(tavern.traces.replay(f"{records[1].ref[0]}:{records[1].ref[1]}"))
    assert "tools" not in server.requests[-1].json and server.requests[-1].json["messages"] == retry["messages"]
    tavern.close()
