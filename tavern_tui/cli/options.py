"""Provides `global_options`, the options every `tavern` command takes, and `bare_args`, what a
bare `tavern` (the TUI) parses to."""

from __future__ import annotations

import argparse


def global_options(parser: argparse.ArgumentParser, default: object) -> None:
    """Add the options every command takes (`--db`, `--api-base`, `--model`, `--api-key`, `-v`)
    to `parser`, each defaulting to `default`."""
    parser.add_argument("--db", metavar="URL", default=default,
                        help="database URL (default: SQLite in the user data folder; env TAVERN_DB_URL)")
    parser.add_argument("--api-base", metavar="URL", default=default,
                        help="OpenAI-compatible API root, e.g. http://localhost:8080/v1 (env TAVERN_API_BASE)")
    parser.add_argument("--model", default=default, help="model id (env TAVERN_MODEL)")
    parser.add_argument("--api-key", default=default,
                        help="API key (prefer env TAVERN_API_KEY: flags show up in process lists)")
    parser.add_argument("-v", "--verbose", action="store_true", default=default, help="log details to stderr")


def bare_args() -> argparse.Namespace:
    """What the whole parser gives a bare `tavern` (the TUI, every option at its default), built
    without the commands' parsers and the modules behind them, before the first screen."""
    from tavern_tui.cli.commands.serve import cmd_tui

    parser = argparse.ArgumentParser(prog="tavern")
    global_options(parser, None)
    parser.set_defaults(run=cmd_tui, command=None)
    return parser.parse_args([])
