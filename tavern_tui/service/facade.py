"""Provides `Tavern`, the one facade every user operation goes through (CLI, TUI and HTTP alike).

It opens the store and the provider, builds the shared `ServiceContext`, then composes the
per-area services in dependency order and exposes each as an attribute (`tavern.timeline.swipe`,
`tavern.lore.bind_world_book`, ...). The services return plain dataclasses, never ORM objects.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from tavern_tui.config import Settings
from tavern_tui.engine.stream import Provider
from tavern_tui.service.context import ServiceContext
from tavern_tui.store.store import Store
from tavern_tui.text.secret_values import without_credentials
from tavern_tui.text.tokens import make_counter

if TYPE_CHECKING:
    from tavern_tui.service.chat_files import ChatFileService
    from tavern_tui.service.compaction import CompactionService
    from tavern_tui.service.imports import ImportService
    from tavern_tui.service.inbox import InboxService
    from tavern_tui.service.library import LibraryService
    from tavern_tui.service.lore import WorldInfoService
    from tavern_tui.service.persona import PersonaService
    from tavern_tui.service.playthroughs import PlaythroughService
    from tavern_tui.service.presets import PresetService
    from tavern_tui.service.steps import StepRunner
    from tavern_tui.service.strategies import StrategyService
    from tavern_tui.service.timeline import TimelineService
    from tavern_tui.service.traces import TraceService
    from tavern_tui.service.variables import VariableService


T = TypeVar("T")


class _area(Generic[T]):  # noqa: N801 - used as a decorator, like functools.cached_property
    """A facade attribute built on first use and kept (in the instance's `__dict__`, so later
    reads skip this descriptor). Building takes the facade's lock: TUI workers run in threads,
    and two of them must never build two copies of an area (each holds caches)."""

    def __init__(self, build: Callable[[Tavern], T]) -> None:
        self._build = build
        self._name = build.__name__
        self.__doc__ = build.__doc__

    def __get__(self, instance: Tavern | None, owner: type | None = None) -> T:
        if instance is None:
            return self  # type: ignore[return-value]
        with instance._areas_lock:  # re-entrant: an area builds the areas it calls
            if self._name not in instance.__dict__:
                instance.__dict__[self._name] = self._build(instance)
            return instance.__dict__[self._name]  # type: ignore[no-any-return]


def make_provider(settings: Settings) -> Provider:
    """The OpenAI-compatible adapter when an endpoint is configured, else the offline demo."""
    if settings.provider.base_url:
        from tavern_tui.providers.openai_compat import OpenAICompatProvider

        return OpenAICompatProvider(settings.provider)
    from tavern_tui.providers.demo import DemoProvider

    return DemoProvider()


class Tavern:
    """Every user operation, by area: import, characters, playthroughs, world info, presets,
    strategies, persona, steps, the timeline, traces and chat files.

    Args:
        settings: database URL, provider endpoint, default user name.
        provider: overrides the provider chosen from settings (tests, demo).
        store: an already open store (tests); otherwise one is opened on `settings.db_url`.

    Attributes:
        library: characters and card imports (`LibraryService`).
        persona: the persona, beliefs and nominations (`PersonaService`).
        lore: world books, bindings and world info (`WorldInfoService`).
        presets: presets (`PresetService`); strategies: assembly strategies (`StrategyService`).
        playthroughs: playthroughs, messages, `resolve` and `apply_selection` (`PlaythroughService`).
        timeline: swipes, edits, rollback, branches, the variant tree (`TimelineService`).
        inbox: queued and steer input waiting for the next step (`InboxService`).
        steps: send, reply, regenerate, continue, impersonate and their dry runs (`StepRunner`).
        compaction: the context limit and summaries that replace old turns (`CompactionService`).
        traces: recorded requests (`TraceService`); chat_files: SillyTavern chats (`ChatFileService`).
        imports: files and folders of any kind (`ImportService`).
        variables: macro variables, local per branch and global (`VariableService`).

    Every cache lives in one of the services, so it lasts as long as this `Tavern`.

    Raises:
        StoreError: the database cannot be opened or migrated.
    """

    def __init__(self, settings: Settings, provider: Provider | None = None, store: Store | None = None) -> None:
        self.settings = settings
        self.store = store if store is not None else Store(settings.db_url)
        self.provider = provider if provider is not None else make_provider(settings)
        ctx = ServiceContext(settings, self.store, self.provider, make_counter(settings.tokenizer or None))
        self.ctx = ctx
        self._areas_lock = threading.RLock()

    # Each area is built (and its module imported) on first use, with the areas it calls: a
    # command that lists sessions never loads the step runner, the lore engine or the HTTP
    # client (issue 22). The dependency order is the properties' call order.

    @_area
    def library(self) -> LibraryService:
        from tavern_tui.service.library import LibraryService

        return LibraryService(self.ctx)

    @_area
    def persona(self) -> PersonaService:
        from tavern_tui.service.persona import PersonaService

        return PersonaService(self.ctx, self.library)

    @_area
    def lore(self) -> WorldInfoService:
        from tavern_tui.service.lore import WorldInfoService

        return WorldInfoService(self.ctx, self.library)

    @_area
    def presets(self) -> PresetService:
        from tavern_tui.service.presets import PresetService

        return PresetService(self.ctx, self.library)

    @_area
    def strategies(self) -> StrategyService:
        from tavern_tui.service.strategies import StrategyService

        return StrategyService(self.ctx, self.presets)

    @_area
    def playthroughs(self) -> PlaythroughService:
        from tavern_tui.service.playthroughs import PlaythroughService

        return PlaythroughService(self.ctx, self.library, self.persona, self.presets, self.lore, self.strategies)

    @_area
    def timeline(self) -> TimelineService:
        from tavern_tui.service.timeline import TimelineService

        return TimelineService(self.ctx, self.library, self.playthroughs)

    @_area
    def variables(self) -> VariableService:
        from tavern_tui.service.variables import VariableService

        return VariableService(self.ctx, self.playthroughs)

    @_area
    def inbox(self) -> InboxService:
        from tavern_tui.service.inbox import InboxService

        return InboxService(self.ctx, self.playthroughs)

    @_area
    def compaction(self) -> CompactionService:
        from tavern_tui.service.compaction import CompactionService

        return CompactionService(self.ctx, self.playthroughs, self.presets)

    @_area
    def steps(self) -> StepRunner:
        from tavern_tui.service.steps import StepRunner

        return StepRunner(self.ctx, self.library, self.playthroughs, self.lore, self.persona, self.presets,
                          self.strategies, self.timeline, self.variables, self.compaction, inbox=self.inbox)

    @_area
    def traces(self) -> TraceService:
        from tavern_tui.service.traces import TraceService

        return TraceService(self.ctx, self.playthroughs, self.timeline)

    @_area
    def chat_files(self) -> ChatFileService:
        from tavern_tui.service.chat_files import ChatFileService

        return ChatFileService(self.ctx, self.library, self.playthroughs, self.strategies, self.timeline)

    @_area
    def imports(self) -> ImportService:
        from tavern_tui.service.imports import ImportService

        return ImportService(self.library, self.lore, self.presets, self.persona, self.chat_files)

    def __repr__(self) -> str:
        return f"Tavern(db_url={without_credentials(self.settings.db_url)!r}, provider={self.provider_label!r})"

    @property
    def provider_label(self) -> str:
        """"<provider> · <model>" for status lines; never contains the API key."""
        model = getattr(self.provider, "model", "") or "default model"
        return f"{self.provider.name} · {model}"

    def close(self) -> None:
        """Close the database (the provider's HTTP client closes with `aclose_provider`)."""
        self.store.close()

    async def aclose_provider(self) -> None:
        """Close the provider's HTTP client, if it has one; call it on the loop that used it."""
        closer = getattr(self.provider, "aclose", None)
        if closer is not None:
            await closer()

    async def aclose(self) -> None:
        """Close the provider's HTTP client (if any) and the database."""
        await self.aclose_provider()
        self.close()
