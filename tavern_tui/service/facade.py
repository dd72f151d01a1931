"""Provides `Tavern`, the one facade every user operation goes through (CLI, TUI and HTTP alike).

It opens the store and the provider, builds the shared `ServiceContext`, then composes the
per-area services in dependency order and exposes each as an attribute (`tavern.timeline.swipe`,
`tavern.lore.bind_world_book`, ...). The services return plain dataclasses, never ORM objects.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from tavern_tui.config import Settings
from tavern_tui.engine.stream import Provider
from tavern_tui.service.context import ServiceContext
from tavern_tui.store.store import Store
from tavern_tui.text.secret_values import without_credentials
from tavern_tui.text.tokens import make_counter

if TYPE_CHECKING:
    from tavern_tui.service.chat_files import ChatFileService
    from tavern_tui.service.chats import ChatService
    from tavern_tui.service.compaction import CompactionService
    from tavern_tui.service.group_files import GroupFileService
    from tavern_tui.service.groups import GroupService
    from tavern_tui.service.imports import ImportService
    from tavern_tui.service.inbox import InboxService
    from tavern_tui.service.library import LibraryService
    from tavern_tui.service.lore import WorldInfoService
    from tavern_tui.service.mvu import MvuService
    from tavern_tui.service.openings import OpeningService
    from tavern_tui.service.persona import PersonaService
    from tavern_tui.service.playthroughs import PlaythroughService
    from tavern_tui.service.presets import PresetService
    from tavern_tui.service.roleplay import RoleplayService
    from tavern_tui.service.scripts import ScriptService
    from tavern_tui.service.steps import StepRunner
    from tavern_tui.service.strategies import StrategyService
    from tavern_tui.service.templates import TemplateService
    from tavern_tui.service.timeline import TimelineService
    from tavern_tui.service.tools import ToolService
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

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> _area[T]: ...

    @overload
    def __get__(self, instance: Tavern, owner: type | None = None) -> T: ...

    def __get__(self, instance: Tavern | None, owner: type | None = None) -> T | _area[T]:
        if instance is None:
            return self
        with instance._areas_lock:  # re-entrant: an area builds the areas it calls
            if self._name not in instance.__dict__:
                instance.__dict__[self._name] = self._build(instance)
            return cast(T, instance.__dict__[self._name])  # what `_build` returned for this name


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
        chats: search across every chat and opening a result on its branch (`ChatService`).
        openings: opening drafts, the playthroughs not yet begun (`OpeningService`).
        templates: configuration templates, a playthrough's selections under a name (`TemplateService`).
        roleplay: the out-of-character toggle per playthrough and the `rp:policy` it gates (`RoleplayService`).
        steps: send, reply, regenerate, continue, impersonate and their dry runs (`StepRunner`).
        compaction: the context limit and summaries that replace old turns (`CompactionService`).
        traces: recorded requests (`TraceService`); chat_files: SillyTavern chats (`ChatFileService`).
        imports: files and folders of any kind (`ImportService`).
        variables: macro variables, local per branch and global (`VariableService`).
        mvu: MVU state records per message and swipe (`MvuService`, issue 18).
        tools: built-in and MCP tools, and the guard their calls go through (`ToolService`).
        groups: group chats' casts, their playthroughs and turn order (`GroupService`).
        group_files: SillyTavern group definitions and group chats, imported and exported (`GroupFileService`).

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

        service = PlaythroughService(self.ctx, self.library, self.persona, self.presets, self.lore, self.strategies)
        service.display = self.scripts.display_views  # card regex scripts decide what the transcript shows
        service.mvu_texts = lambda playthrough_id: self.mvu.display_texts(playthrough_id)  # resolved on use
        return service

    @_area
    def scripts(self) -> ScriptService:
        from tavern_tui.service.scripts import ScriptService

        return ScriptService(self.ctx, self.library)

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
    def groups(self) -> GroupService:
        from tavern_tui.service.groups import GroupService

        return GroupService(self.ctx, self.library, self.playthroughs, lambda: self.steps, lambda: self.inbox)

    @_area
    def compaction(self) -> CompactionService:
        from tavern_tui.service.compaction import CompactionService

        return CompactionService(self.ctx, self.playthroughs, self.presets)

    @_area
    def mvu(self) -> MvuService:
        from tavern_tui.service.mvu import MvuService

        return MvuService(self.ctx, self.library, self.playthroughs, self.lore, self.variables)

    @_area
    def tools(self) -> ToolService:
        from tavern_tui.service.tools import ToolService

        return ToolService(self.ctx, self.library, self.playthroughs, self.lore, self.mvu)

    @_area
    def steps(self) -> StepRunner:
        from tavern_tui.service.steps import StepRunner

        return StepRunner(self.ctx, self.library, self.playthroughs, self.lore, self.persona, self.presets,
                          self.strategies, self.timeline, self.variables, self.compaction,
                          inbox=self.inbox, mvu=self.mvu, tools=self.tools, scripts=self.scripts)

    @_area
    def templates(self) -> TemplateService:
        from tavern_tui.service.templates import TemplateService

        return TemplateService(self.ctx, self.persona, self.playthroughs)

    @_area
    def roleplay(self) -> RoleplayService:
        from tavern_tui.service.roleplay import RoleplayService

        return RoleplayService(self.ctx)

    @_area
    def openings(self) -> OpeningService:
        from tavern_tui.service.openings import OpeningService

        return OpeningService(self.ctx, self.library, self.persona, self.presets, self.lore, self.strategies,
                              self.playthroughs, self.steps, self.templates)

    @_area
    def chats(self) -> ChatService:
        from tavern_tui.service.chats import ChatService

        return ChatService(self.ctx, self.library, self.playthroughs, self.timeline)

    @_area
    def traces(self) -> TraceService:
        from tavern_tui.service.traces import TraceService

        return TraceService(self.ctx, self.playthroughs, self.timeline, lambda: self.tools)

    @_area
    def chat_files(self) -> ChatFileService:
        from tavern_tui.service.chat_files import ChatFileService

        return ChatFileService(self.ctx, self.library, self.playthroughs, self.strategies, self.timeline)

    @_area
    def group_files(self) -> GroupFileService:
        from tavern_tui.service.group_files import GroupFileService

        return GroupFileService(self.ctx, self.groups, self.chat_files)

    @_area
    def imports(self) -> ImportService:
        from tavern_tui.service.imports import ImportService

        return ImportService(self.library, self.lore, self.presets, self.persona, self.chat_files,
                             scripts=self.scripts, group_files=self.group_files)

    def __repr__(self) -> str:
        return f"Tavern(db_url={without_credentials(self.settings.db_url)!r}, provider={self.provider_label!r})"

    @property
    def provider_label(self) -> str:
        """"<provider> · <model>" for status lines; never contains the API key."""
        model = self.provider.model or "default model"
        return f"{self.provider.name} · {model}"

    def one_version(self) -> AbstractContextManager[Any]:
        """Reads on this thread see the database's log as of one version until the block ends
        (`ServiceContext.one_version`): a screen reading several things for one view (the
        chat's state after a swipe) asks once whether the log changed, not at every read."""
        return self.ctx.one_version()

    async def apply_settings(self, settings: Settings) -> None:
        """Use `settings` from now on, without a restart (the settings screen, issue 21 item 1):
        a new provider for the new endpoint (the old one's HTTP client is closed on this loop),
        a new token counter, and the settings every service reads through the shared context.
        A test's injected provider is kept when the endpoint did not change. The database URL
        is not switched (it takes a restart; the screen says so)."""
        old = self.provider
        if settings.provider != self.settings.provider:
            self.provider = make_provider(settings)
        self.settings = settings
        self.ctx.settings = settings
        self.ctx.provider = self.provider
        self.ctx.token_counter = make_counter(settings.tokenizer or None)
        if old is not self.provider:
            closer = getattr(old, "aclose", None)
            if closer is not None:
                await closer()

    def close(self) -> None:
        """Stop the MCP servers and close the database (the provider's HTTP client closes with
        `aclose_provider`)."""
        tools = self.__dict__.get("tools")  # only if it was built: closing must not start the area
        if tools is not None:
            tools.close()
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
