"""`tavern --help` says where a person's data lives and how to reach a model; `tavern trace list
--help` says what each option does (a new user's trial found neither)."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest

from tavern_tui.cli.app import build_parser


def _help(*argv: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--help"])
    return " ".join(out.getvalue().split())


def test_the_main_help_names_the_data_folders_and_the_model_settings() -> None:
    text = _help()
    for words in ("user data folder", "config.toml", "TAVERN_HOME=DIR keeps both under DIR", "TAVERN_DB_URL",
                  "ctrl+s in the app", "TAVERN_API_BASE", "TAVERN_MODEL", "TAVERN_API_KEY", "offline demo"):
        assert words in text


def test_trace_list_options_are_described() -> None:
    text = _help("trace", "list")
    assert "--playthrough P only this playthrough's requests" in text
    assert "--session S only the requests recorded in this session" in text
    assert "--json a JSON list, one object per request" in text
