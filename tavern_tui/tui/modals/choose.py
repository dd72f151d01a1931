"""`ChooseScreen`: pick one of a few labelled items (the chat's "which summary to edit")."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option


class ChooseScreen(ModalScreen[int | None]):
    """A list of labels; Enter (or a click) answers the chosen index, Esc answers None.

    | id | part |
    | --- | --- |
    | `choose-box` | the framed box (`$primary` round border on `$surface`, 90 wide at most) |
    | `choose-hint` | the line above the list (muted) |
    | `choose-list` | the `OptionList` of labels |
    """

    DEFAULT_CSS = """
    ChooseScreen {
        align: center middle;
        background: $background 60%;
        &:ansi { background: $background 60%; }
    }

    ChooseScreen #choose-box {
        width: 90;
        max-width: 100%;
        height: auto;
        max-height: 100%;
        padding: 1 2;
        border: round $primary;
        border-title-color: $primary;
        background: $surface;
    }

    ChooseScreen #choose-hint {
        color: $text-muted;
        margin-bottom: 1;
    }

    ChooseScreen #choose-list {
        height: auto;
        max-height: 20;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Cancel", id="choose.cancel")]

    def __init__(self, title: str, labels: list[str], *, hint: str = "Enter chooses · Esc cancels",
                 selected: int = 0) -> None:
        super().__init__()
        self._title = title
        self._labels = labels
        self._hint = hint
        self._selected = selected

    def compose(self) -> ComposeResult:
        with Vertical(id="choose-box") as box:
            box.border_title = Content(self._title)  # a str is markup
            yield Static(self._hint, id="choose-hint", markup=False)
            yield OptionList(*[Option(label, id=str(i)) for i, label in enumerate(self._labels)], id="choose-list",
                             markup=False)

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = min(max(0, self._selected), len(self._labels) - 1) if self._labels else None
        options.focus()

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option_index)

    def action_dismiss_none(self) -> None:
        """Esc: choose nothing."""
        self.dismiss(None)
