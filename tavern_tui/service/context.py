"""Provides `ServiceContext`, what every per-area service shares: the settings, the open store,
the provider and the token counter. The facade (`service.facade.Tavern`) builds one per
`Tavern` and hands it to each service it composes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from tavern_tui.config import Settings
from tavern_tui.engine.stream import Provider
from tavern_tui.store.store import Store

if TYPE_CHECKING:
    from tavern_tui.store.records import PlaythroughRecord
    from tavern_tui.store.repositories import CharacterRecord

T = TypeVar("T")


@dataclass
class ServiceContext:
    """The shared handles of one `Tavern`.

    Attributes:
        settings: the settings the facade was opened with.
        store: the open store (database); each service opens its own transactions (`store.unit_of_work()`).
        provider: the model provider every step streams from.
        token_counter: counts prompt tokens (`text.tokens.make_counter` of `settings.tokenizer`).
    """

    settings: Settings
    store: Store
    provider: Provider
    token_counter: Any

    @property
    def stale_after(self) -> float:
        """Seconds without a checkpoint after which a streaming reply counts as crashed: a live
        stream checkpoints at least once per read timeout (`settings.provider.timeout` + 15 s)."""
        return self.settings.provider.timeout + 15.0

    _builds: threading.local = field(default_factory=threading.local, repr=False, compare=False)
    _kept: dict[Hashable, Any] = field(default_factory=dict, repr=False, compare=False)
    _kept_at: tuple[int, Settings] | None = field(default=None, repr=False, compare=False)
    _kept_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @contextmanager
    def one_version(self) -> Iterator[Any]:
        """Reads on this thread see the log as of one version until the block ends
        (`EventLog.pinned_version`; an append on this thread ends it): a build, or a screen
        reading several things for one view, pays one version query for its caches' checks, and
        `per_build` reuses what it read. The database's `data_version` is read first, so what
        `per_version` keeps from this build is never older than the version it is kept under.
        A log without the pin: no pin."""
        pin = getattr(self.store.events, "pinned_version", None)
        if pin is None:
            yield None
            return
        data = self.store.data_version()
        with pin() as version:
            scope = self.store.events.pin_scope()
            memo = self._builds
            if scope is not None and getattr(memo, "scope", None) is not scope:
                memo.scope, memo.values, memo.data = scope, {}, data
            yield version

    def per_build(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()` once per `key` within the pinned build running on this thread
        (`EventLog.pinned_version`: a step's preparation, a preview, the gauge), which reads the
        store as of one version; outside one, or once this thread appended in it, every call
        computes. A step's preparation asks for the same playthrough view three times (its own,
        MVU's initialisation, MVU's bound state)."""
        pin_scope = getattr(self.store.events, "pin_scope", None)
        scope = pin_scope() if pin_scope is not None else None
        if scope is None:
            return compute()
        memo = self._memo(scope)
        if key not in memo.values:
            memo.values[key] = compute()
        return memo.values[key]  # type: ignore[no-any-return]

    def per_version(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`per_build`, and kept across builds while nothing was committed to the database
        (`Store.data_version`: by anyone, this process or another) and the settings are the same
        object: every build between two commits (the composer's token gauge, a request built
        ahead of Enter, the step itself) reads a playthrough's view, its personas and its books'
        stamps once, not ~20 queries each (5-8 ms of a step's preparation on a loaded box).
        The value must be read-only to its callers (views, tuples, lists they copy). Where the
        database cannot say it changed (in memory, PostgreSQL) it is `per_build`."""
        pin_scope = getattr(self.store.events, "pin_scope", None)
        scope = pin_scope() if pin_scope is not None else None
        if scope is None:
            return compute()
        memo = self._memo(scope)
        if key in memo.values:
            return memo.values[key]  # type: ignore[no-any-return]
        at = None if memo.data is None else (memo.data, self.settings)
        with self._kept_lock:
            if at is not None and self._kept_at is not None and at[0] == self._kept_at[0] and at[1] is self._kept_at[1]:
                if key in self._kept:
                    memo.values[key] = self._kept[key]
                    return memo.values[key]  # type: ignore[no-any-return]
        value = memo.values[key] = compute()
        if at is not None:  # what was read is at least as new as `at`: kept under it
            with self._kept_lock:
                if self._kept_at is None or at[0] != self._kept_at[0] or at[1] is not self._kept_at[1]:
                    self._kept_at, self._kept = at, {}
                self._kept[key] = value
        return value

    def playthrough_record(self, playthrough_id: int) -> PlaythroughRecord:
        """The playthrough's stored row (`per_version`: a build reads it once between two commits;
        its preparation asks five times: the head session, the preset, the persona pin, the
        assembler, the books). Raises NotFound."""
        def read() -> PlaythroughRecord:
            with self.store.unit_of_work(write=False) as uow:
                return uow.playthroughs.get(playthrough_id)
        return self.per_version(("playthrough-record", playthrough_id), read)

    def character_record(self, character_id: int) -> CharacterRecord:
        """The character's stored row (`per_version`, as `playthrough_record`). Raises NotFound."""
        def read() -> CharacterRecord:
            with self.store.unit_of_work(write=False) as uow:
                return uow.characters.get(character_id)
        return self.per_version(("character-record", character_id), read)

    def _memo(self, scope: object) -> Any:
        """This thread's memo for the pinned build `scope`: a fresh one for a build not begun by
        `one_version` has no data version (nothing of it is kept across builds)."""
        memo = self._builds
        if getattr(memo, "scope", None) is not scope:
            memo.scope, memo.values, memo.data = scope, {}, None
        return memo
