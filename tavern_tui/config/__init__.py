"""Provides `Settings`: database URL, provider endpoint and the user's name, from flags, env and file.

Precedence (highest first): command-line flags, environment (`TAVERN_DB_URL`, `TAVERN_API_BASE`,
`TAVERN_MODEL`, `TAVERN_API_KEY`, `TAVERN_USER_NAME`, `TAVERN_RP_POLICY`, …), the TOML config file,
defaults.
No I/O happens at import; `load_settings` is called once by the CLI.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tavern_tui import paths
from tavern_tui.config.schema import ConfigProblem, flatten_keys, validate
from tavern_tui.config.store import keyring_api_key
from tavern_tui.engine.limits import DEFAULT_MAX_STEPS
from tavern_tui.errors import FormatError
from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.providers.base import ProviderSettings

if TYPE_CHECKING:
    from tavern_tui.tools.mcp_client import McpServerConfig

BELIEF_EXTRACTORS = ("rules", "model")


@dataclass(frozen=True)
class ToolSettings:
    """The `[tools]` table (issue 19).

    Attributes:
        enabled: built-in tools to offer (`enabled = ["roll_dice", "lore_search"]`, or
            `TAVERN_TOOLS=name,name`, which wins); none by default.
        allow: tool names that run without asking, whatever their risk (an MCP tool is
            offered as `<server>__<tool>`).
        max_steps: requests one turn makes at most (default 4).
        mcp: the `[tools.mcp.NAME]` tables: stdio servers (command, args, env, timeout, risk).
    """

    enabled: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    max_steps: int = DEFAULT_MAX_STEPS
    mcp: tuple[McpServerConfig, ...] = ()

    @property
    def any(self) -> bool:
        """Is any tool configured (a built-in enabled or an MCP server declared)?"""
        return bool(self.enabled or self.mcp)


def _check_builtins(enabled: tuple[str, ...], path: Path) -> None:
    """Raises FormatError naming the first name in `enabled` that is not a built-in tool."""
    from tavern_tui.tools.builtin import BUILTIN_NAMES

    unknown = [n for n in enabled if n not in BUILTIN_NAMES]
    if unknown:
        raise FormatError(str(path), f"unknown built-in tool {unknown[0]!r}; the built-ins are "
                          + ", ".join(BUILTIN_NAMES), field="tools.enabled")


def _tool_settings(file: dict[str, Any], source: Mapping[str, str], path: Path) -> ToolSettings:
    """`ToolSettings` from the config's `[tools]` table and `TAVERN_TOOLS`.

    Raises:
        FormatError: naming the field and why (an unknown built-in, a wrong type, …).
    """
    table = file.get("tools", {})
    if not isinstance(table, dict):
        raise FormatError(str(path), "must be a table", field="tools")

    def names(key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise FormatError(str(path), "must be a list of tool names", field=f"tools.{key}")
        return tuple(value)

    enabled = names("enabled")
    if source.get("TAVERN_TOOLS") is not None:
        enabled = tuple(n.strip() for n in source["TAVERN_TOOLS"].split(",") if n.strip())
    if enabled:  # the tools' modules load only when a tool is configured (start-up)
        _check_builtins(enabled, path)
    steps = table.get("max_steps", DEFAULT_MAX_STEPS)
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 50:
        raise FormatError(str(path), "must be a whole number of requests from 1 to 50", field="tools.max_steps")
    servers = table.get("mcp", {})
    if not isinstance(servers, dict):
        raise FormatError(str(path), "must be a table of servers ([tools.mcp.NAME])", field="tools.mcp")
    mcp: list[McpServerConfig] = []
    if servers:
        from tavern_tui.tools.mcp_client import CALL_TIMEOUT, McpServerConfig
    for name, spec in servers.items():
        where = f"tools.mcp.{name}"
        if not isinstance(spec, dict) or not isinstance(spec.get("command"), str) or not spec["command"]:
            raise FormatError(str(path), "needs a command (a string)", field=where)
        args, env, risk = spec.get("args", []), spec.get("env", {}), spec.get("risk", {})
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise FormatError(str(path), "must be a list of strings", field=f"{where}.args")
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise FormatError(str(path), "must be a table of strings", field=f"{where}.env")
        if not isinstance(risk, dict):
            raise FormatError(str(path), "must be a table: tool = \"safe\" | \"unknown\" | \"high\"",
                              field=f"{where}.risk")
        timeout = spec.get("timeout", CALL_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise FormatError(str(path), "must be a positive number of seconds", field=f"{where}.timeout")
        try:
            mcp.append(McpServerConfig(name, spec["command"], tuple(args), dict(env), float(timeout), dict(risk)))
        except ValueError as exc:
            raise FormatError(str(path), str(exc), field=f"{where}.risk") from exc
    return ToolSettings(enabled, names("allow"), steps, tuple(mcp))


@dataclass(frozen=True)
class TuiSettings:
    """What the terminal app remembers (`[tui]` in the config file; issue 21 items 3, 7 and 9).

    Attributes:
        theme: the Textual theme's name ("" = the app's default, `tavern-dark`).
        timestamps, message_numbers, token_counts: extra labels on each message in the chat.
        impersonate_direct: F4 posts the model's line for you at once (the old behaviour)
            instead of filling the composer for you to edit and send (SillyTavern's way).
    """

    theme: str = ""
    timestamps: bool = False
    message_numbers: bool = False
    token_counts: bool = False
    impersonate_direct: bool = False


@dataclass(frozen=True)
class Settings:
    """Everything the service needs to start.

    Attributes:
        db_url: SQLAlchemy URL; default a SQLite file in the user data folder.
        provider: endpoint settings; an empty `base_url` selects the offline demo provider.
        user_name: the name `{{user}}` resolves to until a persona is chosen (SillyTavern's default is "User").
        world_info: world-info activation settings (SillyTavern's shipped defaults unless the
            config file's `[world_info]` table sets its `world_info_*` keys or `max_context`).
        config_path: the config file that was read, or would be read.
        belief_extractor: how consolidation reads the person's messages: "rules" (the
            deterministic extractor, default) or "model" (also asks the configured model for
            JSON, validated before use; seed 002).
        default_strategy: the strategy a new playthrough starts with (seed 000 §2.1: preset
            slots first); a built-in or saved strategy name.
        memory_snapshot: send the memory snapshot (beliefs not in the persona, as labelled
            data in a context message before the input; seed 002); off by default.
        tokenizer: path of a local `tokenizer.json` for exact token counts (needs the optional
            `tokenizers` package; "" = the documented estimate, ceil(UTF-8 bytes / 4)).
        max_context, max_tokens: the context and reply reserve a request fits when no preset
            is bound (top-level `max_context` / `max_tokens`; 0 = unset; issue 16).
        probe_context: ask the endpoint for its context (`/models`, `/props`) when neither a
            preset nor the config says (on by default; `probe_context = false` turns it off). The
            answer is read once per process, in a worker thread, with a 2-second timeout.
        auto_compact: when history would be dropped to fit, summarise the oldest block first
            (`auto_compact = true`; off by default).
        templates: evaluate cards' EJS templates (`<% %>`, ST-Prompt-Template) in the sandbox
            (`templates = false` or `TAVERN_TEMPLATES=0` turns it off: the text is sent as written).
        summary_prompt: the instruction a compaction sends (`summary_prompt`; "" = the
            built-in `DEFAULT_SUMMARY_PROMPT`).
        tools: the `[tools]` table (built-ins enabled, allowed tools, step limit, MCP servers).
        tui: the terminal app's remembered choices (`[tui]`).
        rp_policy: the roleplay policy (`[roleplay] policy`, or `TAVERN_RP_POLICY`, which wins): sent
            as its own system section, identifier `rp:policy`, while roleplay is on, never while a
            playthrough's out-of-character talk is on (`tavern ooc`); "" = none.
        keys: the `[keys]` table: a binding id ("chat.regenerate") or action name → keys
            ("ctrl+g"); the TUI checks the names (`tui.keymap`).
        warnings: what the config file holds that is ignored (unknown keys), one plain line each
            naming the file, the key and what was expected.
    """

    db_url: str
    provider: ProviderSettings = field(default_factory=ProviderSettings)
    user_name: str = "User"
    world_info: WorldInfoSettings = field(default_factory=WorldInfoSettings)
    config_path: Path | None = None
    belief_extractor: str = "rules"
    default_strategy: str = "preset-slots-first"
    tokenizer: str = ""
    memory_snapshot: bool = False
    max_context: int = 0
    max_tokens: int = 0
    probe_context: bool = True
    auto_compact: bool = False
    summary_prompt: str = ""
    tools: ToolSettings = field(default_factory=ToolSettings)
    templates: bool = True
    tui: TuiSettings = field(default_factory=TuiSettings)
    rp_policy: str = ""
    keys: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def default_db_url(env: Mapping[str, str] | None = None) -> str:
    """The embedded default: `sqlite:///<user data dir>/tavern.sqlite3`."""
    return f"sqlite:///{paths.default_db_path(dict(env) if env is not None else None)}"


def _read_config(path: Path) -> dict[str, Any]:
    """The config file's TOML ({} when there is none); a parse failure names the file."""
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(str(path), f"not valid TOML: {exc}") from exc


def _pick(source: Mapping[str, str], flag: str | None, env_name: str, file_value: Any, default: str = "") -> str:
    """One setting by precedence: the flag, then the environment, then the file, then the default."""
    if flag:
        return flag
    if source.get(env_name):
        return source[env_name]
    return str(file_value) if file_value not in (None, "") else default


def _checked_file(path: Path) -> tuple[dict[str, Any], list[ConfigProblem]]:
    """The config file and its schema findings; every wrongly typed key fails together, in one message."""
    file = _read_config(path)
    problems = validate(file, str(path))
    wrong = [p for p in problems if p.error]
    if wrong:
        raise FormatError(str(path), "; ".join(f"{p.key}: expected {p.expected}" for p in wrong))
    return file, problems


def _provider_settings(
    file: dict[str, Any], source: Mapping[str, str], path: Path,
    base_url: str | None, model: str | None, api_key: str | None,
) -> ProviderSettings:
    """The endpoint from the flags, `TAVERN_API_BASE`/`_MODEL`/`_API_KEY` and `[provider]`."""
    prov = file.get("provider", {})
    if not isinstance(prov, dict):
        raise FormatError(str(path), "must be a table", field="provider")
    try:
        timeout = float(prov.get("timeout", 60.0))
    except (TypeError, ValueError) as exc:
        raise FormatError(str(path), "must be a number of seconds", field="provider.timeout") from exc
    return ProviderSettings(
        base_url=_pick(source, base_url, "TAVERN_API_BASE", prov.get("base_url")),
        model=_pick(source, model, "TAVERN_MODEL", prov.get("model")),
        api_key=_pick(source, api_key, "TAVERN_API_KEY", prov.get("api_key")),
        timeout=timeout,
        keyring=keyring_api_key,  # asked only when the key is first needed (`ProviderSettings.key`)
    )


def _world_info_settings(file: dict[str, Any], path: Path) -> WorldInfoSettings:
    """`[world_info]` read with SillyTavern's key names, its errors named by the table."""
    lore = file.get("world_info", {})
    if not isinstance(lore, dict):
        raise FormatError(str(path), "must be a table", field="world_info")
    try:
        return WorldInfoSettings.from_st(lore)
    except ValueError as exc:
        raise FormatError(str(path), str(exc), field="world_info") from exc


def _belief_extractor(file: dict[str, Any], source: Mapping[str, str], path: Path) -> str:
    """`TAVERN_BELIEF_EXTRACTOR` or `belief_extractor`, checked against the known extractors."""
    extractor = _pick(source, None, "TAVERN_BELIEF_EXTRACTOR", file.get("belief_extractor"), "rules")
    if extractor not in BELIEF_EXTRACTORS:
        raise FormatError(str(path), f"unknown belief extractor {extractor!r}; use one of "
                          + ", ".join(BELIEF_EXTRACTORS), field="belief_extractor")
    return extractor


def _token_limits(file: dict[str, Any], path: Path) -> dict[str, int]:
    """`max_context` and `max_tokens`; also checks the top-level switches and `summary_prompt`."""
    limits: dict[str, int] = {}
    for key in ("max_context", "max_tokens"):
        value = file.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise FormatError(str(path), "must be a whole number of tokens (0 = unset)", field=key)
        limits[key] = value
    for key in ("probe_context", "auto_compact", "templates"):
        if not isinstance(file.get(key, False), bool):
            raise FormatError(str(path), "must be true or false", field=key)
    if not isinstance(file.get("summary_prompt", ""), str):
        raise FormatError(str(path), "must be a string", field="summary_prompt")
    return limits


def load_settings(
    *,
    db_url: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Merge flags, environment and the config file into `Settings`.

    The config file has top-level `db_url` and `user_name`, a `[provider]` table with
    `base_url`, `model`, `api_key`, `timeout` (seconds), a `[world_info]` table with
    SillyTavern's `world_info_settings` keys (`world_info_depth`, …) and `max_context`, a `[tui]`
    table and a `[keys]` table (`config.schema.SCHEMA` lists every key). With no key from a flag,
    the environment or the file, the OS keyring's (`config.store`) is used.

    Raises:
        FormatError: the config file exists but is not valid TOML or has a wrong type (every
            wrong key is named, with what it should be). Unknown keys are not an error: they
            are listed in `Settings.warnings`.
    """
    source = env if env is not None else os.environ
    path = paths.config_file(dict(source))
    file, problems = _checked_file(path)
    provider = _provider_settings(file, source, path, base_url, model, api_key)
    world_info = _world_info_settings(file, path)
    extractor = _belief_extractor(file, source, path)
    limits = _token_limits(file, path)
    roleplay = file.get("roleplay", {})
    rp_policy = _pick(source, None, "TAVERN_RP_POLICY", roleplay.get("policy") if isinstance(roleplay, dict) else None)
    tui_table = file.get("tui", {})
    tui = TuiSettings(**{name: tui_table[name] for name in TuiSettings.__dataclass_fields__ if name in tui_table})
    return Settings(
        tui=tui, rp_policy=rp_policy.strip(), keys={k: str(v) for k, v in flatten_keys(file.get("keys", {})).items()},
        warnings=tuple(str(p) for p in problems if not p.error),
        max_context=limits["max_context"], max_tokens=limits["max_tokens"],
        probe_context=bool(file.get("probe_context", True)), auto_compact=bool(file.get("auto_compact", False)),
        summary_prompt=str(file.get("summary_prompt", "")),
        tools=_tool_settings(file, source, path),
        db_url=_pick(source, db_url, "TAVERN_DB_URL", file.get("db_url"), default_db_url(source)),
        provider=provider,
        user_name=_pick(source, None, "TAVERN_USER_NAME", file.get("user_name"), "User"),
        world_info=world_info,
        config_path=path,
        belief_extractor=extractor,
        default_strategy=_pick(source, None, "TAVERN_DEFAULT_STRATEGY", file.get("default_strategy"),
                               "preset-slots-first"),
        tokenizer=_pick(source, None, "TAVERN_TOKENIZER", file.get("tokenizer"), ""),
        memory_snapshot=_pick(source, None, "TAVERN_MEMORY_SNAPSHOT", str(file.get("memory_snapshot", "")).lower(),
                              "").lower() in ("1", "true", "yes"),
        templates=_pick(source, None, "TAVERN_TEMPLATES", str(file.get("templates", True)).lower(),
                        "true").lower() not in ("0", "false", "no", "off"),
    )
