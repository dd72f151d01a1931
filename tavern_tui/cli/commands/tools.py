"""Provides `tavern tools [--json]`: every tool (built-ins and the declared MCP servers'), its
risk, and whether a call of it runs ("allowed"), is asked about in the TUI ("ask"; the CLI
refuses it), is refused, or is off (issue 19 §6)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from tavern_tui.cli.context import open_service
from tavern_tui.cli.diagnostics import EXIT_OK
from tavern_tui.cli.output import print_json

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands


def add_tools(commands: Commands) -> None:
    """`tavern tools [--json]`."""
    p_tools = commands.add("tools", cmd_tools, help="list the tools a turn may call, with risk and allowed state")
    p_tools.add_argument("--json", action="store_true")


def cmd_tools(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """List the tools (starting the MCP servers to list theirs; they stop when this ends)."""
    with open_service(args) as tavern:
        listing = tavern.tools.listing()
    if args.json:
        return print_json(out, listing)
    width = max((len(t["name"]) for t in listing["tools"]), default=4)
    for tool in listing["tools"]:
        only = f"  (offered only to a chat with {tool['only_with']})" if tool.get("only_with") else ""
        out.write(f"{tool['name']:<{width}}  {tool['risk']:<7}  {tool['allowed']:<7}  {tool['source']}{only}\n")
    for server in listing["servers"]:
        note = f": {server['error']}" if server["error"] else ""
        out.write(f"MCP server {server['name']}: {server['state']}{note}\n")
    out.write(f"at most {listing['max_steps']} requests per turn ([tools] max_steps); "
              "enable built-ins with [tools] enabled or TAVERN_TOOLS\n")
    return EXIT_OK
