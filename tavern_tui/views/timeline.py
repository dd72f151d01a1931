"""Provides the branch tree's view types: one message variant (`VariantView`) and a playthrough's
whole tree of them with its active path (`TimelineView`).

Rules: seed 000 §1.1 (every variant stays reachable, so the tree lists them all); the `to_json`
forms are the `tavern tree --json` output. Plain values: no database objects leave the service
(README "Development": the layers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class VariantView:
    """One message variant of a playthrough's timeline (the branch-tree pane, `tavern tree`).

    Attributes:
        ref: (session_id, seq) of the event holding it.
        parent: the ref of the message before it on its branch; None for a first message.
        depth: its position in the conversation (0 = the first message).
        position: (n, m): the n-th of m siblings (variants with the same parent).
        active: on the path the chat shows.
        preview: the start of its text (an edit's text when the active path shows it edited).
        edited / deleted: the active path shows it replaced by an edit, or deleted.
        children: how many variants continue from it.
        branches: playthroughs started from here ("new playthrough from here").
        summarised: the active path shows it folded into a summary (its preview stays its own text).
        summary_of: on a summary node (listed once, after the last message it covers; its ref is
            the summary's, its parent that last message): the first and last message numbers it
            covers, counted from 1.
    """

    ref: tuple[int, int]
    parent: tuple[int, int] | None
    depth: int
    role: str
    origin: str
    source: str | None
    kind: str
    position: tuple[int, int]
    active: bool
    preview: str
    children: int
    edited: bool = False
    deleted: bool = False
    partial: bool = False
    branches: tuple[int, ...] = ()
    summarised: bool = False
    summary_of: tuple[int, int] | None = None
    speaker: str | None = None
    """A group member's name on its reply (None: the role's usual name)."""

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern tree --json`."""
        return {"session_id": self.ref[0], "seq": self.ref[1],
                "parent": list(self.parent) if self.parent else None, "depth": self.depth, "role": self.role,
                "origin": self.origin, "source": self.source, "kind": self.kind,
                "sibling": self.position[0], "siblings": self.position[1],
                "siblings_refs": None, "active": self.active, "preview": self.preview, "children": self.children,
                "edited": self.edited, "deleted": self.deleted, "partial": self.partial,
                "branches": list(self.branches), "summarised": self.summarised,
                "summary_of": list(self.summary_of) if self.summary_of else None,
                **({"speaker": self.speaker} if self.speaker else {})}


@dataclass(frozen=True, slots=True)
class TimelineView:
    """A playthrough's tree of message variants, depth-first (children oldest first).

    Attributes:
        head_session_id: the active session.
        path: refs of the active path, first message first.
        siblings: ref → refs of it and its siblings, oldest first.
    """

    playthrough_id: int
    head_session_id: int
    variants: list[VariantView]
    path: list[tuple[int, int]]
    siblings: dict[tuple[int, int], list[tuple[int, int]]]

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern tree --json`: the head, the active path and every variant."""
        variants = []
        for variant in self.variants:
            item = variant.to_json()
            item["siblings_refs"] = [list(r) for r in self.siblings.get(variant.ref, [variant.ref])]
            variants.append(item)
        return {"playthrough_id": self.playthrough_id, "head_session_id": self.head_session_id,
                "path": [list(r) for r in self.path], "variants": variants}
