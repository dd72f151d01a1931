"""Provides `TextPrompt`: ask for one line of text (a chat's new title)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class TextPrompt(ModalScreen[str | None]):
    """One line to fill in: Enter answers the text (as typed; the caller trims it), Esc None.

    | id | part |
    | --- | --- |
    | `prompt-box` | the framed box (`$primary` round border on `$surface`, 80 wide at most) |
    | `prompt-question` | what is asked |
    | `prompt-input` | the line |
    | `prompt-keys` | the keys' hint (muted) |
    """

    DEFAULT_CSS = """
    TextPrompt { align: center middle; background: $background 60%; }
    TextPrompt #prompt-box {
        width: 80; max-width: 100%; height: auto; padding: 1 2;
        border: round $primary; border-title-color: $primary; background: $surface;
    }
    TextPrompt #prompt-question { height: auto; }
    TextPrompt #prompt-keys { color: $text-muted; }
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="prompt.cancel")]

    def __init__(self, title: str, question: str, value: str = "", *, placeholder: str = "",
                 keys: str = "Enter saves · Esc cancels") -> None:
        super().__init__()
        self._title, self._question, self._value = title, question, value
        self._placeholder, self._keys = placeholder, keys

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box") as box:
            box.border_title = Content(self._title)  # a str is markup
            yield Static(self._question, id="prompt-question", markup=False)
            yield Input(self._value, placeholder=self._placeholder, id="prompt-input")
            yield Static(self._keys, id="prompt-keys", markup=False)

    def on_mount(self) -> None:
        self.query_one("#prompt-input", Input).focus()

    @on(Input.Submitted, "#prompt-input")
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        """Esc: nothing changes."""
        self.dismiss(None)
