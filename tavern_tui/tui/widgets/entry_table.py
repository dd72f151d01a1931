"""Provides `EntryTable`: one world book's entries in a sortable, filterable `DataTable`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import on
from textual.widgets import DataTable

from tavern_tui.lore.model import WorldInfoEntry
from tavern_tui.tui.labels import clip
from tavern_tui.tui.lore_labels import keys_label, position_label
from tavern_tui.tui.theming import WIDE_AT

COLUMNS: dict[str, str] = {
    "uid": "UID", "title": "Title", "keys": "Keys", "constant": "Const",
    "position": "Position", "order": "Order", "enabled": "On",
}
"""Column key → header label, in display order."""

WIDTHS: dict[str, int] = {"uid": 6, "title": 20, "keys": 26, "constant": 5, "position": 8, "order": 5, "enabled": 2}
"""Column key → width in cells: the longest cell `_cells` makes (title 20, keys 26) or header."""

NARROW_WIDTHS: dict[str, int] = {**WIDTHS, "uid": 4, "title": 16, "keys": 20}
"""`WIDTHS` under 100 columns (`-narrow`): every column fits the 80-column screen's full width."""


def _uid_key(entry: WorldInfoEntry) -> tuple[int, int, str]:
    # uids are ints in SillyTavern files but strings in some converted books; ints sort first.
    return (0, entry.uid, "") if isinstance(entry.uid, int) else (1, 0, str(entry.uid))


SORT_KEYS: dict[str, Callable[[WorldInfoEntry], Any]] = {
    "uid": _uid_key,
    "title": lambda e: e.comment.casefold(),
    "keys": lambda e: ", ".join(e.key).casefold(),
    "constant": lambda e: not e.constant,
    "position": lambda e: (int(e.position), e.depth),
    "order": lambda e: e.order,
    "enabled": lambda e: e.disable,
}
"""How each column sorts (ascending); ties keep the book's own order."""


def _haystack(entry: WorldInfoEntry) -> str:
    return "\n".join([entry.comment, *entry.key, *entry.keysecondary, entry.content]).casefold()


class EntryTable(DataTable[Text]):
    """The entries of one book, one row each; row keys are the entries' indexes in the book.

    `show` replaces the entries, `set_filter` narrows them (title, keys or content, any case),
    `sort_by` orders them (the same column again reverses). The border subtitle says how.
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, id=id, classes=classes)
        self._entries: list[WorldInfoEntry] = []
        self._haystacks: list[str] = []
        self.filter_text = ""
        self.sort_column = "uid"
        self.sort_reverse = False
        self.shown: list[int] = []
        """Indexes of the entries on screen, in row order."""
        self._widths = WIDTHS  # the columns' widths, chosen for the screen's width when mounted

    def on_mount(self) -> None:
        # Fixed widths (the cells are clipped to them): the table never redraws wider as rows arrive.
        self._widths = NARROW_WIDTHS if self.app.size.width < WIDE_AT else WIDTHS  # the app's `-narrow` breakpoint
        for key, label in COLUMNS.items():
            self.add_column(label, key=key, width=self._widths[key])

    @property
    def selected_index(self) -> int | None:
        """Index in the book of the entry under the cursor, if any."""
        if not self.shown or not 0 <= self.cursor_row < len(self.shown):
            return None
        return self.shown[self.cursor_row]

    def show(self, entries: list[WorldInfoEntry], *, keep_cursor: bool = False) -> None:
        """Show `entries` (a book's, in file order) with the current sort and filter."""
        current = self.selected_index if keep_cursor else None
        self._entries = entries
        self._haystacks = [_haystack(e) for e in entries]
        self._refill(current)

    def set_filter(self, text: str) -> None:
        """Show only entries whose title, keys or content contain `text` (case-insensitive)."""
        self.filter_text = text.strip().casefold()
        self._refill(self.selected_index)

    def sort_by(self, column: str, reverse: bool | None = None) -> None:
        """Sort by `column`; without `reverse`, the same column again flips the direction."""
        if reverse is None:
            reverse = not self.sort_reverse if column == self.sort_column else False
        self.sort_column, self.sort_reverse = column, reverse
        self._refill(self.selected_index)

    def sort_next(self) -> None:
        """Sort by the next column (ascending), wrapping around."""
        columns = list(COLUMNS)
        self.sort_by(columns[(columns.index(self.sort_column) + 1) % len(columns)], reverse=False)

    def _refill(self, keep: int | None) -> None:
        needle = self.filter_text
        indexes = [i for i, hay in enumerate(self._haystacks) if needle in hay]
        key = SORT_KEYS[self.sort_column]
        indexes.sort(key=lambda i: key(self._entries[i]), reverse=self.sort_reverse)
        self.shown = indexes
        self.clear()
        self.add_rows(self._cells(self._entries[i]) for i in indexes)
        # add_rows has no keys argument: rows are numbered by position, so `shown` maps them back.
        if keep is not None and keep in indexes:
            self.move_cursor(row=indexes.index(keep), animate=False)
        arrow = "↓" if self.sort_reverse else "↑"
        counted = f"{len(indexes)} of {len(self._entries)} shown" if needle else f"{len(self._entries)} entries"
        self.border_subtitle = f"{counted} · sorted by {COLUMNS[self.sort_column].lower()} {arrow}"

    def _cells(self, entry: WorldInfoEntry) -> list[Text]:
        # Text, not str: a str cell is parsed as markup, and titles like "[Lore] Dragons" are common.
        widths = self._widths
        return [Text(str(entry.uid)), Text(clip(entry.comment, widths["title"])),
                Text(keys_label(entry.key, widths["keys"])),
                Text("✓" if entry.constant else ""), Text(position_label(entry)), Text(str(entry.order)),
                Text("" if entry.disable else "✓")]

    @on(DataTable.HeaderSelected)
    def _header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        if event.column_key.value in COLUMNS:
            self.sort_by(event.column_key.value)
