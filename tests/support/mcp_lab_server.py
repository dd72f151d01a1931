"""A small MCP stdio server for the tests, written with the official SDK's server side.

Not a test module: tests start it as `python tests/support/mcp_lab_server.py RECORD_FILE`. Every call it
runs appends one JSON line `{"tool", "arguments"}` to RECORD_FILE, so a test can prove a call
was (or was not) executed.

Tools: `echo` (safe: returns its text), `wipe_notes` (risky: pretends to delete), `slow`
(sleeps), `crash` (the process exits at once), `environment` (the names and values it was
started with, to prove the API key never reaches a tool), `pid` (its process id, to prove it stops).
"""

from __future__ import annotations

import json
import os
import sys
import time

from mcp.server.mcpserver import MCPServer

RECORD = sys.argv[1]
app = MCPServer("lab")


def record(tool: str, arguments: dict) -> None:
    with open(RECORD, "a", encoding="utf-8") as out:
        out.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@app.tool()
def echo(text: str) -> str:
    """Say the text back."""
    record("echo", {"text": text})
    return "echo:" + text


@app.tool()
def wipe_notes(folder: str) -> str:
    """Delete every note in a folder (risky)."""
    record("wipe_notes", {"folder": folder})
    return f"wiped {folder}"


@app.tool()
def slow(seconds: float) -> str:
    """Take a while."""
    record("slow", {"seconds": seconds})
    time.sleep(seconds)
    return "done"


@app.tool()
def crash() -> str:
    """Exit the process mid-call."""
    record("crash", {})
    os._exit(3)


@app.tool()
def environment() -> str:
    """The environment this server runs with."""
    record("environment", {})
    return json.dumps(dict(os.environ))


@app.tool()
def pid() -> str:
    """The server's process id (to prove it is stopped on exit)."""
    return str(os.getpid())


app.run("stdio")
