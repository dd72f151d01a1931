"""Provides `ServiceContext`, what every per-area service shares: the settings, the open store,
the provider and the token counter. The facade (`service.facade.Tavern`) builds one per
`Tavern` and hands it to each service it composes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tavern_tui.config import Settings
from tavern_tui.engine.stream import Provider
from tavern_tui.store.store import Store


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
