"""Provides the plain view types the service returns (no database objects leave the service).

One module per area: `library` (imports, characters and their cards, world books, presets, and
`distinct_labels`), `playthroughs` (playthroughs, opening drafts, search results, groups),
`messages` (a chat's messages, its swipe counter, the inbox), `timeline` (the branch tree) and
`traces` (recorded provider requests). Every name is importable from `tavern_tui.views`.

Rules: README "Development": the views sit below the service, beside the config, and import
no other layer.
"""

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
