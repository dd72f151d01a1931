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
they are not per branch, as in SillyTavern. A step's commit does not count when that step ended in a
cancelled or failed attempt (`assistant/attempt` with `cancelled` or `error`): the step that pairs with it is
found by its request header, which the engine appends in the same batch right after the commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tavern_tui.engine.events import Event, EventKind, NewEvent

__all__ = ["FOLD_KINDS", "ORIGINS", "STATE_KIND", "VARIABLES_PART", "StagedWrites", "apply_variable_change",
           "discarded_commits", "global_variables_of", "local_variables_of", "variable_change", "variable_history"]

STATE_KIND = "state/commit"
"""Event kind of one commit of staged state writes (body described in the module docstring)."""

VARIABLES_PART = "variables"
FOLD_KINDS = (STATE_KIND, EventKind.REQUEST_HEADER, EventKind.ASSISTANT_ATTEMPT)
"""The kinds a fold needs: the commits, the headers that pair them with their steps, the cut-short settles."""
ORIGINS = ("step", "operator", "import", "reply")
"""Who made a commit: a step's build, the person, an import, or a settled reply (MVU's update commands, issue 18:
committed after the reply, so never discarded with a failed step)."""


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


def discarded_commits(marks: Iterable[tuple[tuple[int, int], str, Mapping[str, Any]]]) -> set[tuple[int, int]]:
    """Refs of step commits whose step ended cancelled or failed.

    `marks`: (ref, kind, body) of the commits, request headers and settles, in order per session (a header's
    body is not read and may be {}). A step's commit is followed by its header in the same batch; its settle
    is the next attempt or message after that header.
    """
    out: set[tuple[int, int]] = set()
    awaiting: dict[int, tuple[int, int]] = {}  # per session: the commit waiting for its header
    current: dict[int, tuple[int, int] | None] = {}  # per session: the commit of the step now running
    for ref, kind, body in marks:
        sid = ref[0]
        if kind == STATE_KIND:
            if body.get("origin", "step") == "step":
                awaiting[sid] = ref
        elif kind == EventKind.REQUEST_HEADER:
            current[sid] = awaiting.pop(sid, None)
        elif kind == EventKind.ASSISTANT_ATTEMPT:
            commit = current.pop(sid, None)
            if commit is not None and (body.get("cancelled") or body.get("error")):
                out.add(commit)
        elif kind in (EventKind.ASSISTANT_MESSAGE, EventKind.USER_MESSAGE):
            current.pop(sid, None)  # settled: the step was kept
    return out


def _parts(events: Iterable[Event], discarded: set[tuple[int, int]] | None = None,
           ) -> Iterable[tuple[Event, Mapping[str, Any]]]:
    events = list(events)
    if discarded is None:
        discarded = discarded_commits((e.ref, e.kind, e.body) for e in events)
    for event in events:
        if event.kind != STATE_KIND or event.ref in discarded:
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


def global_variables_of(events: Iterable[Event], discarded: set[tuple[int, int]] | None = None) -> dict[str, object]:
    """Global variables after every commit in `events` (any sessions), applied oldest first. `discarded`: the
    refs of commits not to apply (`discarded_commits`); None = worked out from `events` (then they must hold
    the `FOLD_KINDS` events in seq order per session)."""
    ordered = sorted(_parts(events, discarded), key=lambda pair: (pair[0].created_at, pair[0].session_id, pair[0].seq))
    out: dict[str, object] = {}
    for _event, part in ordered:
        apply_variable_change(out, part.get("global"))
    return out


def variable_history(events: Iterable[Event]) -> list[dict[str, Any]]:
    """Each variables commit on a surface, in order: `{"ref": [session, seq], "origin", "local", "global"}`."""
    return [{"ref": list(event.ref), "origin": event.body.get("origin", "step"),
             "local": dict(part.get("local") or {}), "global": dict(part.get("global") or {})}
            for event, part in _parts(events)]
