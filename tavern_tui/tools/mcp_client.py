"""Provides `McpManager`: the MCP stdio servers the config declares, through the official `mcp`
Python SDK (`mcp.client.stdio.stdio_client` + `mcp.ClientSession`).

Rules (issue 19 §3): each server's tools are listed with their schemas and offered namespaced
by server (`<server>__<tool>`); a server is started on first use and stopped on exit
(`close`); every call has a timeout; a server that fails to start or crashes is reported
(`problems`) and its tools drop out of the next request while the chat goes on. A server
process gets the SDK's default environment (PATH, HOME, …: never the API key) plus the env
the config gives it, minus any value equal to a configured secret.

The SDK's sessions live in anyio task groups that must be entered and left in one task, and
the TUI, the CLI and tests run on different event loops: so every server runs on one private
event loop in a daemon thread, and callers await its futures (`asyncio.wrap_future`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Coroutine, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tavern_tui.tools import RISKS, ToolFailed, ToolSpec

START_TIMEOUT = 20.0
"""Seconds a server has to start and list its tools."""

CALL_TIMEOUT = 30.0
"""Seconds one call may take unless the server's config says (`timeout`)."""

CACHE_TTL = 600.0
"""Seconds a cached tool list is used without starting its server (keyed by its command line)."""

_NAME = re.compile(r"[^A-Za-z0-9_-]")


def namespaced(server: str, tool: str) -> str:
    """The name a server's tool is offered under: `<server>__<tool>`, characters outside
    OpenAI's `[A-Za-z0-9_-]` replaced by `_`, at most 64 characters."""
    return _NAME.sub("_", f"{server}__{tool}")[:64]


@dataclass(frozen=True)
class McpServerConfig:
    """One `[tools.mcp.NAME]` table.

    Attributes:
        name: the server's name (the namespace of its tools).
        command, args: the process to start.
        env: extra environment variables for it.
        timeout: seconds per call.
        risk: tool name (as the server names it) → risk level; unlisted tools are "unknown".
    """

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float = CALL_TIMEOUT
    risk: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad = {k: v for k, v in self.risk.items() if v not in RISKS}
        if bad:
            raise ValueError(f"[tools.mcp.{self.name}] risk: {bad} — each must be one of {', '.join(RISKS)}")


class _Server:
    """A server's state on the private loop."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.state = "new"  # new → starting → running; failed; stopped
        self.error = ""
        self.specs: list[ToolSpec] = []
        self.names: dict[str, str] = {}  # offered name → the server's own tool name
        self.session: Any = None
        self.stop: asyncio.Event | None = None
        self.task: asyncio.Task[None] | None = None
        self.ready: asyncio.Future[None] | None = None
        self.errlog: Any = None
        self.cached = False  # its specs come from the cache; the process is not started yet


class McpManager:
    """The declared MCP servers of one run of the app or a command.

    Args:
        configs: the servers.
        secrets: values never passed to a server (the API key).

    Attributes:
        problems: one line per server that failed to start or crashed, oldest first.
    """

    def __init__(self, configs: Iterable[McpServerConfig], *, secrets: Iterable[str] = (),
                 cache_dir: Path | None = None, cache_ttl: float = CACHE_TTL) -> None:
        self.servers = {c.name: _Server(c) for c in configs}
        self.cache_dir = cache_dir
        self.cache_ttl = cache_ttl
        self.secrets = [s for s in secrets if s]
        self.problems: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    # -- the private loop ---------------------------------------------------------------------

    def _submit(self, coro: Coroutine[Any, Any, Any]) -> Future[Any]:
        with self._lock:
            if self._closed:
                coro.close()
                raise ToolFailed("the tool servers are stopped", "unavailable")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="tavern-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
                atexit.register(self.close)
            return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _await(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return await asyncio.wrap_future(self._submit(coro))

    # -- listing ------------------------------------------------------------------------------

    async def tools(self) -> list[ToolSpec]:
        """The tools of every server: a fresh cached list (the server is then started by its
        first call, and in the background once the list is half its age, to refresh it), else
        the server is started (first use) and its list cached; a server that fails to start is
        reported and left out."""
        if not self.servers:
            return []
        return await self._await(self._all_tools(refresh=True))

    def tools_now(self, timeout: float = START_TIMEOUT + 5) -> list[ToolSpec]:
        """`tools` from synchronous code (`tavern tools`, the preview), with no background start."""
        if not self.servers:
            return []
        return self._submit(self._all_tools()).result(timeout)

    def status(self) -> list[dict[str, Any]]:
        """Per server: name, state ("cached": listed from the cache, not started), error, the
        offered names of its tools."""
        return [{"name": s.config.name, "state": "cached" if s.cached and s.state == "new" else s.state,
                 "error": s.error, "tools": [t.name for t in s.specs]}
                for s in self.servers.values()]

    async def _all_tools(self, refresh: bool = False) -> list[ToolSpec]:
        starting = []
        for server in self.servers.values():
            age = self._from_cache(server) if server.state == "new" else None
            if age is None:
                starting.append(self._ensure(server))
            elif refresh and age > self.cache_ttl / 2:
                asyncio.ensure_future(self._ensure(server))  # refreshed in the background
        await asyncio.gather(*starting)
        return [spec for s in self.servers.values() if s.state == "running" or (s.cached and s.state in
                                                                                ("new", "starting"))
                for spec in s.specs]

    # -- the cached lists ---------------------------------------------------------------------

    def _cache_file(self, config: McpServerConfig) -> Path | None:
        if self.cache_dir is None:
            return None
        key = json.dumps([config.command, list(config.args), sorted(config.env.items())], ensure_ascii=False)
        return self.cache_dir / f"mcp-tools-{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"

    def _from_cache(self, server: _Server) -> float | None:
        """Take the server's specs from a fresh cached list; its age in seconds, None when none."""
        path = self._cache_file(server.config)
        if path is None:
            return None
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            age = time.time() - float(saved["saved"])
            tools = [_CachedTool(t["name"], t.get("description"), t.get("schema")) for t in saved["tools"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not 0 <= age <= self.cache_ttl:
            return None
        server.specs, server.names = self._specs(server.config, tools)
        server.cached = True
        return age

    def _save_cache(self, server: _Server, tools: list[Any]) -> None:
        path = self._cache_file(server.config)
        if path is None:
            return
        rows = [{"name": t.name, "description": t.description,
                 "schema": getattr(t, "input_schema", None) or getattr(t, "inputSchema", None)} for t in tools]
        with contextlib.suppress(OSError, TypeError, ValueError):  # a cache that cannot be written is skipped
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            partial.write_text(json.dumps({"saved": time.time(), "tools": rows}, ensure_ascii=False),
                               encoding="utf-8")
            partial.replace(path)

    async def _ensure(self, server: _Server) -> None:
        if server.state == "running" and server.task is not None and server.task.done():
            self._failed(server, "its process ended")
        if server.state == "new":
            server.state = "starting"
            server.ready = asyncio.get_running_loop().create_future()
            server.stop = asyncio.Event()
            server.task = asyncio.ensure_future(self._serve(server))
        if server.state == "starting" and server.ready is not None:
            try:
                await asyncio.wait_for(asyncio.shield(server.ready), START_TIMEOUT)
            except TimeoutError:
                self._failed(server, f"it did not start within {START_TIMEOUT:g} s")
                if server.stop is not None:
                    server.stop.set()
            except Exception as exc:  # noqa: BLE001 - reported, the chat goes on
                self._failed(server, f"it failed to start: {_why(exc)}")

    async def _serve(self, server: _Server) -> None:
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        config = server.config
        env = {k: v for k, v in config.env.items() if v not in self.secrets}
        params = StdioServerParameters(command=config.command, args=list(config.args), env=env or None)
        server.errlog = tempfile.TemporaryFile("w+", encoding="utf-8")  # its stderr, for the report
        try:
            async with stdio_client(params, errlog=server.errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    listed = await session.list_tools()
                    server.session = session
                    server.specs, server.names = self._specs(config, listed.tools)
                    self._save_cache(server, listed.tools)
                    server.state = "running"
                    assert server.ready is not None and server.stop is not None
                    if not server.ready.done():
                        server.ready.set_result(None)
                    await server.stop.wait()
        except BaseException as exc:
            if server.ready is not None and not server.ready.done():
                server.ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
            elif server.state == "running":
                self._failed(server, f"it crashed: {_why(exc)}")
            if not isinstance(exc, Exception):
                raise
        finally:
            server.session = None
            if server.state == "running":
                server.state = "stopped"

    def _specs(self, config: McpServerConfig, tools: list[Any]) -> tuple[list[ToolSpec], dict[str, str]]:
        specs, names = [], {}
        for tool in tools:
            schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {"type": "object"}
            name = namespaced(config.name, tool.name)
            names[name] = tool.name
            specs.append(ToolSpec(name, (tool.description or tool.name)[:1000], dict(schema),
                                  config.risk.get(tool.name, "unknown"), f"mcp:{config.name}"))
        return specs, names

    def _failed(self, server: _Server, why: str) -> None:
        tail = ""
        if server.errlog is not None:
            try:
                server.errlog.seek(0)
                lines = [line for line in server.errlog.read()[-2000:].splitlines() if line.strip()]
                tail = f" (its last output: {lines[-1][:200]})" if lines else ""
            except (OSError, ValueError):
                pass
        server.state, server.error, server.specs = "failed", why + tail, []
        self.problems.append(f"MCP server {server.config.name!r}: {server.error}; its tools are left out")

    # -- calls --------------------------------------------------------------------------------

    async def call(self, spec: ToolSpec, arguments: dict[str, Any]) -> tuple[str, str]:
        """Call one tool with its server's timeout.

        Returns:
            (the result text the model reads, a one-line summary).

        Raises:
            ToolFailed: the tool reported an error ("error"), took longer than the timeout
                ("timeout"), or its server is not running or crashed ("unavailable"; its tools
                are dropped and the crash reported).
        """
        server = self.servers.get(spec.source.removeprefix("mcp:"))
        if server is None:
            raise ToolFailed(f"no MCP server for {spec.name}", "unavailable")
        return await self._await(self._call(server, spec, arguments))

    async def _call(self, server: _Server, spec: ToolSpec, arguments: dict[str, Any]) -> tuple[str, str]:
        from mcp.shared.exceptions import MCPError

        if server.state in ("new", "starting"):  # listed from the cache: started by its first call
            await self._ensure(server)
        session = server.session
        if server.state != "running" or session is None:
            raise ToolFailed(f"the MCP server {server.config.name!r} is not running ({server.error or server.state})",
                             "unavailable")
        timeout = server.config.timeout
        try:
            result = await asyncio.wait_for(
                session.call_tool(server.names[spec.name], arguments, read_timeout_seconds=timeout), timeout + 1)
        except TimeoutError:
            raise ToolFailed(f"{spec.name} took longer than {timeout:g} s", "timeout") from None
        except MCPError as exc:
            if "timed out" in str(exc).lower():
                raise ToolFailed(f"{spec.name} took longer than {timeout:g} s", "timeout") from None
            self._failed(server, f"it crashed during a call: {_why(exc)}")
            if server.stop is not None:
                server.stop.set()
            raise ToolFailed(f"the MCP server {server.config.name!r} stopped answering ({_why(exc)})",
                             "unavailable") from None
        except Exception as exc:  # noqa: BLE001 - the transport broke: the server is gone
            self._failed(server, f"it crashed during a call: {_why(exc)}")
            if server.stop is not None:
                server.stop.set()
            raise ToolFailed(f"the MCP server {server.config.name!r} stopped answering", "unavailable") from None
        text = _result_text(result)
        if getattr(result, "is_error", False) or getattr(result, "isError", False):
            raise ToolFailed(text or f"{spec.name} reported an error")
        return text, " ".join(text.split())[:80]

    # -- stopping -----------------------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        """Stop every server and the private loop (idempotent; also run at interpreter exit)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def stop_all() -> None:
            tasks = []
            for server in self.servers.values():
                if server.stop is not None:
                    server.stop.set()
                if server.task is not None:
                    if server.state == "starting":  # a background refresh: not worth waiting for
                        server.task.cancel()
                    tasks.append(server.task)
            if tasks:
                await asyncio.wait(tasks, timeout=timeout)

        try:
            asyncio.run_coroutine_threadsafe(stop_all(), loop).result(timeout + 1)
        except Exception:  # noqa: BLE001 - stopping is best effort at exit
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        for server in self.servers.values():
            if server.state in ("running", "starting"):
                server.state = "stopped"
            if server.errlog is not None:
                server.errlog.close()


@dataclass(frozen=True)
class _CachedTool:
    """A tool as the cache keeps it (what `_specs` reads of the SDK's `Tool`)."""

    name: str
    description: str | None
    input_schema: dict[str, Any] | None


def _why(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _why(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}"[:300]


def _result_text(result: Any) -> str:
    """A `CallToolResult` as text: its text blocks joined; other blocks named; structured
    content as JSON when there is no text."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        else:
            parts.append(f"[{kind} content not shown]")
    if not parts:
        structured = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
        if structured is not None:
            parts.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(parts)
