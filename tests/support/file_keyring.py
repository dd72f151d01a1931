"""Provides `FileKeyring`: a keyring backend that keeps passwords in one JSON file (tests only),
so the keyring path is tested for real without an OS secret service. Not a test module."""

from __future__ import annotations

import json
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError


class FileKeyring(KeyringBackend):
    """Passwords in `path` as {"service\\0user": password}; priority 1 (a usable backend)."""

    priority = 1  # type: ignore[assignment]

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def _read(self) -> dict[str, str]:
        return json.loads(self.path.read_text(encoding="utf-8")) if self.path.is_file() else {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._read().get(f"{service}\0{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._read()
        data[f"{service}\0{username}"] = password
        self.path.write_text(json.dumps(data), encoding="utf-8")

    def delete_password(self, service: str, username: str) -> None:
        data = self._read()
        if data.pop(f"{service}\0{username}", None) is None:
            raise PasswordDeleteError(username)
        self.path.write_text(json.dumps(data), encoding="utf-8")
