"""Provides `VariableService` (`tavern.variables`): macro variables, local per branch and global per profile.

Rules: issue 17 §2 and `engine.state` (durable `state/commit` events). Local variables are SillyTavern's
`chat_metadata.variables`, folded over the head session's surface (a fork inherits its parent's at the fork
point; a swipe re-derives them from before the swiped reply). Global variables are SillyTavern's
`extension_settings.variables.global`, folded over every session's commits, oldest first. Steps stage their
writes (the assemblers); the person's own changes (`set`, `delete`) are committed here at once, as one
operator `state/commit` on the head session.
"""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass, field
from typing import Any

from tavern_tui.assembly.macros import MacroContext, substitute
from tavern_tui.engine.events import EventKind
from tavern_tui.engine.log import surface_of
from tavern_tui.engine.state import (
    FOLD_KINDS,
    STATE_KIND,
    VARIABLES_PART,
    StagedWrites,
    discarded_commits,
    global_variables_of,
    local_variables_of,
    variable_history,
)
from tavern_tui.errors import TavernError
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.secrets import configured_secrets, refuse_configured
from tavern_tui.text.secret_values import holds_secret

__all__ = ["SCOPES", "VariableService", "VariablesView"]

SCOPES = ("local", "global")


@dataclass(frozen=True)
class VariablesView:
    """The variables at a playthrough's head: `local` and `global` maps of name → JSON value."""

    playthrough_id: int
    local: dict[str, object] = field(default_factory=dict)
    global_: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """`{"playthrough", "local", "global"}`."""
        return {"playthrough": self.playthrough_id, "local": dict(self.local), "global": dict(self.global_)}


class VariableService:
    """Reads and changes macro variables.

    Args:
        ctx: the shared store.
        playthroughs: resolves a playthrough to its head session.
    """

    def __init__(self, ctx: ServiceContext, playthroughs: PlaythroughService) -> None:
        self.ctx = ctx
        self.playthroughs = playthroughs
        self._globals: tuple[tuple[int, int], dict[str, object]] | None = None
        self._locals: dict[int, tuple[tuple[int, int], dict[str, object]]] = {}  # session → (version, fold)

    # -- reading ---------------------------------------------------------------------------------------------
    def global_variables(self) -> dict[str, object]:
        """The profile's global variables now: the commits (and the few cut-short attempts) are read with their
        bodies, the request headers that pair steps with commits by reference only; cached until the log
        changes (`version`), so previews on every keystroke do not refold."""
        log = self.ctx.store.events
        version = log.version()
        if self._globals is not None and self._globals[0] == version:
            return dict(self._globals[1])
        events = log.events_of_kind([STATE_KIND, EventKind.ASSISTANT_ATTEMPT])
        bodies = {e.ref: e for e in events}
        marks = [((sid, seq), kind, bodies[(sid, seq)].body if (sid, seq) in bodies else {})
                 for sid, seq, kind in log.kind_refs(list(FOLD_KINDS))]
        result = global_variables_of([e for e in events if e.kind == STATE_KIND], discarded_commits(marks))
        self._globals = (version, result)
        return dict(result)

    def _has_variables(self, session_id: int) -> bool:
        """Whether any commit on the session's surface holds variables: without one there is nothing
        to fold, and the fold reads the whole surface (after every append: ~100 ms at 5,000 messages).
        One read of the `state/commit` events on the (session, kind) index tells."""
        reader = getattr(self.ctx.store.events, "surface_events_of", None)
        if reader is None:
            return True
        return any(VARIABLES_PART in event.body for event in reader(session_id, [STATE_KIND]))

    def session_variables(self, session_id: int) -> dict[str, object]:
        """The local variables at the end of `session_id`'s surface (its ancestors' commits included); the fold
        is cached per session until the log changes (`version`: a preview otherwise refolds 5,000 events)."""
        log = self.ctx.store.events
        version = log.version() if hasattr(log, "version") else None
        cached = self._locals.get(session_id)
        if version is not None and cached is not None and cached[0] == version:
            return copy.deepcopy(cached[1])  # callers stage macro writes into it
        result = local_variables_of(log.surface_events(session_id)) if self._has_variables(session_id) else {}
        if version is not None:
            if len(self._locals) >= 16:
                self._locals.clear()
            self._locals[session_id] = (version, copy.deepcopy(result))
        return result

    def variables(self, playthrough_id: int) -> VariablesView:
        """The local and global variables at the playthrough's head.

        Raises:
            NotFound: no such playthrough.
        """
        view = self.playthroughs.playthrough(playthrough_id)
        return VariablesView(playthrough_id, self.session_variables(view.session_id), self.global_variables())

    def macro_context(self, session_id: int, chat_id: str = "") -> MacroContext:
        """A base macro context holding the variables a step on `session_id` starts from."""
        secrets = configured_secrets(self.ctx.settings, self.ctx.provider)
        refuse = (lambda text: holds_secret(text, secrets)) if secrets else None
        return MacroContext(local_vars=self.session_variables(session_id), global_vars=self.global_variables(),
                            chat_id=chat_id, refuse_write=refuse)

    def history(self, playthrough_id: int) -> list[dict[str, Any]]:
        """Each variables commit on the head surface, oldest first, with the message it follows.

        Returns:
            `{"ref", "origin", "local", "global", "after_message", "message_preview"}` each: `local`/`global`
            are the `{"set", "delete"}` changes; `after_message` is the number (1-based) of the visible message
            the commit follows (0 = before any), `message_preview` its first 60 characters.
        """
        view = self.playthroughs.playthrough(playthrough_id)
        events = self.ctx.store.events.surface_events(view.session_id)
        position = {e.ref: i for i, e in enumerate(events)}
        out = []
        for entry in variable_history(events):
            before = events[:position[tuple(entry["ref"])]]
            shown = [m for m in surface_of(before) if m.role in ("user", "assistant")]
            entry["after_message"] = len(shown)
            entry["message_preview"] = shown[-1].content[:60] if shown else ""
            out.append(entry)
        return out

    def evaluate(self, text: str, *, user: str | None = None, char: str | None = None,
                 playthrough_id: int | None = None, seed: int | None = None) -> dict[str, Any]:
        """Expand `text` with the macro engine and return `{"output", "variables": {"local", "global"},
        "limits"}` (`limits`: the safety limits that stopped it, [] normally). Nothing is ever committed.

        Args:
            user, char: the names for `{{user}}`/`{{char}}` (default: the playthrough's, else "User"/"Character").
            playthrough_id: start from its variables at the head (read only); None = fresh, empty variables.
            seed: seeds `{{random}}`/`{{roll}}` (None = not reproducible).

        Raises:
            NotFound: no such playthrough.
        """
        local: dict[str, object] = {}
        glob: dict[str, object] = {}
        chat_id = ""
        if playthrough_id is not None:
            view = self.playthroughs.playthrough(playthrough_id)
            local, glob = copy.deepcopy(self.session_variables(view.session_id)), copy.deepcopy(self.global_variables())
            user = user if user is not None else view.user_name
            char = char if char is not None else view.character_name
            chat_id = f"playthrough-{playthrough_id}"
        ctx = MacroContext(user="User" if user is None else user, char="Character" if char is None else char,
                           local_vars=local, global_vars=glob, chat_id=chat_id,
                           rng=random.Random(seed) if seed is not None else random.random)
        output = substitute(text, ctx)
        return {"output": output, "variables": {"local": ctx.local_vars, "global": ctx.global_vars},
                "limits": sorted(ctx.limits_hit)}

    # -- changing --------------------------------------------------------------------------------------------
    def set(self, playthrough_id: int, name: str, value: object, *, scope: str = "local") -> VariablesView:
        """Set one variable (a durable operator commit on the head session) and return the new state.

        Raises:
            TavernError: an empty name or an unknown scope. NotFound: no such playthrough.
            SecretRefused: the name or value holds the configured API key (any form): a variable is
                stored, printed and readable by every card (a global one by any chat).
        """
        name = self._name(name)
        refuse_configured(json.dumps([name, value], ensure_ascii=False, default=str),
                          configured_secrets(self.ctx.settings, self.ctx.provider), f"{scope} variable")
        return self._commit(playthrough_id, scope, {"set": {name: value}})

    def delete(self, playthrough_id: int, name: str, *, scope: str = "local") -> VariablesView:
        """Delete one variable (a durable operator commit); deleting a missing one changes nothing.

        Raises:
            TavernError: an empty name, an unknown scope, or no such variable. NotFound: no such playthrough.
        """
        current = self.variables(playthrough_id)
        name = self._name(name)
        if name not in (current.local if scope == "local" else current.global_):
            raise TavernError(f"no {scope} variable named {name!r} in playthrough {playthrough_id}")
        return self._commit(playthrough_id, scope, {"delete": [name]})

    @staticmethod
    def _name(name: str) -> str:
        name = name.strip()
        if not name:
            raise TavernError("a variable needs a name (NAME=VALUE)")
        return name

    def _commit(self, playthrough_id: int, scope: str, change: dict[str, Any]) -> VariablesView:
        if scope not in SCOPES:
            raise TavernError(f"variable scope must be local or global, not {scope!r}")
        view = self.playthroughs.playthrough(playthrough_id)
        staged = StagedWrites()
        staged.stage(VARIABLES_PART, {scope: change})
        event = staged.event("operator")
        assert event is not None
        self.ctx.store.events.append(view.session_id, [event])
        return self.variables(playthrough_id)

    def commit_imported(self, session_id: int, local: dict[str, object]) -> None:
        """Keep an imported chat's `chat_metadata.variables` as the session's first local state (origin import)."""
        staged = StagedWrites()
        staged.stage(VARIABLES_PART, {"local": {"set": dict(local)}} if local else None)
        event = staged.event("import")
        if event is not None:
            self.ctx.store.events.append(session_id, [event])
