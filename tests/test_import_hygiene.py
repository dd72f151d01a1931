"""Layering holds at run time: only tui/ loads textual, only store/ loads sqlalchemy (DESIGN.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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
