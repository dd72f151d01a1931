"""Provides `build_parser`, the whole `tavern` argument parser, and `Commands`, the one way a
command group module adds its parsers. A parsed command carries its handler as `args.run`."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from tavern_tui import __version__
from tavern_tui.cli.commands import (
    characters,
    chat,
    chats,
    compact,
    drafts,
    edit,
    groups,
    inbox,
    library,
    lore,
    mvu,
    persona,
    roleplay,
    serve,
    strategy,
    templates,
    tools,
    trace,
    variables,
)
from tavern_tui.cli.diagnostics import Handler
from tavern_tui.cli.options import global_options


class Commands:
    """The subcommands of one parser. Each parser added gets `parents` (for the top level: the
    global options once more, so they also work after the command) and, when given, its
    handler as the default `run`."""

    def __init__(self, action: argparse._SubParsersAction[argparse.ArgumentParser],
                 parents: Sequence[argparse.ArgumentParser] = ()) -> None:
        self._action = action
        self._parents = list(parents)

    def add(self, name: str, run: Handler | None = None, **kwargs: Any) -> argparse.ArgumentParser:
        """Add the parser `name` (`kwargs` go to argparse's `add_parser`: help, …); a command
        whose subcommands carry the handlers passes no `run`."""
        parser = self._action.add_parser(name, parents=self._parents, **kwargs)
        if run is not None:
            parser.set_defaults(run=run)
        return parser

    @staticmethod
    def group(parser: argparse.ArgumentParser, dest: str, metavar: str) -> Commands:
        """The required subcommands of `parser` (`tavern lore ACTION`); the chosen name is `args.<dest>`."""
        return Commands(parser.add_subparsers(dest=dest, metavar=metavar, required=True))


# The order `tavern --help` lists the commands in; groups interleave, so it is kept per command.
_COMMANDS: tuple[Callable[[Commands], None], ...] = (
    serve.add_tui, library.add_import, drafts.add_new, drafts.add_drafts, templates.add_templates, chat.add_chat,
    roleplay.add_ooc, inbox.add_inbox,
    library.add_sessions, library.add_show,
    strategy.add_preview, strategy.add_presets, strategy.add_strategies, strategy.add_strategy,
    library.add_tree, edit.add_edit, edit.add_delete, library.add_export, lore.add_lore, groups.add_group,
    trace.add_trace,
    persona.add_persona, persona.add_beliefs, serve.add_serve, variables.add_vars, variables.add_macro,
    compact.add_compact, mvu.add_mvu, tools.add_tools, chats.add_chats, characters.add_character,
    characters.add_card,
)


EPILOG = ("Your chats, cards and books are in one database in your user data folder, and settings in "
          "config.toml in your user config folder; TAVERN_HOME=DIR keeps both under DIR, TAVERN_DB_URL (or --db) "
          "uses another database. The model: ctrl+s in the app, or TAVERN_API_BASE, TAVERN_MODEL and "
          "TAVERN_API_KEY; with none set, an offline demo answers.")
"""What `tavern --help` says after the options: where things live, and how to reach a model."""


def build_parser() -> argparse.ArgumentParser:
    """The `tavern` parser. The global options go before the command or, repeated, after it
    (`tavern sessions --db URL`); a bare `tavern` runs the TUI."""
    parser = argparse.ArgumentParser(prog="tavern", description="Terminal roleplay client for SillyTavern cards.",
                                     epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"tavern-tui {__version__}")
    global_options(parser, None)
    # SUPPRESS: an option not repeated after the command keeps the value given before it.
    common = argparse.ArgumentParser(add_help=False)
    global_options(common, argparse.SUPPRESS)
    parser.set_defaults(run=serve.cmd_tui)
    commands = Commands(parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=argparse.ArgumentParser),
                        parents=[common])
    for add in _COMMANDS:
        add(commands)
    return parser
