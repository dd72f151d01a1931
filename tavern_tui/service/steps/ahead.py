"""Provides `BuildsAhead`: the request of a send built while the person still looks at what they
typed, kept until Enter sends that text, so the step sends it without reading and assembling again.

Rules: a step's request is the one its build on the inputs of that moment gives (DESIGN.md "One
step": assemble once, off the loop). A build made ahead is sent only when nothing it read can have
changed since: the same playthrough and text, a plain send (no group member, no claim), the log at
the same version (`EventLog.version`: every append and fork), the database at the same
`Store.data_version` (every commit by anyone: cards, books, presets, persona, settings kept
there, another process), the same settings object, and the same minute of the local clock
(SillyTavern's `{{time}}`/`{{date}}` macros read the clock to the minute). A build ahead writes
nothing: it is not made when the step would write first (MVU's initial record), and the persona
pin the step moves (`PersonaService.persona_step`) is written when the build is taken. Anything
else and the step builds as it always did.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from tavern_tui.engine.step import Generation, Prebuilt


def minute_now() -> tuple[int, ...]:
    """The local clock's year, month, day, hour and minute: what time macros show."""
    return tuple(time.localtime()[:5])


@dataclass(frozen=True, slots=True)
class AheadKey:
    """What a build ahead depended on (see the module text)."""

    playthrough_id: int
    text: str
    log_version: tuple[int, int]
    data_version: int
    settings: Any
    minute: tuple[int, ...]

    def same(self, other: AheadKey) -> bool:
        """Equal inputs; the settings compared by identity (a new object is new settings)."""
        return (self.playthrough_id, self.text, self.log_version, self.data_version, self.minute) == (
            other.playthrough_id, other.text, other.log_version, other.data_version, other.minute) and (
            self.settings is other.settings)


@dataclass(frozen=True, slots=True)
class Ahead:
    """One build ahead: its key and what `StepRunner._prepare_step` returns for it (the
    playthrough view, the `Prebuilt`, its fit's context record, the persona id written as)."""

    key: AheadKey
    prepared: tuple[Any, Prebuilt, dict[str, Any] | None, int | None]


class BuildsAhead:
    """At most one build ahead per playthrough (the newest text's), taken once. Thread-safe: builds
    are kept from a worker thread while a step may take one in another."""

    def __init__(self) -> None:
        self._kept: dict[int, Ahead] = {}
        self._lock = threading.Lock()
        self.taken = 0
        """How many steps sent a build made ahead (the benchmarks and tests read it)."""

    @staticmethod
    def inputs_now(ctx: Any, playthrough_id: int, text: str) -> AheadKey | None:
        """The key of a build of `text` made now (`ctx`: the `ServiceContext`), or None where the
        database cannot say it changed (`Store.data_version`): nothing is built ahead there."""
        data = ctx.store.data_version()
        if data is None:
            return None
        return AheadKey(playthrough_id, text, ctx.store.events.version(), data, ctx.settings, minute_now())

    def keep(self, ahead: Ahead) -> None:
        """Keep `ahead` for its playthrough, in place of an older one."""
        with self._lock:
            self._kept[ahead.key.playthrough_id] = ahead

    def has(self, playthrough_id: int, text: str) -> bool:
        """Whether a build of `text` is kept for the playthrough (valid or not)."""
        with self._lock:
            kept = self._kept.get(playthrough_id)
        return kept is not None and kept.key.text == text

    def take(self, now: AheadKey, generation: Generation, claim: bool) -> Ahead | None:
        """The playthrough's build ahead when it was made on the inputs `now` (and the step is a
        plain send: the default `generation`, no claim), else None; either way it is dropped."""
        with self._lock:
            kept = self._kept.pop(now.playthrough_id, None)
        if kept is None or claim or generation != Generation() or not kept.key.same(now):
            return None
        self.taken += 1
        return kept

    def drop(self, playthrough_id: int) -> None:
        """Forget the playthrough's build ahead (a chat closed)."""
        with self._lock:
            self._kept.pop(playthrough_id, None)
