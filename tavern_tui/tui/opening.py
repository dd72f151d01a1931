"""Provides `OpeningTavern`: the service while it opens in a thread after the first screen is
painted, standing in for the `Tavern` the screens hold.

Why: opening the service loads SQLAlchemy, the store and the services (~0.5 s of a ~0.7 s start
on the benchmark database, B7 `cold_start`); the home screen's first list needs none of it
(`service.first_screen` reads it with the standard library). So `tavern` paints that list first
and opens the service behind it. Everything a screen asks of the service goes through this
object: `settings` at once (loaded before the app started), anything else when the service is
open; a worker asking earlier waits for it in its thread, and the event loop would too (nothing
on the home screen asks before its workers do).

Once the service is open, the same thread imports what the first chat needs (`warm`): the chat
screen's modules and the persona's safety patterns take ~0.4-0.5 s to import, which the first
Enter on a character paid before.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tavern_tui.config import Settings
    from tavern_tui.service import Tavern


class OpeningTavern:
    """The `Tavern` being opened by `open_service` in a thread (`start`), or already open.

    Attributes other than `settings` are the opened service's (waiting for it; raising what
    opening it raised); `settings` is the service's once it is open. `failed` is called, in the
    opening thread, with the exception when opening fails (the app quits and the command says why).

    Args:
        settings: the settings the service is opened with (the config file, environment, flags).
        open_service: opens the service (a `Tavern`); runs in the opening thread.
        warm: modules the opening thread imports once the service is open (`FIRST_CHAT`),
            so the first screen that needs them opens without importing them.
    """

    def __init__(self, settings: Settings, open_service: Callable[[], Tavern], warm: Sequence[str] = ()) -> None:
        self._settings = settings
        self._warm = tuple(warm)
        self.failed: Callable[[BaseException], None] | None = None
        self._open_service = open_service
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._tavern: Tavern | None = None
        self._error: BaseException | None = None

    @property
    def settings(self) -> Settings:
        """The service's settings once it is open (the settings screen may replace them), the
        settings it opens with until then."""
        opened = self.opened()
        return opened.settings if opened is not None else self._settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        self.wait().settings = value  # replacing them is a person's action: the service is open by then

    def start(self) -> None:
        """Start opening the service (once; later calls do nothing)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._open, name="tavern-open", daemon=True)
            self._thread.start()

    def _open(self) -> None:
        try:
            self._tavern = self._open_service()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever asks, and to `failed`
            self._error = exc
        finally:
            self._done.set()
        if self._error is not None and self.failed is not None:
            self.failed(self._error)
        elif self._error is None:
            self._import_warm()

    def _import_warm(self) -> None:
        for name in self._warm:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - only a head start: the screen imports it again and says why
                logging.getLogger(__name__).exception("importing %s ahead of use failed", name)

    def finish(self) -> None:
        """Wait until the opening thread has ended (its imports ahead of use too): the process
        must not exit while a thread is importing (an import stopped at interpreter exit can
        hang the exit)."""
        if self._thread is not None:
            self._thread.join()

    def opened(self) -> Tavern | None:
        """The service if it is open now, else None (never waits)."""
        return self._tavern if self._done.is_set() else None

    def wait(self) -> Tavern:
        """The service, once open (after `start`: a worker asking before the first frame waits
        for it rather than starting the opening while the screen paints).

        Raises:
            whatever opening the service raised (TavernError: the database cannot be opened).
        """
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._tavern is not None
        return self._tavern

    def __getattr__(self, name: str) -> Any:
        # Only for names this object does not have itself: the service's areas and methods.
        return getattr(self.wait(), name)


FIRST_CHAT = ("tavern_tui.tui.screens.chat", "tavern_tui.persona.safety")
"""What the opening thread imports for the first chat (`OpeningTavern` `warm`): the chat screen,
and the persona's safety checks the chat's opening renders the persona with (their ~40 patterns
compile at import: 0.15-0.26 s of the first chat's opening worker)."""


def opened_service(tavern: Tavern | OpeningTavern) -> Tavern | None:
    """The service itself if it is open: `tavern`, or what an `OpeningTavern` has opened (None
    while it is still opening, or when opening it failed). Never waits."""
    return tavern.opened() if isinstance(tavern, OpeningTavern) else tavern
