"""The step's prepare stage and `request/context` record on the command line (seed 000 §1,
DESIGN.md "One step"): `tavern chat --say` with an endpoint URL that is not http(s) admits
nothing, says what to fix and keeps the line in `tavern inbox`; with the URL fixed, the next
`--say` sends the queued line first; `tavern trace show` prints the adapter context and the
runtime context of the step, never the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import _run, cli_env  # noqa: F401 - the fixture
from tests.support.loopback import LoopbackServer, sse_chunks_for

KEY = "sk-fake-cli-prepare-93be41"


@pytest.mark.parametrize("base_url", ["ftp://x", "not a url"])
def test_an_unusable_endpoint_keeps_the_line_queued_and_names_the_fix_then_the_fixed_url_sends_it(
        cli_env: dict[str, str], corpus_dir: Path, base_url: str) -> None:  # noqa: F811
    assert _run(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], cli_env).returncode == 0
    bad = {**cli_env, "TAVERN_API_BASE": base_url, "TAVERN_MODEL": "loop-1", "TAVERN_API_KEY": KEY}
    refused = _run(["chat", "Seraphina", "--new", "--say", "Where am I?"], bad)
    assert refused.returncode != 0
    assert f"the endpoint URL {base_url!r} must start with http:// or https://" in refused.stderr
    assert "set [provider] base_url in config.toml, the TAVERN_API_BASE environment variable" in refused.stderr
    assert "Where am I?" in _run(["inbox", "1"], cli_env).stdout
    shown = json.loads(_run(["show", "1", "--json"], cli_env).stdout)["messages"]
    assert [m["role"] for m in shown] == ["assistant"]  # the greeting only: nothing admitted
    with LoopbackServer() as server:
        server.enqueue_sse(sse_chunks_for("*Seraphina smiles.* In my glade.", pieces=2))
        good = {**bad, "TAVERN_API_BASE": server.base_url}
        done = _run(["chat", "Seraphina", "--playthrough", "1", "--say", "And who are you?"], good)
        sent = server.requests[0].json
    assert done.returncode == 0, done.stderr
    assert [(m["role"], m["content"]) for m in sent["messages"][-2:]] == [
        ("user", "Where am I?"), ("user", "And who are you?")]
    assert _run(["inbox", "1"], cli_env).stdout.count("Where am I?") == 0
    traces = json.loads(_run(["trace", "list", "--playthrough", "1", "--json"], cli_env).stdout)
    text = _run(["trace", "show", traces[-1]["id"]], cli_env).stdout
    detail = json.loads(_run(["trace", "show", traces[-1]["id"], "--json"], cli_env).stdout)
    assert "adapter: openai-compatible · loop-1 at http://127.0.0.1:" in text
    assert "runtime context: none" in text
    assert detail["request_context"]["adapter"]["config"] == detail["record"]["config"]
    assert KEY not in text and KEY not in json.dumps(detail)
