"""`rp:policy` (seed 000 §3, §7): the configured roleplay policy is its own system section, named
`rp:policy`, in every strategy's request while roleplay is on, and is not sent while the
playthrough's out-of-character talk is on (`tavern ooc`). Checked in preview, in the request the
loopback server received, in the CLI, and in the config file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tavern_tui.config import Settings, load_settings
from tavern_tui.errors import FormatError, NotFound
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.service import Tavern
from tests.support.cli import run_cli
from tests.support.loopback import LoopbackServer, sse_chunks_for

POLICY = "Stay in character as {{char}}; never speak for {{user}}."
SENT = "Stay in character as Seraphina; never speak for Ann."
STRATEGIES = ["compat", "preset-slots-first", "preset-roles-first", "projection"]


def _playing(service: Tavern, corpus_dir: Path) -> int:
    card, preset = service.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png",
                                                 corpus_dir / "presets" / "st_openai_default_staging.json"])
    assert card.ok and preset.ok
    pid = service.playthroughs.new_playthrough(card.id, user_name="Ann").id
    service.presets.bind_preset(pid, preset.id)
    return pid


def _policy_parts(preview: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """(message index, part) of every `rp:policy` part in a preview's attribution."""
    return [(i, part) for i, message in enumerate(preview["parts"]) for part in message
            if part.get("identifier") == "rp:policy"]


@pytest.fixture
def policed(db_url: str, corpus_dir: Path, model: Any) -> Any:
    service = Tavern(Settings(db_url=db_url, rp_policy=POLICY), provider=model)
    yield service, _playing(service, corpus_dir)
    service.close()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_policy_is_its_own_system_section_while_roleplay_is_on(policed: Any, strategy: str) -> None:
    service, pid = policed
    service.strategies.apply_strategy(pid, strategy)
    shown = service.steps.preview(pid, "Hello")
    [(index, part)] = _policy_parts(shown)
    message = shown["messages"][index]
    assert message["role"] == "system"
    assert message["content"][part["start"]:part["end"]] == SENT  # macros expanded, exactly once
    assert part["kind"] == "policy" and part["category"] == "system"
    assert sum(m["content"].count(SENT) for m in shown["messages"]) == 1
    if strategy == "projection":  # a system message of its own in the projected array
        assert (message["content"], message["source"]) == (SENT, "policy")
    else:  # a section of the one system message, set off by blank lines
        assert f"\n\n{SENT}" in message["content"] and index == 0

    assert service.roleplay.set_ooc(pid, True) is True
    assert service.roleplay.set_ooc(pid, True) is False  # already on
    assert service.playthroughs.playthrough(pid).ooc is True
    quiet = service.steps.preview(pid, "Hello")
    assert _policy_parts(quiet) == [] and not any(SENT in m["content"] for m in quiet["messages"])
    service.roleplay.set_ooc(pid, False)
    assert len(_policy_parts(service.steps.preview(pid, "Hello"))) == 1


def test_no_policy_configured_sends_no_section(tavern: Tavern, corpus_dir: Path) -> None:
    pid = _playing(tavern, corpus_dir)
    for strategy in STRATEGIES:
        tavern.strategies.apply_strategy(pid, strategy)
        assert _policy_parts(tavern.steps.preview(pid, "Hello")) == []
    assert tavern.roleplay.policy(pid) == ""
    with pytest.raises(NotFound, match="no playthrough with id 99"):
        tavern.roleplay.set_ooc(99, True)


@pytest.mark.parametrize("strategy", ["compat", "projection"])
async def test_the_server_receives_the_policy_only_while_roleplay_is_on(server: LoopbackServer, db_url: str,
                                                                       corpus_dir: Path, strategy: str) -> None:
    settings = Settings(db_url=db_url, rp_policy=POLICY,
                        provider=ProviderSettings(base_url=server.base_url, model="loop-1", timeout=10))
    service = Tavern(settings)
    try:
        pid = _playing(service, corpus_dir)
        service.strategies.apply_strategy(pid, strategy)
        for text, ooc in (("In the story.", False), ("(OOC: brb)", True), ("Back in the story.", False)):
            service.roleplay.set_ooc(pid, ooc)
            server.enqueue_sse(sse_chunks_for("Fine."))
            async for _ in service.steps.send(pid, text):
                pass
        sent = [[m for m in r.json["messages"] if m["role"] == "system" and SENT in m["content"]]
                for r in server.requests]
        assert [len(s) for s in sent] == [1, 0, 1]
        if strategy == "projection":
            assert sent[0][0]["content"] == SENT
    finally:
        await service.aclose()


@pytest.fixture
def cli_env(isolated_profile: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env["TAVERN_HOME"] = str(isolated_profile)
    env["TAVERN_RP_POLICY"] = POLICY
    return env


def test_tavern_ooc_toggles_the_policy_in_preview(cli_env: dict[str, str], corpus_dir: Path) -> None:
    assert run_cli(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], cli_env).returncode == 0
    done = run_cli(["chat", "Seraphina", "--new", "--say", "Hello"], cli_env)
    assert done.returncode == 0, done.stderr

    def policy_in_preview() -> bool:
        shown = json.loads(run_cli(["preview", "1", "--json"], cli_env).stdout)
        return bool(_policy_parts(shown))

    assert run_cli(["ooc", "show", "1"], cli_env).stdout == (
        "playthrough 1: out-of-character talk off; rp:policy is sent\n")
    assert policy_in_preview()
    assert run_cli(["ooc", "on", "1"], cli_env).stdout == (
        "playthrough 1: out-of-character talk on; rp:policy is not sent\n")
    assert run_cli(["ooc", "on", "1"], cli_env).stdout == (
        "playthrough 1: out-of-character talk on (already); rp:policy is not sent\n")
    assert not policy_in_preview()
    assert json.loads(run_cli(["sessions", "--json"], cli_env).stdout)[0]["ooc"] is True
    assert json.loads(run_cli(["ooc", "off", "1", "--json"], cli_env).stdout) == {
        "playthrough": 1, "ooc": False, "changed": True, "policy_configured": True, "policy_sent": True}
    assert policy_in_preview()
    missing = run_cli(["ooc", "on", "7"], cli_env)
    assert (missing.returncode, missing.stdout, missing.stderr) == (1, "", "error: no playthrough with id 7\n")
    bad = run_cli(["ooc", "maybe", "1"], cli_env)
    assert bad.returncode == 2


def test_the_policy_comes_from_the_config_file_and_the_environment_wins(isolated_profile: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = isolated_profile / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[roleplay]\npolicy = "  Keep it PG-13.  "\n', encoding="utf-8")
    assert load_settings().rp_policy == "Keep it PG-13."
    monkeypatch.setenv("TAVERN_RP_POLICY", "Stay in character.")
    assert load_settings().rp_policy == "Stay in character."
    monkeypatch.delenv("TAVERN_RP_POLICY")
    path.write_text("[roleplay]\npolicy = 3\n", encoding="utf-8")
    with pytest.raises(FormatError, match="roleplay.policy: expected a string"):
        load_settings()
    path.write_text('[roleplay]\npolcy = "x"\n', encoding="utf-8")
    assert load_settings().warnings[0].endswith("roleplay.polcy: expected a known key (did you mean "
                                                "roleplay.policy?): policy")
