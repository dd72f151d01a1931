"""The `tavern` process's start-up collector policy (`cli.startup`): held off while the modules
load, released (frozen, then on again) once the service is open, and never left off: not by
`--help` (argparse exits), not by a command that fails, not when someone else had turned it off."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tavern_tui.cli import entry, startup


@pytest.fixture(autouse=True)
def _restore_collector() -> Iterator[None]:
    was = gc.isenabled()
    yield
    startup._held = False
    gc.unfreeze()  # the objects a release froze go back to the collector
    (gc.enable if was else gc.disable)()


def test_a_release_freezes_what_is_alive_and_turns_the_collector_back_on() -> None:
    gc.enable()
    startup.hold_collector()
    assert not gc.isenabled()
    frozen_before = gc.get_freeze_count()
    startup.release_collector()
    assert gc.isenabled()
    assert gc.get_freeze_count() > frozen_before
    frozen = gc.get_freeze_count()
    startup.release_collector()  # a second release changes nothing
    assert gc.get_freeze_count() == frozen


def test_a_collector_someone_else_turned_off_stays_off() -> None:
    gc.disable()
    startup.hold_collector()
    startup.release_collector()
    assert not gc.isenabled()


def test_the_entry_point_leaves_the_collector_on_after_help(monkeypatch: pytest.MonkeyPatch) -> None:
    gc.enable()
    monkeypatch.setattr(sys, "argv", ["tavern", "--help"])
    with pytest.raises(SystemExit) as exited:
        entry()
    assert exited.value.code == 0
    assert gc.isenabled()


def test_opening_the_service_releases_the_collector_before_the_command_runs(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gc.enable()
    seen: list[bool] = []
    from tavern_tui.cli.commands import library

    def sessions(args: object, out: object, err: object) -> int:
        from tavern_tui.cli.context import open_service
        with open_service(args):  # type: ignore[arg-type]
            seen.append(gc.isenabled())
        return 0

    monkeypatch.setattr(library, "cmd_sessions", sessions)
    monkeypatch.setattr(sys, "argv", ["tavern", "--db", f"sqlite:///{tmp_path / 't.db'}", "sessions"])
    assert entry() == 0
    assert seen == [True]
    assert gc.isenabled()
