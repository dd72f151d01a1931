"""Provides `ImportScreen`, the small modal that asks for a card file or folder to import."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Static

from tavern_tui.service import ImportResult, Tavern
from tavern_tui.tui.messages import ImportFinished


class ImportScreen(ModalScreen[str | None]):
    """Asks for a path; dismisses with the path typed, or None when cancelled (Esc).

    Its `DEFAULT_CSS` centres the box over the dimmed screen:

    | id | part |
    | --- | --- |
    | `import-box` | the framed box (`$primary` round border on `$surface`, 80 wide) |
    | `import-hint` | the keys' hint under the path (muted) |

    Args:
        title, placeholder: what to ask for (character cards by default; the lore pane asks for books).
    """

    DEFAULT_CSS = """
    ImportScreen {
        align: center middle;
        background: $background 60%;
        &:ansi { background: $background 60%; }  /* ModalScreen's would make it transparent */
    }

    ImportScreen #import-box {
        width: 80;
        height: auto;
        padding: 1 2;
        border: round $primary;
        border-title-color: $primary;
        background: $surface;
    }

    ImportScreen #import-hint {
        color: $text-muted;
        margin-top: 1;
    }
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="import.cancel")]

    def __init__(self, title: str = "Import",
                 placeholder: str = "a card, world book, preset, persona or chat (.png/.json/.jsonl), "
                                    "or a folder") -> None:
        super().__init__()
        self._title = title
        self._placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="import-box") as box:
            box.border_title = self._title
            yield Input(placeholder=self._placeholder, id="import-path")
            yield Static("Enter imports · Esc cancels · ~ is your home folder", id="import-hint")

    @on(Input.Submitted, "#import-path")
    def _submitted(self, event: Input.Submitted) -> None:
        path = event.value.strip()
        self.dismiss(path or None)

    def action_cancel(self) -> None:
        """Close without importing."""
        self.dismiss(None)


def notify_warnings(screen: Screen, results: list[ImportResult]) -> None:
    """Say what an import stored with a warning (e.g. a regex key matched as plain text): each
    file's warnings in one notification."""
    for result in results:
        if result.ok and result.warnings:
            screen.notify("\n".join(result.warnings), title=f"Imported {result.name or result.path} with warnings",
                          severity="warning", timeout=10)


def import_results(tavern: Tavern, path: str, kind: str) -> ImportFinished:
    """Import `path` through the service (call it from a thread worker) and wrap the results.

    A failure of the store itself still reaches the person as a result naming the file.
    """
    try:
        results = tavern.imports.import_paths([path])
    except Exception as exc:  # noqa: BLE001 - shown to the person, never swallowed silently
        results = [ImportResult(path, kind, error=f"{path}: {exc}")]
    return ImportFinished(results)
