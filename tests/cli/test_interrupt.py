"""Ctrl+C on any command ends with one line and exit status 130, never a traceback."""

from __future__ import annotations

import argparse
import io

from tavern_tui.cli.diagnostics import EXIT_INTERRUPTED, run


def test_ctrl_c_in_any_command_is_one_line_and_130() -> None:
    def compact(args: argparse.Namespace, out: object, err: object) -> int:
        raise KeyboardInterrupt  # what Ctrl+C raises in the main thread mid-command

    err = io.StringIO()
    assert run(compact, argparse.Namespace(), io.StringIO(), err) == EXIT_INTERRUPTED == 130
    assert err.getvalue() == "interrupted (ctrl+c): stopped; what was already stored is kept\n"
