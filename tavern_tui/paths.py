"""Provides the folders tavern-tui keeps its data and configuration in (platformdirs).

`TAVERN_HOME`, when set, relocates every folder under one directory; tests set it so no test
touches a real profile.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "tavern-tui"


def _home(env: dict[str, str] | os._Environ[str] | None = None) -> Path | None:
    value = (env if env is not None else os.environ).get("TAVERN_HOME", "").strip()
    return Path(value).expanduser() if value else None


def data_dir(env: dict[str, str] | None = None) -> Path:
    """The user data folder (database lives here): `$TAVERN_HOME/data` or platformdirs' user data dir."""
    home = _home(env)
    return home / "data" if home else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def config_dir(env: dict[str, str] | None = None) -> Path:
    """The user config folder (config.toml): `$TAVERN_HOME/config` or platformdirs' user config dir."""
    home = _home(env)
    return home / "config" if home else Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def cache_dir(env: dict[str, str] | None = None) -> Path:
    """The user cache folder (lists that can be rebuilt, e.g. MCP servers' tools): `$TAVERN_HOME/cache`
    or platformdirs' user cache dir."""
    home = _home(env)
    return home / "cache" if home else Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def default_db_path(env: dict[str, str] | None = None) -> Path:
    """Path of the default SQLite database file (`tavern.sqlite3` in the data folder)."""
    return data_dir(env) / "tavern.sqlite3"


def config_file(env: dict[str, str] | None = None) -> Path:
    """Path of the TOML config file; `TAVERN_CONFIG` overrides it."""
    source = env if env is not None else os.environ
    override = source.get("TAVERN_CONFIG", "").strip()
    return Path(override).expanduser() if override else config_dir(env) / "config.toml"
