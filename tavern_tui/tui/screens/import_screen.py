"""Provides `ImportScreen`, the small modal that asks for a card file or folder to import."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class ImportScreen(ModalScreen[str | None]):
    """Asks for a path; dismisses with the path typed, or None when cancelled (Esc)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="import.cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="import-box") as box:
            box.border_title = "Import character cards"
            yield Input(placeholder="path to a .png/.json card, or a folder of them", id="import-path")
            yield Static("Enter imports · Esc cancels · ~ is your home folder", id="import-hint")

    @on(Input.Submitted, "#import-path")
    def _submitted(self, event: Input.Submitted) -> None:
        path = event.value.strip()
        self.dismiss(path or None)

    def action_cancel(self) -> None:
        """Close without importing."""
        self.dismiss(None)
