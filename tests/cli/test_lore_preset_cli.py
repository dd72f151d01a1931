"""`tavern lore bind/unbind BOOK --preset NAME` and the listing of preset bindings, in this process
(`tests/support/cli.py`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import run_cli


@pytest.fixture
def cli_env(isolated_profile: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env["TAVERN_HOME"] = str(isolated_profile)
    return env


@pytest.fixture
def imported(cli_env: dict[str, str], corpus_dir: Path) -> dict[str, int]:
    """The Eldoria staging book and the corpus's default preset imported: their ids by kind."""
    done = run_cli(["import", "--json", str(corpus_dir / "worldbooks" / "eldoria_st_staging.json"),
                    str(corpus_dir / "presets" / "st_openai_default_staging.json")], cli_env)
    assert done.returncode == 0, done.stderr
    return {r["kind"]: r["id"] for r in json.loads(done.stdout)}


def _listed(env: dict[str, str]) -> dict[str, list[str]]:
    listing = run_cli(["lore", "list", "--json"], env)
    assert listing.returncode == 0, listing.stderr
    return {b["name"]: b["bindings"] for b in json.loads(listing.stdout)}


def test_bind_to_a_preset_by_name_shows_in_the_listing_and_unbinds(cli_env: dict[str, str],
                                                                  imported: dict[str, int]) -> None:
    preset = imported["preset"]
    bound = run_cli(["lore", "bind", "eldoria_st_staging", "--preset", "ST_OPENAI_DEFAULT_STAGING"], cli_env)
    assert (bound.returncode, bound.stdout) == (0, f"eldoria_st_staging bound to preset {preset}\n")
    again = run_cli(["lore", "bind", "eldoria_st_staging", "--preset", str(preset)], cli_env)  # by id
    assert again.stdout == f"eldoria_st_staging was already bound to preset {preset}\n"

    assert _listed(cli_env) == {"eldoria_st_staging": [f"preset:{preset}"]}
    text = run_cli(["lore", "list"], cli_env).stdout
    assert text.rstrip("\n").endswith(f"4 entries  bound: preset:{preset}") and "eldoria_st_staging" in text

    gone = run_cli(["lore", "unbind", "--id", str(imported["world_book"]), "--preset", "st_openai_default_staging"],
                   cli_env)
    assert (gone.returncode, gone.stdout) == (0, f"eldoria_st_staging unbound from preset {preset}\n")
    assert _listed(cli_env) == {"eldoria_st_staging": []}
    never = run_cli(["lore", "unbind", "eldoria_st_staging", "--preset", "st_openai_default_staging"], cli_env)
    assert never.stdout == f"eldoria_st_staging was not bound to preset {preset}\n"


def test_an_unknown_preset_or_book_is_a_clear_error_and_binds_nothing(cli_env: dict[str, str],
                                                                     imported: dict[str, int]) -> None:
    no_preset = run_cli(["lore", "bind", "eldoria_st_staging", "--preset", "Nope"], cli_env)
    assert no_preset.returncode == 1 and no_preset.stdout == ""
    assert no_preset.stderr.startswith("error: no preset named 'Nope'") and "Traceback" not in no_preset.stderr
    no_id = run_cli(["lore", "bind", "eldoria_st_staging", "--preset", "999"], cli_env)
    assert no_id.returncode == 1 and "no preset named '999'" in no_id.stderr
    no_book = run_cli(["lore", "bind", "Nope", "--preset", "st_openai_default_staging"], cli_env)
    assert no_book.returncode == 1 and "no world book named 'Nope'" in no_book.stderr
    assert _listed(cli_env) == {"eldoria_st_staging": []}
    usage = run_cli(["lore", "bind", "eldoria_st_staging", "--preset"], cli_env)  # the option needs a name
    assert usage.returncode == 2 and "--preset" in usage.stderr


def test_presets_names_the_built_in_default_before_the_imported_ones(cli_env: dict[str, str],
                                                                    imported: dict[str, int]) -> None:
    # SillyTavern's default has 12 prompts (FACTS.md: the corpus's copy of it, st_openai_default_staging).
    listing = run_cli(["presets"], cli_env)
    assert listing.returncode == 0, listing.stderr
    first, second = listing.stdout.splitlines()
    assert "SillyTavern default (built in)" in first and "12 prompts" in first and "no preset is bound" in first
    assert second.split()[:3] == [str(imported["preset"]), "st_openai_default_staging", "12"]
    listed = run_cli(["presets", "--json"], cli_env)
    assert [p["id"] for p in json.loads(listed.stdout)] == [imported["preset"]]


def test_importing_the_same_preset_again_stores_nothing_and_repeats_no_warning(cli_env: dict[str, str],
                                                                               imported: dict[str, int],
                                                                               corpus_dir: Path) -> None:
    # The corpus preset carries connection fields (its first import warns that they are not stored).
    again = run_cli(["import", "--json", str(corpus_dir / "presets" / "st_openai_default_staging.json")], cli_env)
    assert again.returncode == 0, again.stderr
    [result] = json.loads(again.stdout)
    assert (result["id"], result["duplicate"], result["warnings"]) == (imported["preset"], True, [])
    assert "connection fields ignored" not in again.stderr
