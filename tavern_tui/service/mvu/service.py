"""Provides `MvuService` (`tavern.mvu`): MVU state records of a playthrough, initialised and committed. It
holds one `MvuMaterial`, one `MvuReading` and one `MvuCommits` and delegates to them.

Rules: `tavern_tui.mvu` (the pure rules) and `mvu.records` (how records live in the log), as the
package's docstring (`service.mvu`) sets out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tavern_tui.engine.events import Event
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.service.lore import WorldInfoService
from tavern_tui.service.mvu.committing import MvuCommits
from tavern_tui.service.mvu.material import MvuMaterial
from tavern_tui.service.mvu.reading import MvuReading, surface_events
from tavern_tui.service.mvu.views import MvuBound, MvuView
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.variables import VariableService


class MvuService:
    """Reads and commits MVU records.

    Args:
        ctx: the store. library, lore: the card and its books. playthroughs: heads. variables: the macro
            variables macros in [InitVar] contents and replies are expanded with.
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService, playthroughs: PlaythroughService,
                 lore: WorldInfoService, variables: VariableService) -> None:
        self.ctx = ctx
        self.material = MvuMaterial(ctx, library, playthroughs, lore, variables)  # holds the rest

        def surface(session_id: int) -> list[Event]:  # resolved on each use: a stand-in set on this service is seen
            return self.surface_events(session_id)

        self.reading = MvuReading(self.material, surface)
        self.commits = MvuCommits(self.material, surface)

    # -- reading -----------------------------------------------------------------------------------------
    def surface_events(self, session_id: int) -> list[Event]:
        """The session's surface, plus the MVU commits its ancestors made just after the fork point for a message
        on it (`reading.surface_events`)."""
        return surface_events(self.ctx.store.events, session_id)

    def head(self, playthrough_id: int, view: Any = None) -> MvuView:
        """The record at the head: the committed one, else the initial record computed now (not committed),
        else None (no MVU material). `view`: the playthrough's `PlaythroughView` when the caller has just
        read it (a step's assembly), saving the read.

        Raises:
            NotFound: no such playthrough.
        """
        return self.reading.head(playthrough_id, view)

    def snapshot(self, playthrough_id: int, view: Any = None) -> dict[str, Any]:
        """The bound snapshot a step of the playthrough reads (`mvu.snapshot_variables` of the head record);
        `view` as for `head`."""
        return self.reading.snapshot(playthrough_id, view)

    def display_texts(self, playthrough_id: int) -> dict[tuple[int, int], str]:
        """`message_texts` of the playthrough's head session; {} without MVU state (no read of the log then)."""
        return self.reading.display_texts(playthrough_id)

    def message_texts(self, session_id: int) -> dict[tuple[int, int], str]:
        """`MvuBound.texts` for a session's surface: each assistant message a reply commit names (kept per log
        version: a transcript asks on every redraw)."""
        return self.reading.message_texts(session_id)

    def bound(self, playthrough_id: int, pending: Sequence[str] = ()) -> MvuBound:
        """The state a request is built from: the head record, then the commands of `pending` (the person's
        messages this step sends, in order) applied to it; computed, never committed (`MvuReading.bound`)."""
        return self.reading.bound(playthrough_id, pending)

    # -- committing --------------------------------------------------------------------------------------
    def ensure_initialised(self, playthrough_id: int) -> bool:
        """Commit the initial record when the head has MVU material and no record yet (before a generation).
        Returns whether a record was committed now."""
        return self.commits.ensure_initialised(playthrough_id)

    def needs_initialising(self, playthrough_id: int) -> bool:
        """Whether `ensure_initialised` would commit a record now (reads only; `MvuCommits.needs_initialising`)."""
        return self.commits.needs_initialising(playthrough_id)

    def _append(self, session_id: int, events: list[Event], part: dict[str, Any],
                origin: str = "reply") -> list[Event] | None:
        """The compare-and-set: append only if no state commit landed in the session since `events` were read."""
        return self.commits.append(session_id, events, part, origin)

    def commit_reply(self, playthrough_id: int, session_id: int, message: Event) -> MvuView | None:
        """Run a settled assistant reply's commands on the record before it and commit the result, after the
        person's messages' own commits (`MvuCommits.commit_reply`). None when there is no MVU state or the
        reply is too short.

        Raises:
            StoreBusy: the base kept moving `CAS_TRIES` times.
        """
        return self.commits.commit_reply(playthrough_id, session_id, message)

    def commit_commands(self, playthrough_id: int, text: str) -> MvuView:
        """Run MVU commands written by a state tool (`mvu_update`) on the record at the head and commit the
        result as a reply's update is committed (`MvuCommits.commit_commands`).

        Returns:
            The record after, its `changes` and `refused`; `committed` False when nothing changed.

        Raises:
            TavernError: the playthrough has no MVU state.
            StoreBusy: the base kept moving `CAS_TRIES` times.
        """
        return self.commits.commit_commands(playthrough_id, text)
