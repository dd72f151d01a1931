"""`tavern template save|list|show|delete` and `tavern chat CHARACTER --template NAME`, in this
process (`tests/support/cli.py`): a template keeps a playthrough's selections, never its messages."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli


@pytest.fixture
def cli_env(isolated_profile: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env["TAVERN_HOME"] = str(isolated_profile)  # no endpoint: the offline demo provider answers
    return env


def _ok(env: dict[str, str], *args: str) -> str:
    done = run_cli(list(args), env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _selections(env: dict[str, str], playthrough: int) -> dict[str, Any]:
    """What the next request of `playthrough` would use: strategy snapshot, preset, chat books, persona."""
    shown = json.loads(_ok(env, "preview", str(playthrough), "--json"))
    return {"strategy": shown["strategy_snapshot"], "preset": shown["preset"],
            "chat_books": [b for b in shown["world_books"] if b["source"] == "chat"],
            "persona": (shown["persona"]["persona"], shown["persona"]["name"])}


@pytest.fixture
def source(cli_env: dict[str, str], corpus_dir: Path) -> int:
    """Playthrough 1: Seraphina with a preset, a chat book, roles-first and persona Ann, one exchange played."""
    _ok(cli_env, "import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png"),
        str(corpus_dir / "cards" / "shodan_v2_pure.png"), str(corpus_dir / "worldbooks" / "eldoria_st_staging.json"),
        str(corpus_dir / "presets" / "st_openai_default_staging.json"))
    _ok(cli_env, "chat", "Seraphina", "--new", "--say", "Hello from the source chat",
        "--preset", "st_openai_default_staging", "--lore", "eldoria_st_staging", "--strategy", "preset-roles-first")
    _ok(cli_env, "persona", "new", "Ann")
    _ok(cli_env, "persona", "use", "Ann", "--playthrough", "1")
    return 1


def test_save_list_show_and_delete(cli_env: dict[str, str], source: int) -> None:
    assert _ok(cli_env, "template", "list") == (
        "no templates yet; save one with `tavern template save NAME --from PLAYTHROUGH`\n")
    assert _ok(cli_env, "template", "save", "cozy", "--from", str(source)) == (
        "saved cozy · preset-roles-first · preset #1 · persona #2 · lore #1\n")
    again = run_cli(["template", "save", "cozy", "--from", str(source)], cli_env)
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr == "error: a template named 'cozy' exists (save it with --force to replace it)\n"
    assert _ok(cli_env, "template", "save", "cozy", "--from", str(source), "--force").startswith("saved cozy · ")

    listed = json.loads(_ok(cli_env, "template", "list", "--json"))
    assert [(t["name"], t["strategy"], t["preset_id"], t["lore"], t["persona_id"]) for t in listed] == [
        ("cozy", "preset-roles-first", 1, [1], 2)]
    shown = json.loads(_ok(cli_env, "template", "show", "cozy", "--json"))
    assert (shown["preset_name"], shown["lore_names"], shown["persona_name"]) == (
        "st_openai_default_staging", ["eldoria_st_staging"], "Ann")
    assert (shown["strategy_snapshot"]["name"], shown["strategy_snapshot"]["version"]) == ("preset-roles-first", 1)
    # Selection intent only: no message text, trace, inbox or resource body is stored in it.
    assert set(shown) == {"name", "strategy", "preset_id", "lore", "persona_id", "updated_at", "strategy_snapshot",
                          "preset_name", "lore_names", "persona_name"}
    assert "Hello from the source chat" not in json.dumps(shown)
    text = _ok(cli_env, "template", "show", "cozy")
    assert text.splitlines()[1:] == ["  strategy  preset-roles-first v1", "  preset    st_openai_default_staging (#1)",
                                     "  persona   Ann (#2)", "  lore      eldoria_st_staging (#1)"]

    assert _ok(cli_env, "template", "delete", "cozy") == "deleted template cozy\n"
    assert json.loads(_ok(cli_env, "template", "list", "--json")) == []
    for args in (["template", "delete", "cozy"], ["template", "show", "cozy"]):
        gone = run_cli(args, cli_env)
        assert gone.returncode == 1 and gone.stdout == ""
        assert gone.stderr == "error: no configuration template named 'cozy' (`tavern template list` shows them)\n"
    no_source = run_cli(["template", "save", "warm", "--from", "99"], cli_env)
    assert (no_source.returncode, no_source.stderr) == (1, "error: no playthrough with id 99\n")
    assert json.loads(_ok(cli_env, "template", "list", "--json")) == []


def test_a_chat_started_from_a_template_has_its_selections_and_none_of_its_messages(
        cli_env: dict[str, str], source: int) -> None:
    _ok(cli_env, "template", "save", "cozy", "--from", str(source))
    started = run_cli(["chat", "Shodan", "--template", "cozy", "--say", "Greetings, machine"], cli_env)
    assert started.returncode == 0, started.stderr
    assert "started playthrough 2 with Shodan" in started.stderr
    assert "playthrough 2 plays as persona Ann" in started.stderr
    assert _selections(cli_env, 2) == _selections(cli_env, source)
    assert _selections(cli_env, 2)["chat_books"][0]["name"] == "eldoria_st_staging"
    new_messages = json.loads(_ok(cli_env, "show", "2", "--json"))
    texts = [m["content"] for m in new_messages["messages"]]
    assert "Greetings, machine" in texts
    assert not any("Hello from the source chat" in t for t in texts)  # nothing of the source's chat came along


def test_an_unknown_template_or_a_template_with_a_playthrough_starts_nothing(cli_env: dict[str, str],
                                                                           source: int) -> None:
    before = json.loads(_ok(cli_env, "sessions", "--json"))
    unknown = run_cli(["chat", "Shodan", "--template", "nope", "--say", "x"], cli_env)
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr == "error: no configuration template named 'nope' (`tavern template list` shows them)\n"
    _ok(cli_env, "template", "save", "cozy", "--from", str(source))
    mixed = run_cli(["chat", "Seraphina", "--template", "cozy", "--playthrough", "1", "--say", "x"], cli_env)
    assert mixed.returncode == 1 and "--template starts a new playthrough" in mixed.stderr
    assert json.loads(_ok(cli_env, "sessions", "--json")) == before
