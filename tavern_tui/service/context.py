"""Provides `ServiceContext`, what every per-area service shares: the settings, the open store,
the provider and the token counter. The facade (`service.facade.Tavern`) builds one per
`Tavern` and hands it to each service it composes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tavern_tui.config import Settings
from tavern_tui.engine.stream import Provider
from tavern_tui.store.store import Store

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

    def one_version(self) -> AbstractContextManager[Any]:
        """Reads on this thread see the log as of one version until the block ends
        (`EventLog.pinned_version`; an append on this thread ends it): a build, or a screen
        reading several things for one view, pays one version query for its caches' checks, and
        `per_build` reuses what it read. A log without the pin: no pin."""
        pin = getattr(self.store.events, "pinned_version", None)
        return pin() if pin is not None else nullcontext()

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
        memo = self._builds
        if getattr(memo, "scope", None) is not scope:
            memo.scope, memo.values = scope, {}
        if key not in memo.values:
            memo.values[key] = compute()
        return memo.values[key]  # type: ignore[no-any-return]
