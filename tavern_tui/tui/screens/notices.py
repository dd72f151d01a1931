"""Provides `NoticesScreen` (ctrl+l): every notification of this run, newest first, in full
(issue 21 item 6: a toast stays short; the whole list of an import's warnings is here)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

SEVERITY_STYLE = {"information": "", "warning": "yellow", "error": "bold red"}


@dataclass(frozen=True)
class Notice:
    """One notification as shown (or summed up) in a toast: when, severity, title and the full text."""

    at: datetime
    severity: str
    title: str
    text: str


class NoticesScreen(ModalScreen[None]):
    """Lists `notices` (newest first); Esc or ctrl+l closes it.

    Args:
        notices: the app's notifications of this run, oldest first.
    """

    DEFAULT_CSS = """
    NoticesScreen { align: center middle; background: $background 60%; }
    NoticesScreen #notices-box {
        width: 110; max-width: 100%; height: 90%; border: round $primary;
        border-title-color: $primary; background: $surface; padding: 0 1;
    }
    NoticesScreen #notices-log { height: 1fr; }
    NoticesScreen #notices-hint { color: $text-muted; }
    """

    BINDINGS = [Binding("escape,ctrl+l", "close", "Close", id="notices.close")]

    def __init__(self, notices: list[Notice]) -> None:
        super().__init__()
        self._notices = list(notices)

    def compose(self) -> ComposeResult:
        # Imported here: RichLog loads rich.pretty and attrs (~25 ms), and the app imports this
        # module (for `Notice`) before its first screen is painted.
        from textual.widgets import RichLog

        with Vertical(id="notices-box") as box:
            box.border_title = f"Notifications ({len(self._notices)})"
            # No auto scroll: each write would follow the end, and the list (newest first)
            # would open scrolled into its oldest entries.
            # min_width: RichLog renders at least 78 cells wide, past the box at 80 columns (text cut off).
            yield RichLog(id="notices-log", wrap=True, markup=False, highlight=False, auto_scroll=False, min_width=20)
            yield Static("Esc closes · newest first", id="notices-hint", markup=False)

    def on_mount(self) -> None:
        from textual.widgets import RichLog

        log = self.query_one(RichLog)
        if not self._notices:
            log.write("No notifications yet.")
        for notice in reversed(self._notices):
            head = Text(f"{notice.at:%H:%M:%S}  ", style="dim")
            head.append(notice.title or notice.severity, style=SEVERITY_STYLE.get(notice.severity, "") or "bold")
            log.write(head)
            log.write(Text(notice.text))
            log.write("")
        log.focus()
        self.call_after_refresh(log.scroll_home, animate=False, immediate=True)

    def action_close(self) -> None:
        """Close the list."""
        self.dismiss(None)
