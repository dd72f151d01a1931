"""The config file is validated (unknown keys warned, wrong types refused, each naming file and
key) and written by the settings screen with the key in the keyring or a 0600 file (issue 21 item 1)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tavern_tui.config import load_settings
from tavern_tui.config.store import KEYRING_SERVICE, KEYRING_USER, keyring_available, save_config
from tavern_tui.errors import FormatError
from tests.support.file_keyring import FileKeyring


def _write(home: Path, text: str) -> Path:
    path = home / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_an_unknown_key_is_reported_with_file_key_and_the_nearest_known_one(isolated_profile: Path) -> None:
    path = _write(isolated_profile, 'user_nme = "Ada"\n[provider]\nbase_url = "http://x/v1"\nmodle = "m"\n')
    settings = load_settings()
    assert settings.user_name == "User"  # the typo is not read as user_name …
    assert len(settings.warnings) == 2  # … but it is no longer silent
    first, second = settings.warnings
    assert first.startswith(f"{path}: user_nme: expected a known key (did you mean user_name?)")
    assert second.startswith(f"{path}: provider.modle: expected a known key (did you mean provider.model?)")


def test_wrong_types_are_refused_naming_each_key_and_what_was_expected(isolated_profile: Path) -> None:
    _write(isolated_profile, 'max_context = "big"\nprobe_context = 1\n[provider]\ntimeout = "soon"\n'
                             '[tui]\ntimestamps = "yes"\n')
    with pytest.raises(FormatError) as raised:
        load_settings()
    text = str(raised.value)
    assert "max_context: expected a whole number, got str 'big'" in text
    assert "probe_context: expected true or false, got int 1" in text
    assert "provider.timeout: expected a number, got str 'soon'" in text
    assert "tui.timestamps: expected true or false" in text


def test_a_misplaced_api_key_value_is_not_echoed(isolated_profile: Path) -> None:
    _write(isolated_profile, "[provider]\napi_key = 123456789\n")
    with pytest.raises(FormatError) as raised:
        load_settings()
    assert "provider.api_key: expected a string, got int" in str(raised.value)
    assert "123456789" not in str(raised.value)


def test_dotted_keys_in_the_keys_table_are_binding_ids(isolated_profile: Path) -> None:
    _write(isolated_profile, '[keys]\nchat.regenerate = "ctrl+g"\n"home.import" = "f3"\n')
    assert dict(load_settings().keys) == {"chat.regenerate": "ctrl+g", "home.import": "f3"}


def test_saving_keeps_comments_and_writes_owner_only_without_a_keyring(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('# my comment\nuser_name = "Ada"\n', encoding="utf-8")
    assert not keyring_available()  # every test starts on keyring's fail backend (tests/conftest.py)
    where = save_config(path, {"provider": {"base_url": "http://127.0.0.1:9/v1"}}, api_key="sk-file-123")
    assert where == "file"
    text = path.read_text(encoding="utf-8")
    assert "# my comment" in text and 'user_name = "Ada"' in text and 'api_key = "sk-file-123"' in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_with_a_keyring_the_key_goes_there_and_not_into_the_file(file_keyring: FileKeyring,
                                                                  isolated_profile: Path) -> None:
    path = _write(isolated_profile, '[provider]\napi_key = "sk-old-in-file"\n')
    assert keyring_available()
    assert save_config(path, {"provider": {"model": "m1"}}, api_key="sk-in-keyring-42") == "keyring"
    assert "sk-" not in path.read_text(encoding="utf-8")  # the old file key is removed too
    assert file_keyring.get_password(KEYRING_SERVICE, KEYRING_USER) == "sk-in-keyring-42"
    settings = load_settings()
    assert settings.provider.key == "sk-in-keyring-42" and settings.provider.model == "m1"
    save_config(path, {}, api_key="")  # removing the key removes it from the keyring
    assert file_keyring.get_password(KEYRING_SERVICE, KEYRING_USER) is None
