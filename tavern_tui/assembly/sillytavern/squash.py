"""Merges consecutive system messages as SillyTavern's `squash_system_messages` preset option does.

Rule: SillyTavern 1.18 `ChatCompletion.squashSystemMessages` (public/scripts/openai.js;
format-digest §c.4): consecutive system parts without a name are merged with "\\n", except the
new-chat and example-header lines; empty system parts are dropped. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import replace

from tavern_tui.assembly.attribution import shift
from tavern_tui.assembly.sillytavern.inputs import PromptPart

__all__ = ["squash_system_messages"]

_KEPT_APART = ("new_chat", "examples")  # part sources ST never squashes


def squash_system_messages(parts: list[PromptPart]) -> list[PromptPart]:
    """`parts` with consecutive unnamed system parts merged with "\\n" (their attribution spans
    shifted into the merged text) and empty system parts dropped; a new list, `parts` unchanged.
    Raises nothing."""
    out: list[PromptPart] = []
    last_squashable = False
    for part in parts:
        if part.role == "system" and not part.content:
            continue
        squashable = part.role == "system" and not part.name and part.source not in _KEPT_APART
        if squashable and out and last_squashable:
            at = len(out[-1].content) + 1
            out[-1] = replace(out[-1], content=out[-1].content + "\n" + part.content,
                              spans=out[-1].spans + tuple(shift(part.spans, at)))
        else:
            out.append(part)
            last_squashable = squashable
    return out
