"""Provides `TimelineService` (`tavern.timeline`): swipes, edit, delete, rollback, branches, the
variant tree, and the forks and head moves the generating steps (`service.steps`) build on.

One module per responsibility: `service` (`TimelineService`: reading the tree, moving the head,
swipes, edits and deletes), `tree` (the tree's view: variants depth-first with previews, summary
nodes and branch links) and `forks` (what a fork or a branch playthrough takes from where it
starts: the edits the head shows, the meta, the title and the selections).

Rules: seed 000 §1.1 and DESIGN.md "The session log": every one of these is a fork of a
session or a surface replacement; nothing is rewritten and every variant stays reachable.
SillyTavern behaviour followed (format-digest §d): see `service`.
"""

from tavern_tui.engine.timeline import VariantRow
from tavern_tui.service.timeline.forks import branch_title as branch_title
from tavern_tui.service.timeline.forks import inherited_meta as inherited_meta
from tavern_tui.service.timeline.service import TimelineService
from tavern_tui.service.timeline.tree import PREVIEW_CHARS as PREVIEW_CHARS

__all__ = ["TimelineService", "VariantRow"]
