"""MCP servers are started only when a turn calls their tools, through the CLI's commands: the tool
list is cached (by the server's command line, in the cache folder), so `tavern tools` and a
turn use the cached list without starting the server, commands that use no tools never start
it, and a call starts it."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from tests.cli.test_cli import SECRET, _run, cli_env  # noqa: F401 - the fixture is used by name
from tests.support.loopback import LoopbackServer, sse_chunks_for, sse_tool_call_chunks

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_lab_server.py")


def _config(tmp_path: Path) -> tuple[Path, Path]:
    """A config whose lab server appends a line to `starts` each time its process starts."""
    starts = tmp_path / "starts.txt"
    wrapper = tmp_path / "lab.sh"
    wrapper.write_text(f"echo started >> {shlex.quote(str(starts))}\n"
                       f"exec {shlex.quote(sys.executable)} {shlex.quote(SERVER)} "
                       f"{shlex.quote(str(tmp_path / 'calls.jsonl'))}\n", encoding="utf-8")
    config = tmp_path / "config.toml"
    config.write_text(f"""
[tools]
allow = ["lab__echo"]

[tools.mcp.lab]
command = "sh"
args = [{json.dumps(str(wrapper))}]
risk = {{ echo = "safe", wipe_notes = "high" }}
""", encoding="utf-8")
    return config, starts


def _starts(starts: Path) -> int:
    return len(starts.read_text(encoding="utf-8").splitlines()) if starts.exists() else 0


def test_tools_uses_the_cached_list_and_other_commands_never_start_the_server(
        cli_env: dict[str, str], corpus_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    config, starts = _config(tmp_path)
    env = {**cli_env, "TAVERN_CONFIG": str(config)}
    first = _run(["tools", "--json"], env)
    assert first.returncode == 0, first.stderr
    assert _starts(starts) == 1  # no cached list yet: started to list its tools
    listed = json.loads(first.stdout)
    assert listed["servers"][0]["state"] == "running"
    again = _run(["tools", "--json"], env)
    assert again.returncode == 0, again.stderr
    assert _starts(starts) == 1  # the fresh cached list: not started
    cached = json.loads(again.stdout)
    assert cached["servers"][0]["state"] == "cached"
    assert cached["tools"] == listed["tools"] and cached["servers"][0]["tools"] == listed["servers"][0]["tools"]
    allowed = {t["name"]: t["allowed"] for t in cached["tools"] if t["source"] == "mcp:lab"}
    assert allowed["lab__wipe_notes"] == "refused"
    for args in (["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], ["sessions", "--json"],
                 ["chat", "Seraphina", "--new", "--say", "hello"], ["show", "1"], ["tree", "1"],
                 ["inbox", "1"]):
        done = _run(args, env)
        assert done.returncode == 0, (args, done.stderr)
    # the demo chat had no endpoint to call tools through: nothing started the server
    assert _starts(starts) == 1


def test_a_turn_offers_the_cached_list_and_a_call_starts_the_server(
        cli_env: dict[str, str], corpus_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    config, starts = _config(tmp_path)
    env = {**cli_env, "TAVERN_CONFIG": str(config)}
    assert _run(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], env).returncode == 0
    assert _run(["tools"], env).returncode == 0 and _starts(starts) == 1  # the list is cached now
    with LoopbackServer() as server:
        chat_env = {**env, "TAVERN_API_BASE": server.base_url, "TAVERN_API_KEY": SECRET}
        server.enqueue_sse(sse_chunks_for("*Seraphina nods.*"))
        plain = _run(["chat", "Seraphina", "--new", "--say", "hello"], chat_env)
        assert plain.returncode == 0, plain.stderr
        assert _starts(starts) == 1  # offered from the cache; no call, no start
        server.enqueue_sse(sse_tool_call_chunks([("call_e", "lab__echo", '{"text": "ping"}')]))
        server.enqueue_sse(sse_chunks_for("*She hears the echo.*"))
        called = _run(["chat", "Seraphina", "--playthrough", "1", "--say", "Echo ping."], chat_env)
        requests = [r.json for r in server.requests]
    assert called.returncode == 0, called.stderr
    assert _starts(starts) == 2  # the call started it
    assert "[tool] lab__echo echo:ping" in called.stderr and called.stdout.strip() == "*She hears the echo.*"
    offered = [t["function"]["name"] for t in requests[0]["tools"]]
    assert "lab__echo" in offered and "lab__wipe_notes" in offered
    assert [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text(encoding="utf-8").splitlines()] == [
        {"tool": "echo", "arguments": {"text": "ping"}}]
