"""Provides durable branch state: staged writes committed with a step, and macro variables folded from them.

Rules: DESIGN.md "State: variables, MVU, templates" (seed 000 §8) and issue 17 §2. Writes made while building
a request are *staged* (`StagedWrites`); the engine appends the one `state/commit` event they make together
with the step's records, just before the request header, so only a step really admitted keeps them: a preview,
a failed build or a step refused before admission commits nothing. The event lives in the session log, so a
fork sees its parent's commits up to its fork point, and a swipe (a fork before the swiped reply) re-derives
the state from before that reply's step.

Body of a `state/commit` event: `{"origin": "step"|"operator"|"import", <part>: <change>, …}`, one part per
state kind. The `variables` part is `{"local": {"set": {name: value}, "delete": [name]}, "global": {…}}`
(values are JSON values, as SillyTavern keeps them in `chat_metadata.variables` /
`extension_settings.variables.global`). Another state kind (MVU, issue 18) joins by staging its own part
(`StagedWrites.stage("mvu", change)`) and folding that part with its own reader; the commit stays one event.

Local variables = the fold of the `variables.local` parts over a session's surface (ancestors included).
Global variables (per profile) = the fold of the `variables.global` parts over every session, oldest first:
they are not per branch, as in SillyTavern.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tavern_tui.engine.events import Event, NewEvent

__all__ = ["ORIGINS", "STATE_KIND", "VARIABLES_PART", "StagedWrites", "apply_variable_change", "global_variables_of",
           "local_variables_of", "variable_change", "variable_history"]

STATE_KIND = "state/commit"
"""Event kind of one commit of staged state writes (body described in the module docstring)."""

VARIABLES_PART = "variables"
ORIGINS = ("step", "operator", "import")


@dataclass
class StagedWrites:
    """Writes staged during one request build, by state kind; `event()` makes the one commit event.

    Each part is a JSON-ready change dict owned by its state kind ("variables": see `variable_change`).
    Staging a part twice replaces it (a kind stages its whole change once per build).
    """

    parts: dict[str, dict[str, Any]] = field(default_factory=dict)

    def stage(self, kind: str, change: Mapping[str, Any] | None) -> None:
        """Stage `kind`'s change; None or an empty change stages nothing."""
        if change:
            self.parts[kind] = dict(change)

    def event(self, origin: str = "step") -> NewEvent | None:
        """The `state/commit` event holding every staged part, or None when nothing was staged.

        Raises:
            ValueError: an origin outside `ORIGINS`.
        """
        if origin not in ORIGINS:
            raise ValueError(f"state commit origin must be one of {', '.join(ORIGINS)}, not {origin!r}")
        if not self.parts:
            return None
        return NewEvent(STATE_KIND, None, {"origin": origin, **self.parts})


def _scope_change(before: Mapping[str, object], after: Mapping[str, object]) -> dict[str, Any]:
    changed = {k: v for k, v in after.items() if k not in before or before[k] != v or type(before[k]) is not type(v)}
    deleted = sorted(k for k in before if k not in after)
    out: dict[str, Any] = {}
    if changed:
        out["set"] = changed
    if deleted:
        out["delete"] = deleted
    return out


def variable_change(local_before: Mapping[str, object], local_after: Mapping[str, object],
                    global_before: Mapping[str, object], global_after: Mapping[str, object]) -> dict[str, Any]:
    """The `variables` part for going from the before maps to the after maps ({} when nothing changed).

    A value counts as changed when it differs or its JSON type does ("5" → 5 is a change).
    """
    out: dict[str, Any] = {}
    local = _scope_change(local_before, local_after)
    glob = _scope_change(global_before, global_after)
    if local:
        out["local"] = local
    if glob:
        out["global"] = glob
    return out


def apply_variable_change(scope_vars: dict[str, object], change: Mapping[str, Any] | None) -> None:
    """Apply one scope's `{"set", "delete"}` change to `scope_vars` in place (deletes first, then sets)."""
    if not isinstance(change, Mapping):
        return
    for name in change.get("delete") or ():
        scope_vars.pop(str(name), None)
    sets = change.get("set")
    if isinstance(sets, Mapping):
        scope_vars.update({str(k): v for k, v in sets.items()})


def _parts(events: Iterable[Event]) -> Iterable[tuple[Event, Mapping[str, Any]]]:
    for event in events:
        if event.kind != STATE_KIND:
            continue
        part = event.body.get(VARIABLES_PART)
        if isinstance(part, Mapping):
            yield event, part


def local_variables_of(events: Iterable[Event]) -> dict[str, object]:
    """Local variables after `events` (a surface, in order: ancestors first)."""
    out: dict[str, object] = {}
    for _event, part in _parts(events):
        apply_variable_change(out, part.get("local"))
    return out


def global_variables_of(events: Iterable[Event]) -> dict[str, object]:
    """Global variables after every commit in `events` (any sessions), applied oldest first."""
    ordered = sorted(_parts(events), key=lambda pair: (pair[0].created_at, pair[0].session_id, pair[0].seq))
    out: dict[str, object] = {}
    for _event, part in ordered:
        apply_variable_change(out, part.get("global"))
    return out


def variable_history(events: Iterable[Event]) -> list[dict[str, Any]]:
    """Each variables commit on a surface, in order: `{"ref": [session, seq], "origin", "local", "global"}`."""
    return [{"ref": list(event.ref), "origin": event.body.get("origin", "step"),
             "local": dict(part.get("local") or {}), "global": dict(part.get("global") or {})}
            for event, part in _parts(events)]
