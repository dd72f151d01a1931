"""Provides `fill_rows`: replace a `DataTable`'s rows with its columns already fitted to them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.text import Text
from textual.widgets import DataTable

Cell = str | Text
"""A cell as `DataTable.add_row` takes it: a str is markup, a Text is shown as it is."""


def _width(cell: Cell) -> int:
    return (cell if isinstance(cell, Text) else Text.from_markup(cell)).cell_len


def fill_rows(table: DataTable[object], rows: Iterable[tuple[str, Sequence[Cell]]]) -> None:
    """Clear `table` and add `rows` (row key, cells in column order), widening each auto-width
    column to its widest cell or label at once.

    Why: a `DataTable` measures new rows only when it is next idle, so a table filled while
    messages keep arriving is drawn once with its columns at their labels' widths ("{{use",
    "owne"). Measuring here makes the first paint the fitted one; the table's own measure later
    agrees (widths in terminal cells, as `rich.text.Text.cell_len` counts them).
    """
    table.clear()
    columns = list(table.columns.values())
    widths = [_width(c.label) for c in columns]
    for key, cells in rows:
        table.add_row(*cells, key=key)
        for index, cell in enumerate(cells[:len(widths)]):
            widths[index] = max(widths[index], _width(cell))
    for column, width in zip(columns, widths, strict=False):
        if column.auto_width:
            column.content_width = max(column.content_width, width)


def room_for(table: DataTable[object], column: int, rows: Iterable[Sequence[Cell]], least: int) -> int:
    """Cells the `column`th column may take for its text so that every column stays on screen:
    the table's width less each other column's widest cell or label and every column's padding
    (`cell_padding` on each side); at least `least`, and `least` while the table has no width
    yet. `rows` hold the other columns' cells (the `column`th is not read)."""
    available = table.scrollable_content_region.width
    if available <= 0:
        return least
    columns = list(table.columns.values())
    widths = [_width(c.label) for c in columns]
    for cells in rows:
        for index, cell in enumerate(cells[:len(widths)]):
            if index != column:
                widths[index] = max(widths[index], _width(cell))
    others = sum(w for i, w in enumerate(widths) if i != column)
    return max(least, available - others - 2 * table.cell_padding * len(columns))
