"""`tavern group` and `tavern chat GROUP --say` in this process (`tests/support/cli.py`) against the
loopback server: a group made from two corpus characters, its listing, cast changes with clear
errors, a round printed member by member, and `group speak`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.loopback import LoopbackServer, sse_chunks_for


@pytest.fixture
def cli_env(isolated_profile: Path, corpus_dir: Path, server: LoopbackServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env["TAVERN_HOME"] = str(isolated_profile)
    env["TAVERN_API_BASE"] = server.base_url
    env["TAVERN_MODEL"] = "loop-1"
    done = run_cli(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png"),
                    str(corpus_dir / "cards" / "shodan_v2_pure.png")], env)
    assert done.returncode == 0, done.stderr
    return env


def test_new_list_show_and_cast_changes(cli_env: dict[str, str]) -> None:
    made = run_cli(["group", "new", "Glade", "--member", "Seraphina", "--member", "Shodan", "--strategy", "list",
                    "--json"], cli_env)
    assert made.returncode == 0, made.stderr
    shown = json.loads(made.stdout)
    assert [m["name"] for m in shown["group"]["members"]] == ["Seraphina", "Shodan"]
    assert shown["group"]["strategy"] == "list" and shown["group"]["playthroughs"] == [shown["playthrough"]["id"]]

    first = run_cli(["group", "show", "Glade"], cli_env).stdout.splitlines()[0]
    assert first.endswith(f"· playthrough #{shown['playthrough']['id']}")  # an id, not a count (a trial)
    listed = run_cli(["group", "list"], cli_env)
    assert listed.stdout == f"{shown['group']['id']} Glade · Seraphina, Shodan · list\n"
    # `tavern sessions` lists the group's chat under the group's name, not its first member's.
    [line] = run_cli(["sessions"], cli_env).stdout.splitlines()
    assert line.split()[:3] == [str(shown["playthrough"]["id"]), "Glade", "(group)"]
    muted = run_cli(["group", "mute", "Glade", "Shodan"], cli_env)
    assert muted.returncode == 0 and "2. Shodan (character" in muted.stdout and muted.stdout.rstrip().endswith("muted")
    missing = run_cli(["group", "mute", "Meadow", "Shodan"], cli_env)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert "no group named 'Meadow'; groups: 1 'Glade'" in missing.stderr
    by_id = run_cli(["group", "show", "99"], cli_env)  # an id that is none: said as an id (a trial)
    assert by_id.returncode == 1 and "no group with id '99'; groups: 1 'Glade'" in by_id.stderr
    unknown = run_cli(["group", "new", "X", "--member", "Nobody"], cli_env)
    assert unknown.returncode == 1 and "Nobody" in unknown.stderr
    assert json.loads(run_cli(["group", "list", "--json"], cli_env).stdout)[0]["members"][1]["muted"] is True


def test_chat_with_a_group_prints_each_members_reply_after_its_name(cli_env: dict[str, str],
                                                                    server: LoopbackServer) -> None:
    assert run_cli(["group", "new", "Glade", "--member", "Seraphina", "--member", "Shodan",
                    "--strategy", "list"], cli_env).returncode == 0
    server.enqueue_sse(sse_chunks_for("Welcome, traveller."))
    server.enqueue_sse(sse_chunks_for("Insect."))
    played = run_cli(["chat", "Glade", "--say", "Hello, both."], cli_env)
    assert played.returncode == 0, played.stderr
    assert played.stdout == "Seraphina: Welcome, traveller.\nShodan: Insect.\n"
    assert len(server.requests) == 2

    server.enqueue_sse(sse_chunks_for("Pathetic."))
    swiped = run_cli(["chat", "Glade", "--swipe"], cli_env)  # the last reply's member is asked again
    assert (swiped.returncode, swiped.stdout) == (0, "Shodan: Pathetic.\n"), swiped.stderr

    server.enqueue_sse(sse_chunks_for("Still here."))
    spoke = run_cli(["group", "speak", "Glade", "Seraphina"], cli_env)
    assert (spoke.returncode, spoke.stdout) == (0, "Seraphina: Still here.\n")
    verified = run_cli(["trace", "verify", "--all"], cli_env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # The tree names each member's reply by its speaker, as the chat does.
    tree = run_cli(["tree", "1"], cli_env).stdout
    assert "assistant/agent Seraphina: Welcome, traveller." in tree
    assert "1/2 assistant/agent Shodan: Insect." in tree and "2/2 assistant/agent Shodan: Pathetic." in tree

    # --json: every member's reply with its speaker (a trial got the last reply alone, unnamed).
    server.enqueue_sse(sse_chunks_for("Again, welcome."))
    server.enqueue_sse(sse_chunks_for("Again, insect."))
    again = run_cli(["chat", "Glade", "--say", "Once more.", "--json"], cli_env)
    assert again.returncode == 0, again.stderr
    replies = json.loads(again.stdout)["replies"]
    assert [(r["speaker"], r["content"]) for r in replies] == [("Seraphina", "Again, welcome."),
                                                             ("Shodan", "Again, insect.")]
    assert replies[-1]["swipe"] == "1/1" and replies[0]["swipe"] is None


def test_a_swipe_of_a_failed_members_reply_asks_that_member(cli_env: dict[str, str],
                                                            server: LoopbackServer) -> None:
    assert run_cli(["group", "new", "Duo", "--member", "Seraphina", "--member", "Shodan",
                    "--strategy", "list"], cli_env).returncode == 0
    server.enqueue_sse(sse_chunks_for("Welcome."))
    for _ in range(4):  # Shodan's request (and its retries) meet a broken connection
        server.enqueue_sse([], done=False, abort=True)
    played = run_cli(["chat", "Duo", "--say", "Hello."], cli_env)
    assert played.returncode != 0 and played.stdout.startswith("Seraphina: Welcome.\n")
    server.clear()

    server.enqueue_sse(sse_chunks_for("Pathetic."))
    swiped = run_cli(["chat", "Duo", "--swipe"], cli_env)  # Shodan failed: Shodan is asked again
    assert (swiped.returncode, swiped.stdout) == (0, "Shodan: Pathetic.\n"), swiped.stderr
    assert "Write Shodan's next reply" in server.requests[-1].json["messages"][0]["content"]


def test_muting_a_muted_member_or_unmuting_an_unmuted_one_says_so(cli_env: dict[str, str]) -> None:
    assert run_cli(["group", "new", "Glade", "--member", "Seraphina", "--member", "Shodan"], cli_env).returncode == 0
    unmuted = run_cli(["group", "unmute", "Glade", "Shodan"], cli_env)
    assert (unmuted.returncode, unmuted.stdout) == (0, "Shodan is not muted in 'Glade': nothing changed\n")
    assert run_cli(["group", "mute", "Glade", "Shodan"], cli_env).returncode == 0
    again = run_cli(["group", "mute", "Glade", "Shodan"], cli_env)
    assert (again.returncode, again.stdout) == (0, "Shodan is muted already in 'Glade': nothing changed\n")
    assert json.loads(run_cli(["group", "list", "--json"], cli_env).stdout)[0]["members"][1]["muted"] is True
