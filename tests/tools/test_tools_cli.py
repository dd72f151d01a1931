"""Tools from the command line, run as `tests/support/cli.py` runs commands (issue 19 §6, and "tried as
a new user would"): enable `roll_dice`, ask for initiative against a server that answers with a tool
call, see the roll in the chat, in `tavern show` and in `tavern trace show`; `tavern tools`
lists risk and allowed state; a call the config does not allow is refused by the CLI."""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

from tests.cli.test_cli import SECRET, _run, cli_env  # noqa: F401 - the fixture is used by name
from tests.support.loopback import LoopbackServer, sse_chunks_for, sse_tool_call_chunks

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_lab_server.py")


def test_a_roll_for_initiative_shows_in_chat_show_and_trace(cli_env: dict[str, str], corpus_dir: Path,  # noqa: F811
                                                             tmp_path: Path) -> None:
    assert _run(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], cli_env).returncode == 0
    env = {**cli_env, "TAVERN_TOOLS": "roll_dice"}
    with LoopbackServer() as server:
        call = '{"expression": "1d20+2", "seed": 20261203}'
        server.enqueue_sse(sse_tool_call_chunks([("call_i", "roll_dice", call)]))
        server.enqueue_sse(sse_chunks_for("*Seraphina moves first.*"))
        chat = _run(["chat", "Seraphina", "--say", "Roll for initiative!"],
                    {**env, "TAVERN_API_BASE": server.base_url, "TAVERN_API_KEY": SECRET})
        requests = [r.json for r in server.requests]
    assert chat.returncode == 0, chat.stderr
    assert "[tool] roll_dice 1d20+2 → [" in chat.stderr and chat.stdout.strip() == "*Seraphina moves first.*"
    assert [t["function"]["name"] for t in requests[0]["tools"]] == ["roll_dice"]

    shown = json.loads(_run(["show", "1", "--json"], env).stdout)["messages"]
    calls = [m for m in shown if m.get("tool_calls")]
    results = [m for m in shown if m.get("tool_result")]
    assert calls[0]["tool_calls"][0]["function"] == {"name": "roll_dice",
                                                     "arguments": '{"expression": "1d20+2", "seed": 20261203}'}
    [result] = results
    assert result["role"] == "tool" and result["tool_result"]["toolCallId"] == "call_i"
    # The roll by hand: one d20 is 1 + floor(r * 20), r the first float of Random(20261203).
    die = 1 + math.floor(random.Random(20261203).random() * 20)
    assert die == 18
    assert json.loads(result["content"]) == {"expression": "1d20+2", "rolls": [18], "bonus": 2, "total": 20,
                                             "seed": 20261203}
    assert result["tool_result"]["summary"] == "1d20+2 → [18] + 2 = 20"
    text = _run(["show", "1"], env).stdout
    assert "roll_dice 1d20+2 → [18] + 2 = 20" in text

    traces = json.loads(_run(["trace", "list", "--playthrough", "1", "--json"], env).stdout)
    assert len(traces) == 2
    second = json.loads(_run(["trace", "show", traces[1]["id"], "--json"], env).stdout)
    assert "roll_dice" in json.dumps(second)
    verified = _run(["trace", "verify", traces[1]["id"]], env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "tools ok" in verified.stdout
    # The preview lists what the next request would carry: the built-ins, then each MCP server's.
    config = tmp_path / "config.toml"
    config.write_text(f"""
[tools.mcp.lab]
command = {json.dumps(sys.executable)}
args = [{json.dumps(SERVER)}, {json.dumps(str(tmp_path / "calls.jsonl"))}]
risk = {{ echo = "safe", wipe_notes = "high" }}
""", encoding="utf-8")
    previewed = _run(["preview", "1"], {**env, "TAVERN_CONFIG": str(config)})
    assert previewed.returncode == 0, previewed.stderr
    line = next(x for x in previewed.stdout.splitlines() if x.startswith("tools offered: "))
    assert line.startswith("tools offered: roll_dice (safe, builtin), lab__echo (safe, mcp:lab), ")
    assert "lab__wipe_notes (high, mcp:lab, refused)" in line and "lab__crash (unknown, mcp:lab, refused)" in line
    listed = json.loads(_run(["preview", "1", "--json"], env).stdout)["tools"]
    assert listed == [{"name": "roll_dice", "risk": "safe", "source": "builtin", "allowed": "allowed"}]
    assert "tools offered: none" in _run(["preview", "1"], cli_env).stdout
    for trace, sent in zip(traces, requests):  # export writes each step's body as posted, tools included
        target = tmp_path / f"step-{trace['id'].replace(':', '-')}.json"
        exported = _run(["trace", "export", trace["id"], str(target)], env)
        assert exported.returncode == 0, exported.stderr
        assert "messages, 1 tool)" in exported.stdout
        assert json.loads(target.read_text(encoding="utf-8")) == sent


def test_tools_lists_risk_and_allowed_state(cli_env: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    config = tmp_path / "config.toml"
    config.write_text(f"""
[tools]
enabled = ["lore_search"]
allow = ["lab__slow"]
max_steps = 3

[tools.mcp.lab]
command = {json.dumps(sys.executable)}
args = [{json.dumps(SERVER)}, {json.dumps(str(tmp_path / "calls.jsonl"))}]
risk = {{ echo = "safe", wipe_notes = "high" }}
""", encoding="utf-8")
    listed = _run(["tools", "--json"], {**cli_env, "TAVERN_CONFIG": str(config)})
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    state = {t["name"]: (t["risk"], t["allowed"]) for t in data["tools"]}
    assert state["roll_dice"] == ("safe", "off") and state["lore_search"] == ("safe", "allowed")
    assert state["lab__echo"] == ("safe", "allowed") and state["lab__wipe_notes"] == ("high", "refused")
    assert state["lab__crash"] == ("unknown", "refused")  # the CLI asks nobody: refused unless allowed
    assert state["lab__slow"] == ("unknown", "allowed")
    assert data["servers"][0]["state"] == "running" and data["max_steps"] == 3
    plain = _run(["tools"], {**cli_env, "TAVERN_CONFIG": str(config)}).stdout
    assert "lab__wipe_notes" in plain and "high" in plain


def test_a_bad_tools_table_names_the_field(cli_env: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    config = tmp_path / "config.toml"
    config.write_text('[tools]\nenabled = ["summon_demon"]\n', encoding="utf-8")
    failed = _run(["tools"], {**cli_env, "TAVERN_CONFIG": str(config)})
    assert failed.returncode != 0
    assert "tools.enabled" in failed.stderr and "summon_demon" in failed.stderr and str(config) in failed.stderr
