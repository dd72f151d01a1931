"""Provides the `tavern` command line. Every command calls the `Tavern` service, never the store.

    tavern                      launch the TUI (also: tavern tui)
    tavern import PATH... [--character NAME] [--json]   cards, world books, chats (.jsonl)
    tavern lore list|bind|unbind|export|test …
    tavern chat CHARACTER (--say TEXT | --swipe | --continue | --impersonate | --reply) [--new | --playthrough ID]
                [--json] [--preset NAME] [--lore BOOK]... [--strategy NAME] [--allow-secrets]
    tavern sessions [--json] [--character NAME]
    tavern presets [--json]
    tavern strategies [--json] | tavern strategy save NAME --base B [--option K=V]... [--expected-version N]
                               | tavern strategy apply PLAYTHROUGH NAME [--version N]
    tavern preview PLAYTHROUGH [--input TEXT] [--strategy NAME] [--preset NAME] [--json]
    tavern show PLAYTHROUGH [--json] [--system]
    tavern tree PLAYTHROUGH [--json]
    tavern export PLAYTHROUGH --jsonl FILE
    tavern trace list [PLAYTHROUGH | --playthrough P | --session S] | show ID | verify ID|--all | replay ID [--model M]
    tavern edit PLAYTHROUGH SESSION:SEQ --text TEXT [--allow-secrets] | tavern delete PLAYTHROUGH SESSION:SEQ [--to-end]
    tavern persona show | edit --expected-version N [--add TEXT | --remove ID | --file F] | history |
                   nominations | affirm ID | decline ID | import FILE | ceiling P LEVEL | consolidate
    tavern beliefs [--search TEXT] [--json]
    tavern serve [--host 127.0.0.1] [--port 8765]   persona HTTP routes, with TAVERN_PERSONA_API_ENABLED

The package: `app` parses (one parser per command, its handler stored as `run`), `commands/`
holds one module per command group, `context` opens the service, `output` owns stdout and
`diagnostics` owns stderr and the exit codes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from tavern_tui.cli.startup import hold_collector, release_collector


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 failed, 2 usage, 130 interrupted chat).

    `argv` defaults to `sys.argv[1:]`, `out`/`err` to `sys.stdout`/`sys.stderr`; a usage error
    exits through argparse (`SystemExit(2)`), as `--help` and `--version` exit with 0.
    """
    from tavern_tui.cli.diagnostics import configure_logging, run

    out = out or sys.stdout
    err = err or sys.stderr
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        from tavern_tui.cli.app import build_parser

        args = build_parser().parse_args(argv)
    else:
        # A bare `tavern` launches the TUI: its options are the defaults, so the parser of every
        # command (and the modules behind them) is not built before the first screen.
        from tavern_tui.cli.options import bare_args

        args = bare_args()
    configure_logging(bool(args.verbose), err)
    return run(args.run, args, out, err)


def entry() -> int:
    """The `tavern` process: `main` with the collector held while the modules load and the
    service opens (`cli.startup`), released once the service is open or at the latest here."""
    hold_collector()
    try:
        return main()
    finally:
        release_collector()
