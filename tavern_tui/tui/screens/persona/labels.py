"""Labels and widths the persona pane and its history share: provenance, marks, supporting messages.

Rules: seed 002 (ADR-0079) decisions 4-8 and 12, DESIGN.md "Persona and nominations".
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.content import Content

from tavern_tui.errors import Conflict
from tavern_tui.persona.model import Belief, PersonaEntry, RenderedPersona
from tavern_tui.tui.labels import clip, plural
from tavern_tui.tui.theming import WIDE_AT

TEXT_WIDTH = 62
"""Characters of an entry's or a statement's text the tables show before cutting it with "…"."""
NARROW_TEXT_WIDTH = 28
"""`TEXT_WIDTH` under 100 columns: the tables' other columns (From, Sensitivity, Marks) stay on screen."""


def text_width(columns: int) -> int:
    """Characters of an entry's or a statement's text the tables show on a screen `columns` wide:
    `NARROW_TEXT_WIDTH` below the app's `-wide` breakpoint (`theming.WIDE_AT`), else `TEXT_WIDTH`."""
    return TEXT_WIDTH if columns >= WIDE_AT else NARROW_TEXT_WIDTH

SUPPORT_WIDTH = 100
"""Characters of a supporting message shown under the nominations."""

Ref = tuple[int, int]
Supports = Sequence[tuple[Ref, str]]


def provenance_label(entry: PersonaEntry) -> str:
    """"owner", or "affirmed #12" (the belief the entry was copied from)."""
    if entry.provenance == "affirmed":
        return f"affirmed #{entry.belief_id}" if entry.belief_id is not None else "affirmed"
    return entry.provenance


def sent_summary(sent: int, total: int) -> str:
    """How many of the persona's entries go to the model: "no entries", "its entry is sent",
    "all 3 entries sent", "2 of 3 entries sent", "none of its 3 entries sent"."""
    if total == 0:
        return "no entries"
    if total == 1:
        return "its entry is sent" if sent else "its entry is not sent"
    if sent >= total:
        return f"all {total} entries sent"
    return f"{sent} of {total} entries sent" if sent else f"none of its {total} entries sent"


def entry_marks(entry: PersonaEntry, rendered: RenderedPersona | None) -> list[str]:
    """An entry's marks: "stale" (its belief was superseded: review it), "left out" (above the
    ceiling: not sent here), "blocked: KIND" (an injection hit sent as [BLOCKED])."""
    marks = ["stale"] if entry.stale else []
    if rendered is not None:
        if entry.id not in rendered.entry_ids:
            marks.append("left out")
        marks.extend(f"blocked: {kind.replace('_', ' ')}" for eid, kind in rendered.blocked if eid == entry.id)
    return marks


def _marks_cell(marks: list[str]) -> Text:
    text = Text()
    for index, mark in enumerate(marks):
        if index:
            text.append(" · ", style="dim")
        text.append(mark, style="bold" if mark == "stale" or mark.startswith("blocked") else "dim italic")
    return text


def support_content(belief: Belief, supports: Supports) -> Content:
    """The supporting messages of a nomination: a head line, then "session:seq  text" each."""
    lines = [Content.assemble((f"#{belief.id} ", "bold"), belief.statement,
                              (f"  · {belief.category} · said in {plural(belief.corroborations, 'message')}", "dim"))]
    if not supports:
        lines.append(Content.styled("  (no supporting messages stored)", "dim"))
    for (session, seq), text in supports:
        lines.append(Content.assemble((f"  {session}:{seq}  ", "bold $speaker-user"),
                                      clip(text, SUPPORT_WIDTH) if text else ("(message gone)", "dim italic")))
    return Content("\n").join(lines)


def conflict_note(exc: Conflict) -> str:
    """What the pane says on a stale write (nothing was written; it reloads)."""
    return (f"Nothing was written: the persona changed since this pane read it (v{exc.expected}, "
            f"now v{exc.current}). The pane has reloaded; look again and retry.")


# -- modals -------------------------------------------------------------------------------
