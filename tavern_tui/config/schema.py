"""Provides `validate`: the config file's keys and the type each must have (issue 21 item 1).

A typo in the config file used to be ignored silently. `validate` walks the parsed TOML against
`SCHEMA` and returns one `ConfigProblem` per unknown key (a warning: the app still starts) and
per wrong type (an error: `load_settings` refuses the file), each naming the file, the dotted
key and what was expected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any

from tavern_tui.lore.settings import _ST_KEYS as ST_KEYS  # SillyTavern's world_info_* keys, one table

STRING, BOOL, WHOLE, NUMBER, TABLE = "a string", "true or false", "a whole number", "a number", "a table"
LIST = "a list of names"

PROVIDER: dict[str, str] = {"base_url": STRING, "model": STRING, "api_key": STRING, "timeout": NUMBER}
"""`[provider]`: the endpoint (`providers.base.ProviderSettings`)."""

TUI: dict[str, str] = {
    "theme": STRING,
    "timestamps": BOOL,
    "message_numbers": BOOL,
    "token_counts": BOOL,
    "impersonate_direct": BOOL,
}
"""`[tui]`: what the terminal app remembers (theme, transcript labels, F4's behaviour)."""

WORLD_INFO: dict[str, str] = {key: {"bool": BOOL, "pct": NUMBER}.get(kind, WHOLE) for key, (_, kind) in ST_KEYS.items()}
WORLD_INFO["world_info_settings"] = TABLE  # a pasted SillyTavern settings object (`WorldInfoSettings.from_st`)

TOOLS: dict[str, str] = {"enabled": LIST, "allow": LIST, "max_steps": WHOLE, "mcp": TABLE}
"""`[tools]` (issue 19): built-ins offered, tools run without asking, the step limit, MCP servers
(`[tools.mcp.NAME]`, whose fields `config._tool_settings` checks, naming each)."""

ROLEPLAY: dict[str, str] = {"policy": STRING}
"""`[roleplay]`: `policy`, the `rp:policy` system section sent while roleplay is on (not while a
playthrough's out-of-character talk is on)."""

SCHEMA: dict[str, Any] = {
    "db_url": STRING,
    "user_name": STRING,
    "default_strategy": STRING,
    "belief_extractor": STRING,
    "tokenizer": STRING,
    "memory_snapshot": BOOL,
    "max_context": WHOLE,
    "max_tokens": WHOLE,
    "probe_context": BOOL,
    "auto_compact": BOOL,
    "summary_prompt": STRING,
    "templates": BOOL,
    "provider": PROVIDER,
    "world_info": WORLD_INFO,
    "tui": TUI,
    "tools": TOOLS,
    "roleplay": ROLEPLAY,
    "keys": "keys",  # binding id or action name → keys, checked by the TUI (`tui.keymap`)
}
"""Every key the config file may hold: a dotted path's expected type, or a nested table's schema."""


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong in the config file.

    Attributes:
        file: the config file's path.
        key: the dotted key ("provider.timeout").
        expected: what the key should be ("a number", or "a known key: base_url, model, …").
        error: True for a wrong type (the file is refused), False for an unknown key (ignored, warned).
    """

    file: str
    key: str
    expected: str
    error: bool

    def __str__(self) -> str:
        return f"{self.file}: {self.key}: expected {self.expected}"


def flatten_keys(table: Mapping[str, Any]) -> dict[str, Any]:
    """`[keys]` with TOML's dotted keys joined back: `chat.regenerate = "ctrl+g"` is parsed as
    `{"chat": {"regenerate": …}}`, and is meant as the binding id "chat.regenerate"."""
    flat: dict[str, Any] = {}
    for name, value in table.items():
        if isinstance(value, Mapping):
            flat.update({f"{name}.{sub}": inner for sub, inner in flatten_keys(value).items()})
        else:
            flat[str(name)] = value
    return flat


def _fits(value: Any, expected: str) -> bool:
    if expected == STRING:
        return isinstance(value, str)
    if expected == BOOL:
        return isinstance(value, bool)
    if expected == WHOLE:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == NUMBER:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected == LIST:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if expected in (TABLE, "keys"):
        return isinstance(value, Mapping)
    return True


def validate(data: Mapping[str, Any], file: str) -> list[ConfigProblem]:
    """Check parsed config `data` (from `file`) against `SCHEMA`.

    Returns:
        The problems in file order: unknown keys (`error=False`, with the nearest known key when
        one is close, "did you mean …") and values of the wrong type (`error=True`).
    """
    problems: list[ConfigProblem] = []

    def walk(table: Mapping[str, Any], schema: Mapping[str, Any], prefix: str) -> None:
        for key, value in table.items():
            dotted = f"{prefix}{key}"
            if key not in schema:
                near = get_close_matches(key, list(schema), n=1)
                hint = f" (did you mean {prefix}{near[0]}?)" if near else ""
                problems.append(ConfigProblem(file, dotted, f"a known key{hint}: " + ", ".join(schema), False))
                continue
            expected = schema[key]
            if isinstance(expected, Mapping):
                if not isinstance(value, Mapping):
                    problems.append(ConfigProblem(file, dotted, TABLE, True))
                else:
                    walk(value, expected, dotted + ".")
            elif expected == "keys":
                if not isinstance(value, Mapping):
                    problems.append(ConfigProblem(file, dotted, TABLE, True))
                    continue
                for name, keys in flatten_keys(value).items():
                    if not isinstance(keys, str) or not keys.strip():
                        problems.append(ConfigProblem(file, f"{dotted}.{name}",
                                                      'keys as a string ("ctrl+r" or "f3,ctrl+e")', True))
            elif key == "memory_snapshot" and isinstance(value, str):
                continue  # kept from before: "true"/"1"/"yes" as a string is read as on
            elif not _fits(value, expected):
                shown = "" if "key" in key else f" {value!r}"  # never echo a (misplaced) secret
                problems.append(ConfigProblem(file, dotted, f"{expected}, got {type(value).__name__}{shown}", True))

    walk(data, SCHEMA, "")
    return problems
