"""The `[tools]` config table and `TAVERN_TOOLS` (issue 19): off by default; built-ins by name;
MCP servers with command, args, env, timeout and risk; a bad value names file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavern_tui.config import load_settings
from tavern_tui.errors import FormatError


def settings(tmp_path: Path, text: str, **env: str):
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    return load_settings(env={"TAVERN_CONFIG": str(config), "TAVERN_HOME": str(tmp_path), **env})


def test_off_unless_enabled(tmp_path: Path) -> None:
    tools = settings(tmp_path, "").tools
    assert tools.enabled == () and tools.mcp == () and not tools.any and tools.max_steps == 4


def test_the_table_and_the_environment(tmp_path: Path) -> None:
    text = """
[tools]
enabled = ["roll_dice"]
allow = ["notes__write"]
max_steps = 6
[tools.mcp.notes]
command = "notes-server"
args = ["--root", "/tmp/n"]
env = { NOTES_MODE = "rp" }
timeout = 2.5
risk = { read = "safe", write = "high" }
"""
    tools = settings(tmp_path, text).tools
    assert tools.enabled == ("roll_dice",) and tools.allow == ("notes__write",) and tools.max_steps == 6
    [server] = tools.mcp
    assert (server.name, server.command, server.args, dict(server.env), server.timeout, dict(server.risk)) == (
        "notes", "notes-server", ("--root", "/tmp/n"), {"NOTES_MODE": "rp"}, 2.5, {"read": "safe", "write": "high"})
    assert settings(tmp_path, text, TAVERN_TOOLS="lore_search, roll_dice").tools.enabled == ("lore_search",
                                                                                              "roll_dice")


@pytest.mark.parametrize(("text", "field"), [
    ('[tools]\nenabled = ["fireball"]\n', "tools.enabled"),
    ("[tools]\nmax_steps = 0\n", "tools.max_steps"),
    ('[tools.mcp.x]\nargs = ["a"]\n', "tools.mcp.x"),
    ('[tools.mcp.x]\ncommand = "c"\nrisk = { t = "spicy" }\n', "tools.mcp.x.risk"),
    ('[tools.mcp.x]\ncommand = "c"\ntimeout = -1\n', "tools.mcp.x.timeout"),
])
def test_a_bad_value_names_the_field(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(FormatError) as caught:
        settings(tmp_path, text)
    assert field in str(caught.value) and "config.toml" in str(caught.value)
