"""`tavern mvu init | parse | apply` and `tavern vars --json`'s `mvu`, through the CLI (issue 18 item 6).

Expected values: the demo card's `[InitVar]1st` entry and second greeting (`_.set("理.好感度",0,15)`), MVU's
`extractCommands` (names as written, reason after `//`) and `updateVariables` (`add` on a value with description).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.loopback import LoopbackServer, sse_chunks_for


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env)


@pytest.fixture
def cli_env(isolated_profile: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env["TAVERN_HOME"] = str(isolated_profile)
    return env


@pytest.fixture
def demo_card(corpus_dir: Path) -> Path:
    return corpus_dir / "stateful" / "qingkong_li_mvu.png"


def test_init_the_demo_card_on_its_second_greeting(cli_env: dict[str, str], demo_card: Path, tmp_path: Path) -> None:
    # Greetings count from 1, as the chat's swipe counter shows them: 2 is the first alternate greeting.
    done = _run(["mvu", "init", str(demo_card), "--greeting", "2", "--user", "Ann", "--json"], cli_env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    stat = result["record"]["stat_data"]
    assert stat["理"]["好感度"][0] == 15
    assert stat["user"]["名字"] == "Ann"  # "<user>" in the [InitVar] content, macro-substituted
    assert result["changes"][1] == {"type": "set", "path": "理.好感度", "old": 0, "new": 15, "reason": "故事开始的设定",
                                    "display": "0->15 (故事开始的设定)"}
    first = json.loads(_run(["mvu", "init", str(demo_card), "--json"], cli_env).stdout)
    assert first["record"]["stat_data"]["理"]["好感度"][0] == 0  # the first greeting runs no command
    text = _run(["mvu", "init", str(demo_card), "--greeting", "2"], cli_env).stdout
    assert "changed 理.好感度: 0 → 15 (故事开始的设定)" in text
    bad = _run(["mvu", "init", str(demo_card), "--greeting", "9"], cli_env)
    assert bad.returncode != 0 and "no greeting 9 (the card has 4: 1 to 4)" in bad.stderr
    zero = _run(["mvu", "init", str(demo_card), "--greeting", "0"], cli_env)
    assert zero.returncode != 0 and "--greeting counts from 1" in zero.stderr
    batch = tmp_path / "cards.jsonl"
    batch.write_text(json.dumps(str(demo_card)) + "\n" + json.dumps(str(tmp_path / "missing.png")) + "\n")
    lines = _run(["mvu", "init", "--batch", str(batch), "--greeting", "2"], cli_env)
    assert lines.returncode == 1
    out = [json.loads(x) for x in lines.stdout.splitlines()]
    assert out[0]["record"]["stat_data"]["理"]["好感度"][0] == 15
    assert out[1]["error"].startswith(f"{batch}: line 2: ")


def test_parse_and_apply(cli_env: dict[str, str], tmp_path: Path) -> None:
    reply = tmp_path / "reply.txt"
    reply.write_text("<UpdateVariable>\n_.assign('bag', 'rope');//found\n_.add('hp[0]', -2);\n</UpdateVariable>",
                     encoding="utf-8")
    parsed = json.loads(_run(["mvu", "parse", str(reply), "--json"], cli_env).stdout)
    assert parsed == [{"type": "assign", "path": "bag", "args": ["'bag'", "'rope'"], "reason": "found"},
                      {"type": "add", "path": "hp[0]", "args": ["'hp[0]'", "-2"], "reason": ""}]
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"stat_data": {"bag": ["$__META_EXTENSIBLE__$"], "hp": [10, "health"]}}))
    applied = json.loads(_run(["mvu", "apply", str(state), str(reply), "--json"], cli_env).stdout)
    assert applied["record"]["stat_data"] == {"bag": ["rope"], "hp": [8, "health"]}
    assert applied["changed"] is True
    batch = tmp_path / "apply.jsonl"
    batch.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in [
        {"state": {"stat_data": {"n": 1}, "schema": {"type": "object", "properties": {}}}, "text": "_.set('n', 2);"},
        {"state": {"stat_data": {"n": 1}}, "text": "_.set('m', 2);"},
        {"state": 5, "text": "x"}]) + "\n")
    lines = _run(["mvu", "apply", "--batch", str(batch)], cli_env)
    assert lines.returncode == 1
    out = [json.loads(x) for x in lines.stdout.splitlines()]
    assert out[0]["record"]["stat_data"] == {"n": 2}
    assert out[1]["refused"] == [{"command": "_.set('m', 2);",
                                  "reason": "Path 'm' does not exist in stat_data, skipping set command "}]
    assert "stat_data" in out[2]["error"]
    texts = tmp_path / "texts.jsonl"
    texts.write_text('"_.set(\'a\', 1);"\n"no commands"\n')
    assert [json.loads(x) for x in _run(["mvu", "parse", "--batch", str(texts)], cli_env).stdout.splitlines()] == [
        [{"type": "set", "path": "a", "args": ["'a'", "1"], "reason": ""}], []]


def test_vars_json_gains_the_mvu_record_and_a_swipe_moves_it(cli_env: dict[str, str], demo_card: Path) -> None:
    assert _run(["import", str(demo_card)], cli_env).returncode == 0
    with LoopbackServer() as server:
        env = {**cli_env, "TAVERN_API_BASE": server.base_url, "TAVERN_MODEL": "loop-1"}
        server.enqueue_sse(sse_chunks_for("理点头。_.add('理.好感度', 4);//高兴"))
        server.enqueue_sse(sse_chunks_for("理皱眉。_.add('理.好感度', -1);//不安"))
        done = _run(["chat", "青空 理", "--new", "--say", "hello"], env)
        assert done.returncode == 0, done.stderr
        shown = json.loads(_run(["vars", "1", "--json"], cli_env).stdout)
        assert shown["mvu"]["stat_data"]["理"]["好感度"][0] == 4  # the first greeting's 0, plus 4
        swiped = _run(["chat", "青空 理", "--swipe", "--playthrough", "1"], env)
        assert swiped.returncode == 0, swiped.stderr
    assert json.loads(_run(["vars", "1", "--json"], cli_env).stdout)["mvu"]["stat_data"]["理"]["好感度"][0] == -1
