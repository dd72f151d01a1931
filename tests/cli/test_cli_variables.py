"""`tavern vars` and `tavern macro eval` (run as `tests/support/cli.py` runs commands); a turn-counting card
against the loopback server.

Expected values: SillyTavern 1.18 `variables.js` (`incvar` on a missing variable gives 1, then +1 each) and
`macros/definitions/core-macros.js` / `MacroCstWalker.js` for the expansions.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.loopback import LoopbackServer, sse_chunks_for

COUNTER = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Tally", "first_mes": "Hi {{user}}, I count.", "description": "This is turn {{incvar::turns}}."}}


def _run(args: list[str], env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env, stdin=stdin or "")


@pytest.fixture
def cli_env(isolated_profile: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env["TAVERN_HOME"] = str(isolated_profile)
    return env


def test_macro_eval_text_json_and_file(cli_env: dict[str, str], tmp_path: Path) -> None:
    plain = _run(["macro", "eval", "{{ reverse :: {{char}} }}|{{if ::{{user}}}}has user{{/if}}", "--char", "Mira",
                  "--user", "Ann"], cli_env)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == "ariM|has user\n"
    as_json = json.loads(_run(["macro", "eval", "{{.n = 4}}{{.n += 3}}{{.n}}", "--json"], cli_env).stdout)
    assert as_json == {"output": "7", "variables": {"local": {"n": 7}, "global": {}}}
    lines = tmp_path / "in.jsonl"
    lines.write_text('"{{incvar::a}}{{setglobalvar::g::x}}"\n\n"{{incvar::a}}|{{getglobalvar::g}}"\n', encoding="utf-8")
    done = _run(["macro", "eval", "--file", str(lines)], cli_env)
    assert done.returncode == 0, done.stderr
    # Each line starts from fresh variables.
    assert [json.loads(x) for x in done.stdout.splitlines()] == [
        {"output": "1", "variables": {"local": {"a": 1}, "global": {"g": "x"}}},
        {"output": "1|", "variables": {"local": {"a": 1}, "global": {}}}]
    seeded = [_run(["macro", "eval", "{{roll::1d1000}} {{random::a::b::c::d}}", "--seed", "7"], cli_env).stdout
              for _ in range(2)]
    assert seeded[0] == seeded[1]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('"ok"\n{"not": "a string"}\n', encoding="utf-8")
    refused = _run(["macro", "eval", "--file", str(bad)], cli_env)
    assert refused.returncode == 1 and f"{bad}: line 2: expected a JSON string" in refused.stderr


def test_a_turn_counting_card_over_five_turns_a_swipe_and_a_restart(cli_env: dict[str, str],
                                                                    tmp_path: Path) -> None:
    card = tmp_path / "tally.json"
    card.write_text(json.dumps(COUNTER), encoding="utf-8")
    assert _run(["import", str(card)], cli_env).returncode == 0
    with LoopbackServer() as server:
        env = {**cli_env, "TAVERN_API_BASE": server.base_url, "TAVERN_MODEL": "loop-1"}
        for turn in range(1, 6):
            server.enqueue_sse(sse_chunks_for(f"reply {turn}", pieces=2))
            args = ["chat", "Tally", "--say", f"turn {turn}"] + (["--new"] if turn == 1 else ["--playthrough", "1"])
            done = _run(args, env)
            assert done.returncode == 0, done.stderr
        server.enqueue_sse(sse_chunks_for("reply 5, swiped", pieces=2))
        swiped = _run(["chat", "Tally", "--swipe", "--playthrough", "1"], env)
        assert swiped.returncode == 0, swiped.stderr
        systems = [next(m["content"] for m in r.json["messages"] if m["role"] == "system") for r in server.requests]
    assert [s.count("This is turn") for s in systems] == [1] * 6
    assert [s.split("This is turn ")[1].split(".")[0] for s in systems] == ["1", "2", "3", "4", "5", "5"]
    # A new process (a restart) reads the same count.
    shown = json.loads(_run(["vars", "1", "--json"], cli_env).stdout)
    assert shown == {"playthrough": 1, "local": {"turns": 5}, "global": {}, "mvu": None}  # no MVU material
    # --playthrough reads its variables but never commits.
    peek = json.loads(_run(["macro", "eval", "{{incvar::turns}}", "--playthrough", "1", "--json"], cli_env).stdout)
    assert peek["output"] == "6"
    assert json.loads(_run(["vars", "1", "--json"], cli_env).stdout)["local"] == {"turns": 5}
    changed = _run(["vars", "1", "--set", "turns=10", "--set", "mood=calm", "--json"], cli_env)
    assert json.loads(changed.stdout)["local"] == {"turns": "10", "mood": "calm"}
    gone = _run(["vars", "1", "--delete", "mood"], cli_env)
    assert gone.stdout == 'local (1):\n  turns = "10"\nglobal (0):\n  (none)\n'
    missing = _run(["vars", "1", "--delete", "mood"], cli_env)
    assert missing.returncode == 1 and "no local variable named 'mood'" in missing.stderr
