"""The service layer: `Tavern` (the facade every front end calls) composed of per-area services.

Re-exports the facade, `make_provider` and the views the front ends import from here, each
imported on first use (PEP 562 `__getattr__`): the facade loads the store and SQLAlchemy, and the
TUI's first screen is painted from `service.first_screen`, a light module of this package,
before any of that is loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tavern_tui.service.facade import Tavern, make_provider
    from tavern_tui.views import CharacterView, ImportResult, MessageView, PlaythroughView, WorldBookView

__all__ = ["CharacterView", "ImportResult", "MessageView", "PlaythroughView", "Tavern", "WorldBookView",
           "make_provider"]


def __getattr__(name: str) -> Any:
    """`Tavern` and `make_provider`, imported from the facade when first asked for, and the
    re-exported views (each area's module loads on first use, `tavern_tui.views`)."""
    if name in ("Tavern", "make_provider"):
        from tavern_tui.service import facade

        return getattr(facade, name)
    if name in __all__:
        from tavern_tui import views

        return getattr(views, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
