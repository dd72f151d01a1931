"""Provides the CLI's exit codes and its error reports: how a failure becomes a stderr line and a
status. Data goes to stdout through `cli.output`; notes and errors go to stderr."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from tavern_tui.errors import SecretRefused, TavernError

if TYPE_CHECKING:
    from tavern_tui.engine.step import StepFailed

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130
"""Ctrl+C during `tavern chat` (128 + SIGINT, as shells report it)."""

Handler = Callable[[argparse.Namespace, TextIO, TextIO], int]
"""A command: `(args, out, err) -> exit status`; it may raise `TavernError` (see `run`)."""


def configure_logging(verbose: bool, err: TextIO) -> None:
    """Log to `err`: INFO and up with `-v/--verbose`, else WARNING and up."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=err,
                        format="%(levelname)s %(name)s: %(message)s")


def run(handler: Handler, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run one command; a `TavernError` becomes "error: …" on `err` and `EXIT_FAILED`, a closed
    stdout pipe (`tavern show 3 | head`) a quiet `EXIT_FAILED`, Ctrl+C one line and 130 (what a
    shell reports for SIGINT): what was stored before it stays, as every write is one transaction."""
    try:
        return int(handler(args, out, err))
    except TavernError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        err.write("interrupted (ctrl+c): stopped; what was already stored is kept\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away: stop quietly, as other CLI tools do. Pointing stdout at
        # /dev/null keeps the interpreter's final flush from raising again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED


def refused(exc: SecretRefused, err: TextIO) -> int:
    """Report a refused secret (its kind, never the text) and, when the command may override it,
    how (`--allow-secrets`); returns `EXIT_FAILED`. Only commands with that flag call this."""
    hint = "; pass --allow-secrets to go ahead" if exc.overridable else ""
    err.write(f"error: {exc}{hint}\n")
    return EXIT_FAILED


def step_failed(exc: StepFailed, err: TextIO) -> int:
    """Report a step the provider failed: its category, the cause and how much of the reply was
    kept as a partial attempt; returns `EXIT_FAILED`."""
    kept = (f" (partial reply kept: {len(exc.attempt.content)} characters)"
            if exc.attempt and exc.attempt.content else "")
    err.write(f"error ({exc.category}): {exc.cause}{kept}\n")
    return EXIT_FAILED
