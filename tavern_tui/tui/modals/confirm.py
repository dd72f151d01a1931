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
    """Asks one yes/no question: `y` or Enter on the confirm button says yes, Esc or `n` no.

    Its `DEFAULT_CSS` centres the box over the dimmed screen; the box is never wider or taller
    than the screen: the question scrolls, the buttons stay at the foot.

    | id | part |
    | --- | --- |
    | `confirm-box` | the framed box (`$primary` round border on `$surface`, 90 wide at most) |
    | `confirm-scroll` | the scrolling question |
    | `confirm-question` | the question's text |
    | `confirm-buttons` | the row docked at the foot: the buttons, then the keys' hint |
    | `confirm-keys` | the keys' hint at the row's right (muted) |
    """

    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
        background: $background 60%;
        &:ansi { background: $background 60%; }  /* ModalScreen's would make it transparent */
    }

    ConfirmScreen #confirm-box {
        width: 90;
        max-width: 100%;
        height: auto;
        max-height: 100%;
        padding: 1 2;
        border: round $primary;
        border-title-color: $primary;
        background: $surface;
    }

    ConfirmScreen #confirm-scroll {
        height: auto;
        max-height: 100%;
        scrollbar-size-vertical: 1;
    }

    ConfirmScreen #confirm-buttons {
        dock: bottom;
        height: 1;
        margin-top: 1;
    }

    ConfirmScreen #confirm-buttons Button {
        margin-right: 2;
    }

    ConfirmScreen #confirm-keys {
        width: 1fr;
        text-align: right;
        color: $text-muted;
    }

    ConfirmScreen #confirm-question {
        height: auto;
    }
    """

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
                yield Static("y confirms · Esc cancels", id="confirm-keys", markup=False)

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, yes: bool) -> None:
        """Dismiss with the answer."""
        self.dismiss(yes)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
