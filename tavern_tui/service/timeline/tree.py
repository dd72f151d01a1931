"""Provides the branch tree's view of a playthrough (`tavern tree`, the tree pane):
`timeline_view` lists a variant tree depth-first with previews, the active path, the summary
nodes and the playthroughs branched off each message, which `branch_links` finds.
`TimelineService.timeline` reads the tree and the branches and calls them.

Rules: seed 000 §1.1 and DESIGN.md "The session log": every variant stays reachable, so the tree
lists each one, marked as the head shows it (`service.shown.shown_on_path`: an edit's text, a
delete, the summary that folds it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tavern_tui.engine.events import EventKind
from tavern_tui.engine.log import SUMMARY_SOURCE
from tavern_tui.engine.timeline import Ref, Timeline
from tavern_tui.service.message_views import written_name
from tavern_tui.service.shown import shown_on_path
from tavern_tui.views import TimelineView, VariantView

if TYPE_CHECKING:
    from tavern_tui.store.eventlog import EventLog

PREVIEW_CHARS = 80
"""Characters of text a tree node shows."""


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


def branch_links(log: EventLog, timeline: Timeline, branches: list[tuple[int, int]],
                 playthrough_id: int) -> dict[Ref, list[int]]:
    """The playthroughs started from the tree's messages ("new playthrough from here"): the
    message each branched off → their ids. `branches`: (playthrough id, root session id) of the
    playthroughs branched off the tree's sessions; the playthrough itself is left out."""
    links: dict[Ref, list[int]] = {}
    for child_id, root in branches:
        chain = log.ancestry(root)
        if child_id != playthrough_id and len(chain) >= 2:
            parent_sid, fork_seq = chain[-2]  # the parent, through the branch's fork point
            at = timeline.end_of(parent_sid, fork_seq)
            if at is not None:
                links.setdefault(at, []).append(child_id)
    return links


def timeline_view(playthrough_id: int, timeline: Timeline, links: dict[Ref, list[int]]) -> TimelineView:
    """The tree of message variants, depth-first (children oldest first), as
    `TimelineService.timeline` returns it: each variant with its preview, its siblings and its
    place on the active path, and each summary node once, right after the last message it
    folds. `links`: the playthroughs branched off each message (`branch_links`)."""
    shown = shown_on_path(timeline)
    depth_of = {ref: index for index, ref in enumerate(timeline.path)}
    covered: dict[Ref, list[Ref]] = {}  # summary ref → the path messages it folds, oldest first
    for ref in timeline.path:
        summary = shown[ref].summary
        if summary is not None:
            covered.setdefault(summary.ref, []).append(ref)
    closing = {refs[-1]: summary for summary, refs in covered.items()}  # last message → its summary
    views: list[VariantView] = []
    siblings: dict[Ref, list[Ref]] = {}

    def visit(ref: Ref, depth: int) -> None:
        variant = timeline.variants[ref]
        row = variant.row
        on_path = shown.get(ref) if ref in timeline.active else None
        text = on_path.text if on_path is not None else str((row.body or {}).get("content") or "")
        natural = {"user": "customer", "assistant": "agent"}
        origin = row.origin.value if row.origin else natural.get(row.role or "", "engine")
        sibs = timeline.siblings(ref)
        siblings[ref] = sibs
        views.append(VariantView(ref, variant.parent, depth, row.role or "system", origin, row.source, row.kind,
                                 (sibs.index(ref) + 1, len(sibs)), ref in timeline.active, _preview(text),
                                 len(variant.children), on_path is not None and on_path.edited,
                                 on_path is not None and on_path.deleted,
                                 row.kind == EventKind.ASSISTANT_ATTEMPT, tuple(links.get(ref, ())),
                                 summarised=on_path is not None and on_path.summary is not None,
                                 speaker=written_name(row.role, row.body)))
        if ref in closing:  # the summary node, once, right after the last message it folds
            summary = shown[ref].summary
            assert summary is not None and summary.message is not None
            refs = covered[closing[ref]]
            views.append(VariantView(summary.ref, ref, depth, "system", "engine", SUMMARY_SOURCE,
                                     str(EventKind.SURFACE_REPLACED), (1, 1), True,
                                     _preview(str(summary.message.get("content") or "")), 0,
                                     summary_of=(depth_of[refs[0]] + 1, depth_of[refs[-1]] + 1)))

    # Iterative depth-first walk: a 5,000-message chat is 5,000 levels deep.
    stack: list[tuple[Ref, int]] = [(r, 0) for r in reversed(timeline.roots)]
    while stack:
        ref, depth = stack.pop()
        visit(ref, depth)
        stack.extend((child, depth + 1) for child in reversed(timeline.variants[ref].children))
    return TimelineView(playthrough_id, timeline.head_session, views, list(timeline.path), siblings)
