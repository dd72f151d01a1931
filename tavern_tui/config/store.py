"""Provides `save_config` (the settings screen's writes) and the API key's home: the OS keyring
through the `keyring` package when a usable backend is there, else the config file (0600).

Issue 21 item 1: the key never reaches the database, logs, traces or the screen. The config
file keeps the person's comments and layout (`tomlkit` edits it in place) and is always written
with owner-only permissions, atomically (a temporary file renamed over it).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tavern_tui.errors import FormatError

if TYPE_CHECKING:
    import tomlkit

KEYRING_SERVICE = "tavern-tui"
"""The keyring service name the API key is stored under."""

KEYRING_USER = "provider.api_key"
"""The keyring user name the API key is stored under (one key: the configured endpoint's)."""

_NO_KEYRING = ("keyring.backends.fail", "keyring.backends.null")


def keyring_available() -> bool:
    """True when `keyring` has a backend that stores secrets (not the fail/null fallbacks, and
    `TAVERN_KEYRING` is not "0")."""
    if os.environ.get("TAVERN_KEYRING", "").strip() == "0":
        return False
    try:
        import keyring
        backend = keyring.get_keyring()
    except Exception:  # noqa: BLE001 - a broken keyring install means "not available"
        return False
    return not type(backend).__module__.startswith(_NO_KEYRING) and getattr(backend, "priority", 1) > 0


def keyring_api_key() -> str:
    """The API key stored in the keyring, or "" (none stored, or no usable keyring)."""
    if not keyring_available():
        return ""
    try:
        import keyring
        return keyring.get_password(KEYRING_SERVICE, KEYRING_USER) or ""
    except Exception:  # noqa: BLE001 - an unreadable keyring is the same as an empty one
        return ""


def _write_keyring(value: str) -> bool:
    """Store (or with "" delete) the key in the keyring; False when the keyring refused."""
    import keyring
    try:
        if value:
            keyring.set_password(KEYRING_SERVICE, KEYRING_USER, value)
        else:
            with contextlib.suppress(keyring.errors.PasswordDeleteError):
                keyring.delete_password(KEYRING_SERVICE, KEYRING_USER)
    except Exception:  # noqa: BLE001 - fall back to the file
        return False
    return True


def read_document(path: Path) -> tomlkit.TOMLDocument:
    """The config file as an editable document (empty when it does not exist).

    Raises:
        FormatError: the file is not valid TOML or not UTF-8, naming it.
    """
    import tomlkit  # only to edit the file: loading the settings reads it with tomllib

    if not path.is_file():
        return tomlkit.document()
    try:
        return tomlkit.parse(path.read_text(encoding="utf-8"))
    except (tomlkit.exceptions.ParseError, UnicodeDecodeError) as exc:
        raise FormatError(str(path), f"not valid TOML: {exc}") from exc


def save_config(path: Path, changes: Mapping[str, Any], *, api_key: str | None = None) -> str:
    """Write `changes` into the config file at `path`, keeping everything else in it.

    Args:
        changes: top-level keys, or a table name mapped to a dict of its keys
            (`{"provider": {"model": "m"}, "tui": {"theme": "tavern-light"}}`). A value of None
            removes the key.
        api_key: a new API key (None: leave it as it is; "": remove it). It goes to the keyring
            when one is available (and is then removed from the file), else into the file.

    Returns:
        Where the key is kept now: "keyring", "file", or "" when no key was given.

    Raises:
        FormatError: the existing file is not valid TOML.
        OSError: the folder or file cannot be written.
    """
    import tomlkit

    doc = read_document(path)
    where = ""
    merged: dict[str, Any] = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in changes.items()}
    if api_key is not None:
        provider = merged.setdefault("provider", {})
        if keyring_available() and _write_keyring(api_key):
            provider["api_key"] = None  # a key left in the file would win over the keyring's
            where = "keyring"
        else:
            provider["api_key"] = api_key or None
            where = "file"
    for key, value in merged.items():
        if isinstance(value, dict):
            table = doc.get(key)
            if table is None:
                table = tomlkit.table()
                doc[key] = table
            for sub, sub_value in value.items():
                if sub_value is None:
                    table.pop(sub, None)
                else:
                    table[sub] = sub_value
        elif value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=".config-", suffix=".toml", dir=path.parent)
    try:
        os.fchmod(fd, 0o600) if hasattr(os, "fchmod") else None
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(tomlkit.dumps(doc))
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    with contextlib.suppress(OSError):
        os.chmod(path, 0o600)
    return where
