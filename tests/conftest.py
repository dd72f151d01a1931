"""Fixtures for every test: an isolated profile, the shared corpus, and a service on a temp DB."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.providers.demo import DemoProvider
from tavern_tui.service import Tavern

# The corpus sits beside the repository: <parent>/shared/corpus (SOURCES.md lists the files);
# TAVERN_TEST_CORPUS points elsewhere (a clone in another folder).
CORPUS_DIR = Path(os.environ.get("TAVERN_TEST_CORPUS")
                  or Path(__file__).resolve().parents[1].parent / "shared" / "corpus")

_ENV = ("TAVERN_DB_URL", "TAVERN_API_BASE", "TAVERN_MODEL", "TAVERN_API_KEY", "TAVERN_USER_NAME", "TAVERN_CONFIG")


@pytest.fixture(autouse=True)
def isolated_profile(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point TAVERN_HOME at a fresh folder and clear provider settings, so no test touches a
    real profile or reaches a real endpoint."""
    home = tmp_path_factory.mktemp("tavern-home")
    monkeypatch.setenv("TAVERN_HOME", str(home))
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """Path of the shared corpus (cards/, worldbooks/, presets/, FACTS.md).

    Fails (never skips) when it is missing: the importer tests are meaningless without it.
    """
    if not (CORPUS_DIR / "cards").is_dir():
        pytest.fail(f"test corpus not found at {CORPUS_DIR} (expected cards/ there; set TAVERN_TEST_CORPUS to "
                    "the shared/corpus folder); see shared/corpus/SOURCES.md", pytrace=False)
    return CORPUS_DIR


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """A SQLite URL in the test's temp folder."""
    return f"sqlite:///{tmp_path / 'tavern.sqlite3'}"


class ScriptedModel(DemoProvider):
    """Stands in for a real model: the demo's streaming and `enqueue`, but its replies count as
    a model's (not a placeholder), so they are stored as agent messages and sent back."""

    name = "scripted"
    model = "scripted-1"
    placeholder = False


@pytest.fixture
def model() -> ScriptedModel:
    """An instant scripted model; `model.enqueue("reply")` scripts exact replies."""
    return ScriptedModel(delay=0)


@pytest.fixture
def tavern(db_url: str, model: ScriptedModel) -> Iterator[Tavern]:
    """The service on a temp database with the instant scripted model."""
    service = Tavern(Settings(db_url=db_url), provider=model)
    yield service
    service.close()
