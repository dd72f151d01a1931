"""`tavern trace list` and `tavern trace show` name the member each request of a group round was
written for ("each a normal step with its own trace")."""

from __future__ import annotations

import json

from tests.cli.test_group_cli import cli_env  # noqa: F401 - the fixture
from tests.support.cli import run_cli
from tests.support.loopback import LoopbackServer, sse_chunks_for


def test_trace_list_and_show_name_each_requests_member(cli_env: dict[str, str],  # noqa: F811
                                                       server: LoopbackServer) -> None:
    made = run_cli(["group", "new", "Glade", "--member", "Seraphina", "--member", "Shodan", "--strategy", "list",
                    "--json"], cli_env)
    pid = json.loads(made.stdout)["playthrough"]["id"]
    server.enqueue_sse(sse_chunks_for("Welcome."))
    server.enqueue_sse(sse_chunks_for("Insect.", usage=(321, 7)))
    assert run_cli(["chat", "Glade", "--say", "Hello."], cli_env).returncode == 0
    listed = run_cli(["trace", "list", "--playthrough", str(pid)], cli_env)
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.splitlines()[1:]  # after the header
    assert [row.rsplit("  ", 1)[-1] for row in rows] == ["for Seraphina", "for Shodan"]
    # The provider's counts, the request's prompt then the reply's completion (the SSE usage chunks).
    assert " 10+5 tok " in rows[0] and " 321+7 tok " in rows[1]
    ids = [row.split()[0] for row in rows]
    shown = run_cli(["trace", "show", ids[1]], cli_env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0].endswith("· ok · for Shodan")
    as_json = json.loads(run_cli(["trace", "list", "--playthrough", str(pid), "--json"], cli_env).stdout)
    assert [t["speaker"] for t in as_json] == ["Seraphina", "Shodan"]
