"""The service layer: `Tavern` (the facade every front end calls) composed of per-area services.

Re-exports the facade, `make_provider` and the views the front ends import from here. The facade
is imported on first use (PEP 562 `__getattr__`): it loads the store and SQLAlchemy, and the
TUI's first screen is painted from `service.first_screen`, a light module of this package,
before any of that is loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tavern_tui.views import CharacterView, ImportResult, MessageView, PlaythroughView, WorldBookView

if TYPE_CHECKING:
    from tavern_tui.service.facade import Tavern, make_provider

__all__ = ["CharacterView", "ImportResult", "MessageView", "PlaythroughView", "Tavern", "WorldBookView",
           "make_provider"]


def __getattr__(name: str) -> Any:
    """`Tavern` and `make_provider`, imported from the facade when first asked for."""
    if name in ("Tavern", "make_provider"):
        from tavern_tui.service import facade

        return getattr(facade, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
