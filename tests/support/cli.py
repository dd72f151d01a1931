"""Provides `run_cli`: one `tavern` command run in this process, as `subprocess.run([python, "-m",
"tavern_tui", …])` would run it, for tests where the separate process is not the point. Starting
Python and importing the app costs about a second per command; most CLI tests run dozens of
commands. Tests of processes themselves (signals, kills, two processes racing, the import
footprint, logging set-up) keep real subprocesses. Not a test module.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import os
import subprocess
import sys
import traceback
from collections.abc import Mapping, Sequence


def run_cli(args: Sequence[str], env: Mapping[str, str], *, stdin: str = "",
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `tavern ARGS` in this process with exactly `env` as its environment.

    A command still running after `timeout` seconds ends this test process with every thread's
    stack on stderr (`faulthandler`): a hang fails the run instead of stalling it.

    Returns what `subprocess.run(..., capture_output=True, text=True)` returns: the exit status
    (`SystemExit` codes as the interpreter maps them; an uncaught exception gives 1 and its
    traceback on stderr, as it would from a process), stdout and stderr. The environment, the
    standard streams and the process's signal handlers are restored afterwards.
    """
    from tavern_tui.cli import main

    faulthandler.dump_traceback_later(timeout, exit=True)
    saved = dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    os.environ.clear()
    os.environ.update(env)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _stdin(stdin):
            try:
                code = main(list(args), out, err)
            except SystemExit as exc:
                code = _exit_status(exc.code, err)
            except BaseException:  # noqa: BLE001 - a process would print it and exit 1
                err.write(traceback.format_exc())
                code = 1
    finally:
        faulthandler.cancel_dump_traceback_later()
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["tavern", *args], code, out.getvalue(), err.getvalue())


def _exit_status(code: object, err: io.StringIO) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    err.write(f"{code}\n")
    return 1


@contextlib.contextmanager
def _stdin(text: str):  # type: ignore[no-untyped-def]
    previous = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = previous
