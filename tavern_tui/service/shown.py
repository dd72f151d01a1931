"""Provides `shown_on_path`: how the head shows each message of a playthrough's active path,
for the branch tree: an edit's text, a delete, or the summary that folds it (the tree keeps the
summarised message's own text and lists the summary once, `TimelineService.timeline`)."""

from __future__ import annotations

from dataclasses import dataclass

from tavern_tui.engine.timeline import Ref, Replacement, Timeline


@dataclass(frozen=True, slots=True)
class Shown:
    """How the head shows one message of its path: its text (an edit's, never a summary's),
    whether an edit or a delete replaced it, and the summary that folds it (None: none)."""

    text: str
    edited: bool
    deleted: bool
    summary: Replacement | None


def _is_summary(replacement: Replacement) -> bool:
    return replacement.message is not None and isinstance(replacement.message.get("summary"), dict)


def shown_on_path(timeline: Timeline) -> dict[Ref, Shown]:
    """Each path message as the head shows it, following its chain of replacements: edits give
    their text; a summary (or an edit of one, or a summary of it) folds the message without
    taking its text, so the tree keeps showing what was summarised."""
    shown: dict[Ref, Shown] = {}
    for ref in timeline.path:
        text = str((timeline.variants[ref].row.body or {}).get("content") or "")
        edited = deleted = False
        summary: Replacement | None = None
        replacement = timeline.replacements.get(ref)
        hops = 0
        while replacement is not None and hops < 10_000:
            if replacement.message is None:
                deleted = True
                break
            if _is_summary(replacement):
                summary = replacement
            elif summary is None:
                text, edited = str(replacement.message.get("content") or ""), True
            replacement, hops = timeline.replacements.get(replacement.ref), hops + 1
        shown[ref] = Shown(text, edited, deleted, None if deleted else summary)
    return shown


__all__ = ["Shown", "shown_on_path"]
