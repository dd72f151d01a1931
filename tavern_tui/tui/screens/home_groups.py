"""The home screen's group chats: listed after the characters ("Glade" over "group · Seraphina,
Shodan"), their playthroughs beside them, Enter opens the newest (or makes one)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tavern_tui.tui.widgets.member_colours import STRATEGY_NAMES
from tavern_tui.views import GroupView, PlaythroughView

GROUP_PREFIX = "g"
"""Option ids of groups in the characters list start with it (characters are bare ids)."""


def group_option_id(group: GroupView) -> str:
    """The characters list's option id of `group` ("g3")."""
    return f"{GROUP_PREFIX}{group.id}"


def group_id_of(option_id: str | None) -> int | None:
    """The group id an option id names, or None for a character's option."""
    if option_id and option_id.startswith(GROUP_PREFIX):
        return int(option_id.removeprefix(GROUP_PREFIX))
    return None


def group_summary(group: GroupView) -> str:
    """"group · Seraphina, Shodan (muted) · list order"."""
    cast = ", ".join(m.name + (" (muted)" if m.muted else "") for m in group.members)
    return f"group · {cast} · {STRATEGY_NAMES.get(group.strategy, group.strategy)}"


def group_prompt(group: GroupView) -> Text:
    """The group's entry in the characters list: its name, then what it is, dimmed."""
    prompt = Text(group.name, style="bold")
    prompt.append("\n" + group_summary(group), style="dim")
    return prompt


def group_matches(group: GroupView, needle: str) -> bool:
    """Whether the home filter `needle` (casefolded) names the group or one of its members."""
    if not needle or needle.startswith("#"):
        return not needle  # a tag filter lists characters only
    return any(needle in text.casefold() for text in (group.name, *(m.name for m in group.members)))


def group_details(group: GroupView) -> str:
    """The card pane's text for a group: its cast, turn order and card mode."""
    cards = "each speaker's own card" if group.mode == "swap" else "every member's card, joined"
    return "\n".join([group_summary(group), f"cards: {cards}", "",
                      "In the chat: alt+N has member N speak now, ctrl+b chooses who, ctrl+n mutes or unmutes."])


def group_playthroughs(tavern: Any, group_id: int, include_archived: bool = False) -> list[PlaythroughView]:
    """The group's playthroughs, most recently played first. Call it in a worker."""
    return tavern.playthroughs.playthroughs(group_id=group_id, include_archived=include_archived)  # type: ignore[no-any-return]


def latest_or_new(tavern: Any, group_id: int) -> int:
    """The id of the group's most recently played playthrough (not archived), else of a new one
    (`GroupService.new_playthrough`). Call it in a worker."""
    found = tavern.playthroughs.playthroughs(group_id=group_id, limit=1)
    return found[0].id if found else tavern.groups.new_playthrough(group_id).id
