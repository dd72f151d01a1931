"""The autouse `isolated_profile` fixture: no `TAVERN_*` variable of the developer's shell reaches
a test, whichever the package reads now or later; the harness's own variables stay."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tavern_tui.config import load_settings
from tavern_tui.http_api import enabled_from_env
from tests.conftest import HARNESS_ENV

REPO = Path(__file__).resolve().parents[1]

KEEP_ENV = "ISOLATION_PROBE_KEEP"
"""Names the outer test passes to the probe run: harness variables that must still be set."""

LEAKS = {
    "TAVERN_DEFAULT_STRATEGY": "projection",
    "TAVERN_TOKENIZER": "/nowhere/tokenizer.json",
    "TAVERN_MEMORY_SNAPSHOT": "1",
    "TAVERN_BELIEF_EXTRACTOR": "model",
    "TAVERN_PERSONA_API_ENABLED": "1",
    "TAVERN_PERSONA_API_TOKENS": "secret-token:persona.read",
    "TAVERN_DB_URL": "sqlite:////nowhere/developer.sqlite3",
    "TAVERN_API_BASE": "http://developer.invalid/v1",
    "TAVERN_SETTING_NOT_YET_INVENTED": "x",
}
"""A developer's environment: what the package reads today, plus one it may read tomorrow."""


def test_only_the_harness_tavern_variables_reach_a_test(isolated_profile: Path) -> None:
    present = {name for name in os.environ if name.startswith("TAVERN_")}
    assert present <= HARNESS_ENV | {"TAVERN_HOME"}
    assert os.environ["TAVERN_HOME"] == str(isolated_profile)
    for name in filter(None, os.environ.get(KEEP_ENV, "").split(",")):
        assert name in os.environ, f"the harness variable {name} was cleared"
    settings = load_settings()
    assert settings.default_strategy == "preset-slots-first" and settings.tokenizer == ""
    assert settings.memory_snapshot is False and settings.belief_extractor == "rules"
    assert settings.provider.base_url == "" and settings.db_url.startswith(f"sqlite:///{isolated_profile}")
    assert enabled_from_env() is False


def test_a_developers_tavern_variables_never_reach_a_test(tmp_path: Path) -> None:
    # The fixture runs before any test body, so the probe above runs in a fresh pytest whose
    # environment holds the leaks (this process's environment is already cleared).
    env = {**os.environ, **LEAKS, "TAVERN_HOME": str(tmp_path / "developer-home")}
    harness = {"TAVERN_TEST_PG_URL": os.environ.get("TAVERN_TEST_PG_URL") or "postgresql+psycopg://probe@localhost/unused",
               "TAVERN_TEST_CORPUS": os.environ.get("TAVERN_TEST_CORPUS") or str(REPO.parent / "shared" / "corpus")}
    env.update(harness)
    env[KEEP_ENV] = ",".join(harness)
    probe = f"{Path(__file__).relative_to(REPO)}::test_only_the_harness_tavern_variables_reach_a_test"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", probe],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
