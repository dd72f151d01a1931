"""Provides `swipe_note`: what the chat says when a swipe moved nothing (a one-greeting card…)."""

from __future__ import annotations

from tavern_tui.views import SwipeView


def swipe_note(state: SwipeView, direction: int) -> str:
    """Why a swipe in `direction` left `state` as it was: a one-greeting card, the first or last
    greeting, the first swipe ("" when no reason applies)."""
    index, count = state.position
    if state.ref is None or direction == 0:
        return ""
    if state.greeting:
        if count <= 1:
            return "This card has one greeting: there is nothing to swipe to."
        if direction > 0 and index >= count:
            return f"This is the card's last greeting ({index}/{count})."
        if direction < 0 and index <= 1:
            return f"This is the card's first greeting (1/{count})."
        return ""
    if direction < 0 and index <= 1:
        return "This is the first swipe." if count > 1 else "This message has no other swipes."
    if direction > 0 and not state.can_generate and index >= count:
        return "Only the character's last reply swipes to a new one."
    return ""
