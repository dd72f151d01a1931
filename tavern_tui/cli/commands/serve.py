"""Provides `tavern tui` (also a bare `tavern`) and `tavern serve`. Textual and the HTTP server
are imported inside the handlers, so no other command loads them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from tavern_tui.cli.context import open_service, open_tavern, service_for, settings
from tavern_tui.cli.diagnostics import EXIT_OK

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands


def add_tui(commands: Commands) -> None:
    """`tavern tui`."""
    commands.add("tui", cmd_tui, help="launch the terminal UI (the default)")


def add_serve(commands: Commands) -> None:
    """`tavern serve [--host H] [--port N]`."""
    p_serve = commands.add("serve", cmd_serve, help="serve the optional persona HTTP routes on 127.0.0.1 "
                                                    "(only with TAVERN_PERSONA_API_ENABLED set)")
    p_serve.add_argument("--host", default="127.0.0.1", help="a loopback address (default 127.0.0.1)")
    p_serve.add_argument("--port", type=int, default=8765)


def cmd_tui(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Launch the Textual app (imported lazily: the other commands never load textual).

    On an embedded database already at the newest schema (or not created yet: an empty list)
    the home screen's list is read with the standard library and painted before the service
    opens (`service.first_screen`, `tui.opening`); otherwise (another database, a schema to
    migrate) the service is opened first, as for every other command.
    """
    from tavern_tui.service.first_screen import first_screen
    from tavern_tui.tui.app import run

    loaded = settings(args)
    first = first_screen(loaded.db_url)
    if first is None:
        with service_for(loaded) as tavern:
            run(tavern)
        return EXIT_OK
    from tavern_tui.tui.opening import FIRST_CHAT, OpeningTavern

    opening = OpeningTavern(loaded, lambda: open_tavern(loaded), warm=FIRST_CHAT)
    try:
        run(opening, first)
    finally:
        opened = opening.opened()
        if opened is not None:
            opened.close()
    return EXIT_OK


def cmd_serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern serve`: the HTTP routes (persona routes only when enabled; see http_api)."""
    from tavern_tui.http_api import enabled_from_env, serve

    if not enabled_from_env():
        err.write("note: TAVERN_PERSONA_API_ENABLED is not set: only /v1/health is served\n")
    with open_service(args) as tavern:
        serve(tavern, host=args.host, port=args.port)
    return EXIT_OK
