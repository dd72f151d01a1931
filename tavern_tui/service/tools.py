"""Provides `ToolService`: the tools a playthrough's turns may call (issue 19) — the enabled
built-ins, the declared MCP servers (one `McpManager` per `Tavern`, started on first use,
stopped at `close`), and the guard every call goes through (one per `Tavern`, so an "always
for this tool" answer lasts for the run).

The TUI sets an asker (`set_asker`: its allow once / always / refuse modal); without one (the
CLI) a call the config does not allow is refused.
"""

from __future__ import annotations

from typing import Any

from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.service.lore import WorldInfoService
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.tools import Asker, Toolbox, ToolSpec
from tavern_tui.tools.builtin import BUILTIN_NAMES, LORE_SEARCH, ROLL_DICE, LoreSearch, RollDice
from tavern_tui.tools.guard import Guard
from tavern_tui.tools.mcp_client import McpManager


class ToolService:
    """Tools by playthrough (`tavern.tools`).

    Args:
        ctx: settings (`[tools]`), the provider's key (never given to a tool).
        library, playthroughs, lore: what `lore_search` reads (the playthrough's effective books).
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService, playthroughs: PlaythroughService,
                 lore: WorldInfoService) -> None:
        self.ctx = ctx
        self.library = library
        self.playthroughs = playthroughs
        self.lore = lore
        settings = ctx.settings.tools
        secrets = [ctx.settings.provider.api_key]
        self.guard = Guard(settings.allow, None, secrets=secrets)
        self.mcp = McpManager(settings.mcp, secrets=secrets) if settings.mcp else None
        self._reported = 0

    @property
    def max_steps(self) -> int:
        """Requests one turn makes at most (`[tools] max_steps`)."""
        return self.ctx.settings.tools.max_steps

    def set_asker(self, asker: Asker | None) -> None:
        """Ask the person about calls the config does not allow (None: refuse them, the CLI's rule)."""
        self.guard.asker = asker

    def toolbox(self, playthrough_id: int) -> Toolbox | None:
        """The tools this playthrough's turns offer, or None when no tool is configured (the
        request then carries no `tools`, as before issue 19)."""
        settings = self.ctx.settings.tools
        if not settings.any:
            return None
        builtins: list[Any] = []
        if ROLL_DICE in settings.enabled:
            builtins.append(RollDice())
        if LORE_SEARCH in settings.enabled:
            builtins.append(LoreSearch(lambda: self._books(playthrough_id)))
        return Toolbox(builtins, self.guard, self.mcp)

    def _books(self, playthrough_id: int) -> list[Any]:
        view = self.playthroughs.playthrough(playthrough_id)
        with self.ctx.store.unit_of_work(write=False) as uow:
            record = uow.characters.get(view.character_id)
        return self.lore.effective_books(view.id, record, self.library.card(record))

    def listing(self) -> dict[str, Any]:
        """Every tool with its risk and allowed state (`tavern tools`): the built-ins (enabled
        or not), then each MCP server's (starting the servers), and each server's state.

        Returns:
            `{"tools": [{"name", "source", "risk", "enabled", "allowed", "description"}],
            "servers": [{"name", "state", "error", "tools"}], "max_steps"}`; `allowed` is
            "allowed", "ask" (the TUI asks) or "refused".
        """
        enabled = set(self.ctx.settings.tools.enabled)
        specs: list[tuple[ToolSpec, bool]] = [(t.spec, t.spec.name in enabled) for t in (RollDice(), LoreSearch(list))]
        assert [s.name for s, _ in specs] == list(BUILTIN_NAMES)
        if self.mcp is not None:
            try:
                specs += [(s, True) for s in self.mcp.tools_now()]
            except Exception as exc:  # noqa: BLE001 - a listing still shows the built-ins
                self.mcp.problems.append(f"listing the MCP servers failed: {exc}")
        tools = [{"name": s.name, "source": s.source, "risk": s.risk, "enabled": on,
                  "allowed": self.guard.state(s) if on else "off", "description": s.description}
                 for s, on in specs]
        return {"tools": tools, "servers": self.mcp.status() if self.mcp is not None else [],
                "problems": list(self.mcp.problems) if self.mcp is not None else [],
                "max_steps": self.max_steps}

    def take_problems(self) -> list[str]:
        """MCP server failures (could not start, crashed) not reported yet: each is returned once,
        so a surface can say it while the chat goes on."""
        if self.mcp is None:
            return []
        new = self.mcp.problems[self._reported:]
        self._reported = len(self.mcp.problems)
        return list(new)

    def close(self) -> None:
        """Stop the MCP servers (idempotent)."""
        if self.mcp is not None:
            self.mcp.close()
