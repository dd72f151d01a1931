"""`tavern import` of a SillyTavern group definition and, with `--group`, its group chat; `tavern
export PLAYTHROUGH --jsonl` of the group playthrough and `tavern group export`, in this process
(`tests/support/cli.py`): the files written equal the ones read, message by message; a group chat
without `--group` whose group is not imported fails saying to pass it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tavern_tui.formats.groups import parse_group_chat
from tests.support.cli import run_cli
from tests.support.st_groups import CHAT_ID, DEFINITION, LINES
from tests.support.st_groups import write_st_group as _write


@pytest.fixture
def cli_env(isolated_profile: Path, corpus_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env["TAVERN_HOME"] = str(isolated_profile)
    done = run_cli(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png"),
                    str(corpus_dir / "cards" / "shodan_v2_pure.png")], env)
    assert done.returncode == 0, done.stderr
    return env


def test_import_with_group_then_export_both_files(cli_env: dict[str, str], tmp_path: Path) -> None:
    definition, chat_file = _write(tmp_path / "st")
    made = run_cli(["import", str(definition)], cli_env)
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("imported group 1: Glade")
    chat = run_cli(["import", str(chat_file), "--group", "Glade", "--json"], cli_env)
    assert chat.returncode == 0, chat.stderr
    [result] = json.loads(chat.stdout)
    playthrough = result["id"]
    assert result["kind"] == "chat" and result["name"] == f"Glade #{playthrough}"

    shown = json.loads(run_cli(["show", str(playthrough), "--json"], cli_env).stdout)
    assert [(m["speaker"], m["content"]) for m in shown["messages"]] == [
        ("Ann", "Hello, both."), ("Seraphina", "Hi, Ann."), ("Shodan", "Insect.")]

    out = tmp_path / f"{CHAT_ID}.jsonl"
    exported = run_cli(["export", str(playthrough), "--jsonl", str(out)], cli_env)
    assert exported.returncode == 0, exported.stderr
    assert [m.raw for m in parse_group_chat(out.read_bytes(), str(out)).messages] == LINES

    to_stdout = run_cli(["group", "export", "Glade"], cli_env)
    assert to_stdout.returncode == 0 and json.loads(to_stdout.stdout) == DEFINITION
    written = tmp_path / "1733480000000.json"
    to_file = run_cli(["group", "export", "1", "--out", str(written)], cli_env)
    assert to_file.returncode == 0 and f"wrote group Glade to {written}" in to_file.stderr
    assert json.loads(written.read_text(encoding="utf-8")) == DEFINITION


def test_a_group_chat_without_its_group_and_a_missing_group(cli_env: dict[str, str], tmp_path: Path) -> None:
    _definition, chat_file = _write(tmp_path / "st")
    alone = run_cli(["import", str(chat_file)], cli_env)
    assert alone.returncode == 1 and "a SillyTavern group chat" in alone.stderr and "pass --group GROUP" in alone.stderr
    missing = run_cli(["import", str(chat_file), "--group", "Meadow"], cli_env)
    assert missing.returncode == 1 and "no group named 'Meadow'" in missing.stderr
    both = run_cli(["import", str(chat_file), "--group", "Glade", "--character", "Shodan"], cli_env)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    assert run_cli(["sessions"], cli_env).stdout.startswith("no playthroughs yet")
