"""MCP stdio servers through the official SDK, against a real server the test starts
(tests/support/mcp_lab_server.py: one safe and one risky tool, a slow one, one that crashes): listing,
a call, a timeout, a crash, a server that never starts; and the guard on a real turn: a call
that is not allowed is not run (the server records no call), the model receives the refusal,
the trace names it; an allowed one runs."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tavern_tui.config import Settings, ToolSettings
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.providers.openai_compat import OpenAICompatProvider
from tavern_tui.service import Tavern
from tavern_tui.tools import ToolFailed
from tavern_tui.tools.mcp_client import McpManager, McpServerConfig
from tests.support.loopback import LoopbackServer, sse_chunks_for, sse_tool_call_chunks

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_lab_server.py")
KEY = "sk-mcp-SECRET-9876543210"


def lab(record: Path, **overrides: Any) -> McpServerConfig:
    options: dict[str, Any] = {"timeout": 5.0, "risk": {"echo": "safe"}}
    options.update(overrides)
    return McpServerConfig("lab", sys.executable, (SERVER, str(record)), **options)


def recorded(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[McpManager]:
    made = McpManager([lab(tmp_path / "calls.jsonl", timeout=1.0)], secrets=[KEY])
    yield made
    made.close()


async def test_listing_is_namespaced_with_schemas_and_risk(manager: McpManager) -> None:
    specs = {s.name: s for s in await manager.tools()}
    assert set(specs) == {"lab__echo", "lab__wipe_notes", "lab__slow", "lab__crash", "lab__environment", "lab__pid"}
    assert specs["lab__echo"].risk == "safe" and specs["lab__wipe_notes"].risk == "unknown"
    assert specs["lab__echo"].parameters["properties"]["text"]["type"] == "string"
    assert specs["lab__echo"].parameters["required"] == ["text"]
    assert manager.status()[0]["state"] == "running"


async def test_started_on_first_use_and_stopped_on_exit(tmp_path: Path) -> None:
    made = McpManager([lab(tmp_path / "calls.jsonl", risk={"pid": "safe"})], secrets=[KEY])
    try:
        assert made.status()[0]["state"] == "new"  # declared, not started: nothing runs until a turn needs it
        specs = {s.name: s for s in await made.tools()}
        assert made.status()[0]["state"] == "running"
        text, _ = await made.call(specs["lab__pid"], {})
        pid = int(text)
        os.kill(pid, 0)  # alive
    finally:
        made.close()
    assert made.status()[0]["state"] == "stopped"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the MCP server (pid {pid}) still runs after close()")


async def test_a_call_and_a_timeout(manager: McpManager, tmp_path: Path) -> None:
    specs = {s.name: s for s in await manager.tools()}
    text, summary = await manager.call(specs["lab__echo"], {"text": "hello"})
    assert text == "echo:hello" and summary == "echo:hello"
    with pytest.raises(ToolFailed) as slow:
        await manager.call(specs["lab__slow"], {"seconds": 4})
    assert slow.value.status == "timeout" and "1 s" in str(slow.value)
    assert recorded(tmp_path / "calls.jsonl")[:2] == [{"tool": "echo", "arguments": {"text": "hello"}},
                                                      {"tool": "slow", "arguments": {"seconds": 4}}]


async def test_a_crash_is_reported_and_its_tools_drop_out(manager: McpManager) -> None:
    specs = {s.name: s for s in await manager.tools()}
    with pytest.raises(ToolFailed) as crashed:
        await manager.call(specs["lab__crash"], {})
    assert crashed.value.status == "unavailable"
    assert await manager.tools() == []
    assert manager.problems and "'lab'" in manager.problems[0] and "crashed" in manager.problems[0]
    assert manager.status()[0]["state"] == "failed"


async def test_a_server_that_cannot_start_is_reported(tmp_path: Path) -> None:
    broken = McpManager([McpServerConfig("ghost", str(tmp_path / "no-such-server"))])
    try:
        assert await broken.tools() == []
        assert "'ghost'" in broken.problems[0] and "failed to start" in broken.problems[0]
    finally:
        broken.close()


async def test_the_api_key_never_reaches_a_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAVERN_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    manager = McpManager([lab(tmp_path / "c.jsonl", env={"LAB_MODE": "test", "LEAK": KEY})], secrets=[KEY])
    try:
        specs = {s.name: s for s in await manager.tools()}
        text, _ = await manager.call(specs["lab__environment"], {})
    finally:
        manager.close()
    seen = json.loads(text)
    assert seen.get("LAB_MODE") == "test" and KEY not in text and "LEAK" not in seen


def turn_tavern(db_url: str, server: LoopbackServer, record: Path, allow: tuple[str, ...] = ()) -> Tavern:
    settings = Settings(db_url=db_url, default_strategy="compat",
                        provider=ProviderSettings(base_url=server.base_url, model="m", api_key=KEY, timeout=5),
                        tools=ToolSettings(allow=allow, mcp=(lab(record),)))
    return Tavern(settings, provider=OpenAICompatProvider(settings.provider, backoff=0.01))


def start(tavern: Tavern, corpus_dir: Path) -> int:
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id or 0
    return tavern.playthroughs.new_playthrough(cid, user_name="Ada").id


WIPE = ("call_w1", "lab__wipe_notes", '{"folder": "journal"}')


async def test_a_disallowed_call_is_not_run_and_the_model_reads_the_refusal(
        db_url: str, tmp_path: Path, corpus_dir: Path) -> None:
    record = tmp_path / "calls.jsonl"
    with LoopbackServer() as server:
        tavern = turn_tavern(db_url, server, record)
        try:
            pid = start(tavern, corpus_dir)
            server.enqueue_sse(sse_tool_call_chunks([WIPE]))
            server.enqueue_sse(sse_chunks_for("I will not touch your journal."))
            [u async for u in tavern.steps.send(pid, "Clear my journal.")]
            offered = [t["function"]["name"] for t in server.requests[0].json["tools"]]
            second = server.requests[1].json["messages"]
        finally:
            tavern.close()
    assert "lab__wipe_notes" in offered
    assert recorded(record) == []  # the server side ran nothing
    refusal = second[-1]
    assert refusal["role"] == "tool" and refusal["tool_call_id"] == "call_w1"
    assert "not allowed" in json.loads(refusal["content"])["refused"]


async def test_the_trace_names_a_refusal_and_an_allowed_call_runs(db_url: str, tmp_path: Path,
                                                                   corpus_dir: Path) -> None:
    record = tmp_path / "calls.jsonl"
    with LoopbackServer() as server:
        tavern = turn_tavern(db_url, server, record)
        try:
            pid = start(tavern, corpus_dir)
            server.enqueue_sse(sse_tool_call_chunks([WIPE]))
            server.enqueue_sse(sse_chunks_for("No."))
            [u async for u in tavern.steps.send(pid, "Clear my journal.")]
            sid = tavern.playthroughs.playthrough(pid).session_id
            traces = [e for e in tavern.store.events.surface_events(sid) if e.kind == "trace/request"]
            shown = tavern.traces.trace(f"{traces[1].ref[0]}:{traces[1].ref[1]}")
        finally:
            tavern.close()
    [named] = traces[1].body["tool_results"]
    assert named["status"] == "refused" and named["name"] == "lab__wipe_notes"
    assert "[tools] allow" in named["reason"]
    assert "refused" in json.dumps(shown, default=str)

    with LoopbackServer() as server:
        tavern = turn_tavern(db_url.replace(".sqlite3", "-2.sqlite3"), server, record, allow=("lab__wipe_notes",))
        try:
            pid = start(tavern, corpus_dir)
            server.enqueue_sse(sse_tool_call_chunks([WIPE]))
            server.enqueue_sse(sse_chunks_for("Done."))
            [u async for u in tavern.steps.send(pid, "Clear my journal.")]
            second = server.requests[1].json["messages"]
        finally:
            tavern.close()
    assert recorded(record) == [{"tool": "wipe_notes", "arguments": {"folder": "journal"}}]
    assert second[-1]["content"] == "wiped journal"


async def test_arguments_failing_the_schema_are_not_run(db_url: str, tmp_path: Path, corpus_dir: Path) -> None:
    record = tmp_path / "calls.jsonl"
    with LoopbackServer() as server:
        tavern = turn_tavern(db_url, server, record)
        try:
            pid = start(tavern, corpus_dir)
            server.enqueue_sse(sse_tool_call_chunks([("call_e", "lab__echo", '{"text": 42}'),
                                                     ("call_f", "lab__echo", '{"text": "ok"')]))
            server.enqueue_sse(sse_chunks_for("Hm."))
            [u async for u in tavern.steps.send(pid, "Echo something.")]
            second = server.requests[1].json["messages"]
        finally:
            tavern.close()
    assert recorded(record) == []
    schema_error, json_error = (json.loads(m["content"])["error"] for m in second[-2:])
    assert "at text" in schema_error and "is not of type 'string'" in schema_error
    assert "not valid JSON" in json_error
