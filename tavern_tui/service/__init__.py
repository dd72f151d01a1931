"""The service layer: `Tavern` (the facade every front end calls) composed of per-area services.

Re-exports the facade, `make_provider` and the views the front ends import from here.
"""

from tavern_tui.service.facade import Tavern, make_provider
from tavern_tui.views import CharacterView, ImportResult, MessageView, PlaythroughView, WorldBookView

__all__ = ["CharacterView", "ImportResult", "MessageView", "PlaythroughView", "Tavern", "WorldBookView",
           "make_provider"]
