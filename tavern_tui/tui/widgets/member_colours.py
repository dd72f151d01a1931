"""Provides the colours of a group chat's members (a light module: the home screen's group list
and the member strip use it at first paint, without the Markdown the message boxes need)."""

from __future__ import annotations

MEMBER_PALETTE = ("$speaker-character", "$text-success", "$text-accent", "$text-secondary", "$text-warning")
"""The speaker colours of a group chat's members, by their place in the group (the first keeps
the character colour; a sixth member takes the first colour again). Theme variables only."""

STRATEGY_NAMES = {"natural": "natural order", "list": "list order", "manual": "manual order",
                  "pooled": "pooled order"}
"""The turn orders as the strip and the home screen name them (SillyTavern's names)."""


def member_class(position: int) -> str:
    """The CSS class of the member at `position` (0-based place in its group): "member-1" …"""
    return f"member-{position % len(MEMBER_PALETTE) + 1}"


def member_css(selector: str) -> str:
    """One colour rule per palette entry: `selector` with "{cls}" standing for the member class."""
    return "\n".join(f"{selector.format(cls=member_class(n))} {{ color: {colour}; }}"
                      for n, colour in enumerate(MEMBER_PALETTE))
