"""Provides the plain view types the service returns (no database objects leave the service).

One module per area: `library` (imports, characters and their cards, world books, presets, and
`distinct_labels`), `playthroughs` (playthroughs, opening drafts, search results, groups),
`messages` (a chat's messages, its swipe counter, the inbox), `timeline` (the branch tree) and
`traces` (recorded provider requests). Every name is importable from `tavern_tui.views`; each
area's module loads when one of its names is first asked for (the first screen needs two of the
five, and their dataclasses cost ~1 ms each to declare).

Rules: README "Development": the views sit below the service, beside the config, and import
no other layer.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tavern_tui.views.library import (
        CARD_LIST_FIELDS,
        CARD_TEXT_FIELDS,
        PROMPT_FIELDS,
        CardView,
        CharacterView,
        ImportResult,
        PresetView,
        WorldBookView,
        distinct_labels,
    )
    from tavern_tui.views.messages import InboxItemView, MessageView, SwipeView
    from tavern_tui.views.playthroughs import GroupMemberView, GroupView, OpeningView, PlaythroughView, SearchResultView
    from tavern_tui.views.timeline import TimelineView, VariantView
    from tavern_tui.views.traces import TraceView

__all__ = [
    "CARD_LIST_FIELDS",
    "CARD_TEXT_FIELDS",
    "PROMPT_FIELDS",
    "CardView",
    "CharacterView",
    "GroupMemberView",
    "GroupView",
    "ImportResult",
    "InboxItemView",
    "MessageView",
    "OpeningView",
    "PlaythroughView",
    "PresetView",
    "SearchResultView",
    "SwipeView",
    "TimelineView",
    "TraceView",
    "VariantView",
    "WorldBookView",
    "distinct_labels",
]

_AREA = {
    "CARD_LIST_FIELDS": "library",
    "CARD_TEXT_FIELDS": "library",
    "PROMPT_FIELDS": "library",
    "CardView": "library",
    "CharacterView": "library",
    "ImportResult": "library",
    "PresetView": "library",
    "WorldBookView": "library",
    "distinct_labels": "library",
    "InboxItemView": "messages",
    "MessageView": "messages",
    "SwipeView": "messages",
    "GroupMemberView": "playthroughs",
    "GroupView": "playthroughs",
    "OpeningView": "playthroughs",
    "PlaythroughView": "playthroughs",
    "SearchResultView": "playthroughs",
    "TimelineView": "timeline",
    "VariantView": "timeline",
    "TraceView": "traces",
}


def __getattr__(name: str) -> object:
    """A view by name, its area's module imported on first use (PEP 562).

    Raises:
        AttributeError: `name` is not a view of this package.
    """
    area = _AREA.get(name)
    if area is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{area}"), name)
    globals()[name] = value
    return value
