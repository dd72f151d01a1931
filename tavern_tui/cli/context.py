"""Provides `open_service`: the `Tavern` service a command runs against, built from the global
options and closed when the command ends. The service is imported on first use, so parsing
and `--help` load no database code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING

from tavern_tui.cli.startup import release_collector
from tavern_tui.config import Settings, load_settings

if TYPE_CHECKING:
    from tavern_tui.service import Tavern


def settings(args: argparse.Namespace) -> Settings:
    """The settings `--db/--api-base/--model/--api-key` give, over the environment and defaults;
    what the config file holds that is ignored (an unknown key) is said on stderr."""
    loaded = load_settings(db_url=args.db, base_url=args.api_base, model=args.model, api_key=args.api_key)
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return loaded


def open_tavern(loaded: Settings) -> Tavern:
    """The service on `loaded` settings; the start-up collector hold ends here (`cli.startup`).

    Raises:
        TavernError: the database cannot be opened (a bad URL, a missing driver or folder).
    """
    from tavern_tui.service import Tavern

    tavern = Tavern(loaded)
    release_collector()  # the heavy modules are loaded: collect normally from here
    return tavern


def _open(args: argparse.Namespace) -> Tavern:
    return open_tavern(settings(args))


@contextmanager
def service_for(loaded: Settings) -> Iterator[Tavern]:
    """The service on `loaded` settings, closed (database released) when the block ends.

    Raises:
        TavernError: the database cannot be opened (a bad URL, a missing driver or folder).
    """
    tavern = open_tavern(loaded)
    try:
        yield tavern
    finally:
        tavern.close()


@contextmanager
def open_service(args: argparse.Namespace) -> Iterator[Tavern]:
    """The service for one command, closed (database released) when the command ends.

    Raises:
        TavernError: the database cannot be opened (a bad URL, a missing driver or folder).
    """
    with service_for(settings(args)) as tavern:
        yield tavern


@asynccontextmanager
async def open_async_service(args: argparse.Namespace) -> AsyncIterator[Tavern]:
    """As `open_service`, for a command that streams on an event loop: the provider's HTTP client
    closes on that loop too (`Tavern.aclose`)."""
    tavern = _open(args)
    try:
        yield tavern
    finally:
        await tavern.aclose()
