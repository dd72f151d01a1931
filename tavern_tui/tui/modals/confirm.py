"""`ConfirmScreen`: one yes/no question (the persona pane's remove, the tree's delete)."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    """Asks one yes/no question: `y` or Enter on the confirm button says yes, Esc or `n` no."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("escape,n", "answer(False)", "No", id="confirm.no"),
    ]

    def __init__(self, question: str, confirm: str = "Remove") -> None:
        super().__init__()
        self._question = question
        self._confirm = confirm

    def compose(self) -> ComposeResult:
        # A long question scrolls; the buttons stay docked at the foot of the box, which never
        # exceeds the screen.
        with Vertical(id="confirm-box"):
            with VerticalScroll(id="confirm-scroll", can_focus=False):
                yield Static(self._question, id="confirm-question", markup=False)
            with Horizontal(id="confirm-buttons"):
                yield Button(self._confirm, id="yes", variant="error", compact=True)
                yield Button("Cancel", id="no", compact=True)
                yield Static("y confirms · Esc cancels", id="confirm-keys")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, yes: bool) -> None:
        """Dismiss with the answer."""
        self.dismiss(yes)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
