"""Provides `EditMessageScreen`, the modal that rewrites one message's text."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea

from tavern_tui.tui.typed_first import after_typed_keys

HINT = "ctrl+s saves · Esc cancels · the tree keeps the original"
"""The keys' hint under the text (one row in the box at 80 columns; it wraps on a narrower one)."""


class EditMessageScreen(ModalScreen[str | None]):
    """A multi-line editor on a message's text, the cursor at its end: ctrl+s saves (dismisses
    with the new text), Esc cancels (None). The caller stores the edit as a surface replacement;
    the original stays in the log.

    Its `DEFAULT_CSS` centres the box over the dimmed screen:

    | id | part |
    | --- | --- |
    | `edit-box` | the framed box (`$accent` round border, 80% × 60% of the screen) |
    | `edit-text` | the text area, filling the box |
    | `edit-hint` | the keys' hint at the foot (muted; wraps when the box is narrow) |
    """

    DEFAULT_CSS = """
    EditMessageScreen {
        align: center middle;
    }

    EditMessageScreen #edit-box {
        width: 80%;
        height: 60%;
        border: round $accent;
        padding: 0 1;
    }

    EditMessageScreen #edit-text {
        height: 1fr;
    }

    EditMessageScreen #edit-hint {
        color: $text-muted;
        height: auto;
    }
    """

    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="edit.save", priority=True),
        Binding("escape", "cancel", "Cancel", id="edit.cancel"),
    ]

    def __init__(self, speaker: str, text: str) -> None:
        super().__init__()
        self._speaker = speaker
        self._text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="edit-box") as box:
            # a str is markup; a summary is its own kind of message
            box.border_title = Content("Edit the summary" if self._speaker == "Summary" else
                                       f"Edit {self._speaker}'s message")
            yield TextArea(self._text, id="edit-text", soft_wrap=True)
            yield Static(HINT, id="edit-hint", markup=False)

    def on_mount(self) -> None:
        area = self.query_one(TextArea)
        area.move_cursor(area.document.end)  # typing goes after the text, as in the composer
        area.focus()

    @after_typed_keys
    def action_save(self) -> None:
        """Dismiss with the edited text (unchanged or blank text counts as a cancel)."""
        text = self.query_one(TextArea).text
        self.dismiss(text if text.strip() and text != self._text else None)

    def action_cancel(self) -> None:
        """Dismiss without an edit."""
        self.dismiss(None)
