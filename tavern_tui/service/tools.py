"""Provides `ToolService`: the tools a playthrough's turns may call (issue 19) — the enabled
built-ins, the declared MCP servers (one `McpManager` per `Tavern`, started on first use,
stopped at `close`), and the guard every call goes through (one per `Tavern`, so an "always
for this tool" answer lasts for the run).

The TUI sets an asker (`set_asker`: its allow once / always / refuse modal); without one (the
CLI) a call the config does not allow is refused.
"""

from __future__ import annotations

from typing import Any

from tavern_tui.paths import cache_dir
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.service.lore import WorldInfoService
from tavern_tui.service.mvu import MvuService
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.tools import Asker, Toolbox, ToolSpec
from tavern_tui.tools.builtin import (
    BUILTIN_NAMES,
    LORE_SEARCH,
    MVU_READ,
    MVU_UPDATE,
    ROLL_DICE,
    STATE_TOOLS,
    LoreSearch,
    MvuRead,
    MvuUpdate,
    RollDice,
)
from tavern_tui.tools.guard import Guard
from tavern_tui.tools.mcp_client import McpManager


class ToolService:
    """Tools by playthrough (`tavern.tools`).

    Args:
        ctx: settings (`[tools]`), the provider's key (never given to a tool).
        library, playthroughs, lore: what `lore_search` reads (the playthrough's effective books).
        mvu: the MVU state the state tools read and commit (None: no state tools).
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService, playthroughs: PlaythroughService,
                 lore: WorldInfoService, mvu: MvuService | None = None) -> None:
        self.ctx = ctx
        self.library = library
        self.playthroughs = playthroughs
        self.lore = lore
        self.mvu = mvu
        settings = ctx.settings.tools
        secrets = [ctx.settings.provider.key]
        self.guard = Guard(settings.allow, None, secrets=secrets)
        # the servers' tool lists are cached: a turn or `tavern tools` does not wait for a start
        self.mcp = McpManager(settings.mcp, secrets=secrets, cache_dir=cache_dir()) if settings.mcp else None
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
        request then carries no `tools`, as before issue 19). The state tools (`mvu_read`,
        `mvu_update`) are offered only when the playthrough has MVU state (its head holds a record).
        Reads the database: call it off the event loop."""
        settings = self.ctx.settings.tools
        if not settings.any:
            return None
        builtins: list[Any] = []
        if ROLL_DICE in settings.enabled:
            builtins.append(RollDice())
        if LORE_SEARCH in settings.enabled:
            builtins.append(LoreSearch(lambda: self._books(playthrough_id)))
        if any(n in settings.enabled for n in STATE_TOOLS) and self.has_state(playthrough_id):
            mvu = self.mvu
            assert mvu is not None
            if MVU_READ in settings.enabled:
                builtins.append(MvuRead(lambda: mvu.snapshot(playthrough_id)))
            if MVU_UPDATE in settings.enabled:
                builtins.append(MvuUpdate(lambda text: mvu.commit_commands(playthrough_id, text).to_json()))
        return Toolbox(builtins, self.guard, self.mcp)

    def has_state(self, playthrough_id: int) -> bool:
        """Whether the playthrough has MVU state (the state tools are offered to it)."""
        return self.mvu is not None and self.mvu.head(playthrough_id).record is not None

    def preview(self, playthrough_id: int | None) -> list[dict[str, Any]]:
        """The tools the playthrough's next request would carry (`tavern preview`, the TUI's
        preview), in the order sent: `{"name", "risk", "source", "allowed"}` each; MCP servers are
        started to list theirs, as the request would (one that fails is left out, as there).
        `playthrough_id` None (an opening draft): the config's tools without the state tools."""
        settings = self.ctx.settings.tools
        if not settings.any:
            return []
        if playthrough_id is not None:
            box = self.toolbox(playthrough_id)
            specs = [t.spec for t in box.builtins.values()] if box is not None else []
        else:
            specs = [t.spec for t in self._stateless() if t.spec.name in settings.enabled]
        if self.mcp is not None:
            try:
                specs += self.mcp.tools_now()
            except Exception as exc:  # noqa: BLE001 - the preview still lists the built-ins
                self.mcp.problems.append(f"listing the MCP servers failed: {exc}")
        return [{"name": s.name, "risk": s.risk, "source": s.source, "allowed": self.guard.state(s)} for s in specs]

    @staticmethod
    def _stateless() -> list[Any]:
        return [RollDice(), LoreSearch(list)]

    def _books(self, playthrough_id: int) -> tuple[list[Any], tuple[str, str]]:
        """The effective books and (character, user) names their `{{char}}`/`{{user}}` read."""
        view = self.playthroughs.playthrough(playthrough_id)
        with self.ctx.store.unit_of_work(write=False) as uow:
            record = uow.characters.get(view.character_id)
        books = self.lore.effective_books(view.id, record, self.library.card(record))
        return books, (view.character_name, view.user_name)

    def listing(self) -> dict[str, Any]:
        """Every tool with its risk and allowed state (`tavern tools`): the built-ins (enabled
        or not), then each MCP server's (starting the servers), and each server's state.

        Returns:
            `{"tools": [{"name", "source", "risk", "enabled", "allowed", "description"(,
            "only_with": "MVU state" for the state tools, offered only to a chat that has it)}],
            "servers": [{"name", "state", "error", "tools"}], "max_steps"}`; `allowed` is
            "allowed", "ask" (the TUI asks) or "refused".
        """
        enabled = set(self.ctx.settings.tools.enabled)
        every = (RollDice(), LoreSearch(list), MvuRead(dict), MvuUpdate(lambda _text: {}))
        specs: list[tuple[ToolSpec, bool]] = [(t.spec, t.spec.name in enabled) for t in every]
        assert [s.name for s, _ in specs] == list(BUILTIN_NAMES)
        if self.mcp is not None:
            try:
                specs += [(s, True) for s in self.mcp.tools_now()]
            except Exception as exc:  # noqa: BLE001 - a listing still shows the built-ins
                self.mcp.problems.append(f"listing the MCP servers failed: {exc}")
        tools = [{"name": s.name, "source": s.source, "risk": s.risk, "enabled": on,
                  "allowed": self.guard.state(s) if on else "off", "description": s.description,
                  **({"only_with": "MVU state"} if s.name in STATE_TOOLS else {})}
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
