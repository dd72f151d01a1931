"""Layering holds at run time: only tui/ loads textual, only store/ loads sqlalchemy (DESIGN.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tavern_tui"


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_module_outside_tui_imports_textual_and_none_outside_store_imports_sqlalchemy() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        imported = _imported_modules(path)
        if "textual" in imported and not relative.startswith("tui/"):
            offenders.append(f"{relative} imports textual")
        if {"sqlalchemy", "alembic"} & imported and not relative.startswith("store/"):
            offenders.append(f"{relative} imports sqlalchemy/alembic")
    assert offenders == []


def test_importing_the_core_layers_and_cli_does_not_load_textual() -> None:
    code = (
        "import sys\n"
        "import tavern_tui.cli, tavern_tui.service, tavern_tui.engine.step, tavern_tui.formats.cards\n"
        "import tavern_tui.providers.openai_compat, tavern_tui.providers.demo, tavern_tui.assembly.basic\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_engine_formats_and_assembly_do_not_load_sqlalchemy() -> None:
    code = (
        "import sys\n"
        "import tavern_tui.engine.step, tavern_tui.engine.memory, tavern_tui.formats.cards, tavern_tui.assembly.basic\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'textual', 'alembic')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# Issue 22: what the start path must not import. Heavy modules load on first use or after the
# first screen painted; each entry names why it is heavy.
NOT_AT_START = ("alembic", "httpx", "markdown_it", "ahocorasick_rs", "starlette", "uvicorn", "keyring", "yaml",
                "tomlkit", "tavern_tui.lore.activation", "tavern_tui.persona.extract", "tavern_tui.service.steps",
                "tavern_tui.service.mvu", "tavern_tui.tui.screens.chat")
# (keyring: finding its backend took ~0.3 s; the key is looked up when the endpoint is first called.
# service.mvu and yaml: `tavern mvu`'s readers, once imported by every command, `--help` 0.53 s → 0.15 s;
# tomlkit: only to edit the config file, the settings are read with tomllib)


def _loaded_after(code: str, env_db: Path) -> set[str]:
    import os

    env = {**os.environ, "TAVERN_DB_URL": f"sqlite:///{env_db}", "TAVERN_HOME": str(env_db.parent / "home")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                          timeout=120)
    return set(done.stdout.split())


def _report(names: tuple[str, ...]) -> str:
    """Code printing which of `names` (modules, with their submodules) the process has loaded."""
    return ("import sys\nprint(' '.join(m for m in sys.modules if any(m == n or m.startswith(n + '.') for n in "
            f"{names!r})))\n")


_REPORT = _report(NOT_AT_START)


def _at_head(tmp_path: Path) -> Path:
    """A database already at the newest schema (so opening it needs no migration)."""
    db = tmp_path / "t.sqlite3"
    subprocess.run([sys.executable, "-c", "from tavern_tui.store.store import Store; "
                    f"Store('sqlite:///{db}').close()"], check=True, timeout=120)
    return db


# What the read-only lists (`tavern sessions`, `presets`, `trace list`) do not load on an embedded
# database at head: they read it with sqlite3 (`service.list_reads`), so neither SQLAlchemy
# (~0.2 s to import, ~0.12 s more to declare the store's mapped classes) nor the store and the
# services behind the facade.
NOT_FOR_THE_LISTS = (*NOT_AT_START, "sqlalchemy", "tavern_tui.store.models", "tavern_tui.store.store",
                     "tavern_tui.service.facade", "tavern_tui.service.context")


def test_help_and_sessions_do_not_import_the_heavy_modules(tmp_path: Path) -> None:
    db = _at_head(tmp_path)
    helped = _loaded_after("import contextlib, io\nfrom tavern_tui.cli import main\n"
                           "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
                           "    main(['--help'])\n" + _REPORT, db)
    assert helped == set()
    for command in (["sessions", "--json"], ["presets", "--json"], ["trace", "list", "--json"], ["sessions"],
                    ["presets"], ["trace", "list"]):
        listed = _loaded_after("import io\nfrom tavern_tui.cli import main\n"
                               f"assert main({command!r}, out=io.StringIO()) == 0\n" + _report(NOT_FOR_THE_LISTS), db)
        assert (command, listed) == (command, set())


def test_the_tui_first_paint_does_not_import_the_heavy_modules(tmp_path: Path) -> None:
    db = _at_head(tmp_path)
    code = ("import asyncio\nfrom tavern_tui.config import load_settings\nfrom tavern_tui.service import Tavern\n"
            "from tavern_tui.tui.app import TavernApp\n"
            "async def main():\n"
            "    app = TavernApp(Tavern(load_settings()))\n"
            "    async with app.run_test(size=(120, 40)) as pilot:\n"
            "        await pilot.pause()\n"
            "        await app.workers.wait_for_complete()\n"
            "        await pilot.pause()\n"
            "        assert type(app.screen).__name__ == 'HomeScreen'\n"
            "asyncio.run(main())\n" + _REPORT)
    assert _loaded_after(code, db) == set()


# What the home screen's first paint does not need, each loaded on first use: the engine's
# stream protocol and events (the config and the labels once imported them for a constant and a
# type), the views of chats, trees and traces, the help, notifications and import screens, the
# `[keys]` resolver, and TextArea (the app's `?` check imported it while the footer was built).
LOADED_AFTER_THE_LIST = ("tavern_tui.engine.stream", "tavern_tui.engine.events", "tavern_tui.views.messages",
                         "tavern_tui.views.timeline", "tavern_tui.views.traces", "tavern_tui.tui.screens.help",
                         "tavern_tui.tui.screens.notices", "tavern_tui.tui.keymap",
                         "tavern_tui.tui.modals.import_screen", "textual.widgets._text_area")


@pytest.mark.parametrize("database", ["at head", "not created yet"])
def test_the_tui_paints_its_first_list_before_loading_the_database_library(tmp_path: Path, database: str) -> None:
    # As `tavern` starts on an embedded database at head, or on a first start: the home screen's
    # list is read with sqlite3 (or is empty) and painted while the service (SQLAlchemy, the
    # store, the migrations that create the file) is still to be opened.
    db = _at_head(tmp_path) if database == "at head" else tmp_path / "new" / "tavern.sqlite3"
    code = ("import asyncio, sys, threading\nfrom tavern_tui.config import load_settings\n"
            "from tavern_tui.service.first_screen import first_screen\n"
            "from tavern_tui.tui.opening import OpeningTavern\nfrom tavern_tui.tui.app import TavernApp\n"
            "gate = threading.Event()\nsettings = load_settings()\n"
            "def open_service():\n"
            "    gate.wait(60)\n"
            "    from tavern_tui.service import Tavern\n"
            "    return Tavern(settings)\n"
            "async def main():\n"
            "    opening = OpeningTavern(settings, open_service)\n"
            "    app = TavernApp(opening, first=first_screen(settings.db_url))\n"
            "    async with app.run_test(size=(120, 40)) as pilot:\n"
            "        while type(app.screen).__name__ != 'HomeScreen' or not app.screen.has_class('-empty'):\n"
            "            await pilot.pause(0.01)\n"
            "        print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'alembic'}\n"
            f"                              | (set(sys.modules) & {set(LOADED_AFTER_THE_LIST)!r}))))\n"
            "        gate.set()\n"
            "        opening.wait().close()\n"
            "asyncio.run(main())\n")
    assert _loaded_after(code, db) == set()


def test_the_shipped_head_is_read_without_alembic_as_alembic_reads_it() -> None:
    from alembic.script import ScriptDirectory

    from tavern_tui.store.db import _alembic_config, head_revision

    assert head_revision() == ScriptDirectory.from_config(_alembic_config()).get_current_head()


def test_a_bare_tavern_parses_as_the_whole_parser_would_without_loading_the_commands() -> None:
    # `tavern` alone is the TUI: its namespace comes from the global options only, before the
    # first screen; it must be what the whole parser gives an empty command line.
    code = ("import sys\nfrom tavern_tui.cli.options import bare_args\nbare = vars(bare_args())\n"
            "print(sorted(m for m in sys.modules if m.startswith('tavern_tui.cli.commands.')))\n"
            "from tavern_tui.cli.app import build_parser\nprint(bare == vars(build_parser().parse_args([])))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.split("\n")[:2] == ["['tavern_tui.cli.commands.serve']", "True"]
