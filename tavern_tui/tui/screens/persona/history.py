"""`PersonaHistoryScreen`: every revision of the persona, newest first, read-only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import DataTable, Static

from tavern_tui.errors import TavernError
from tavern_tui.persona.model import PersonaDocument
from tavern_tui.tui.labels import plural
from tavern_tui.tui.screens.base import TavernModal
from tavern_tui.tui.screens.persona.labels import provenance_label

if TYPE_CHECKING:
    from tavern_tui.service import Tavern


class PersonaHistoryScreen(TavernModal[None]):
    """Every revision of the persona, newest first (version, when, why, how many entries); the
    highlighted revision's entries are shown below it, read-only. Esc closes.

    Its `DEFAULT_CSS` centres the box over the dimmed screen, never wider than the screen:

    | id | part |
    | --- | --- |
    | `history-box` | the framed box (`$primary` round border on `$surface`, 100 × 80%) |
    | `revisions` | the revision list (half the box at most) |
    | `revision-scroll` | the highlighted revision's entries, scrolling |
    | `revision-entries` | their text |
    | `history-keys` | the keys' hint at the foot (muted) |
    """

    DEFAULT_CSS = """
    PersonaHistoryScreen {
        align: center middle;
        background: $background 60%;
        &:ansi { background: $background 60%; }  /* ModalScreen's would make it transparent */
    }

    PersonaHistoryScreen #history-box {
        width: 100;
        max-width: 100%;
        height: 80%;
        padding: 0 1;
        border: round $primary;
        border-title-color: $primary;
        background: $surface;
    }

    PersonaHistoryScreen #revisions {
        height: 1fr;
        max-height: 50%;
    }

    PersonaHistoryScreen #revision-scroll {
        height: 1fr;
        margin-top: 1;
    }

    PersonaHistoryScreen #revision-entries {
        height: auto;
    }

    PersonaHistoryScreen #history-keys {
        height: 1;
        color: $text-muted;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close", id="persona_history.close")]

    @dataclass
    class Loaded(Message):
        """The history worker finished: the revisions newest first, or the error's text."""

        revisions: list[PersonaDocument] | str

    revisions = getters.query_one("#revisions", DataTable)

    def __init__(self, tavern: Tavern, persona: int | None = None) -> None:
        super().__init__(tavern)
        self.persona = persona
        """Whose revisions (a persona id; None: the default persona's)."""
        self.history: list[PersonaDocument] = []
        self.loaded = False

    def compose(self) -> ComposeResult:
        with Vertical(id="history-box") as box:
            box.border_title = "Persona history · read-only"
            yield DataTable(id="revisions", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="revision-scroll", can_focus=False):
                yield Static("", id="revision-entries", markup=False)
            yield Static("↑/↓ choose a revision · Esc closes", id="history-keys", markup=False)

    def on_mount(self) -> None:
        self.revisions.add_columns("Version", "When", "Reason", "Entries")
        self.revisions.focus()
        self._load()

    @work(thread=True, exclusive=True, group="persona-history", exit_on_error=False, description="persona history")
    def _load(self) -> None:
        try:
            revisions: list[PersonaDocument] | str = self.tavern.persona.persona_history(self.persona)
        except TavernError as exc:
            revisions = str(exc)
        self.post_message(self.Loaded(revisions))

    def on_persona_history_screen_loaded(self, message: PersonaHistoryScreen.Loaded) -> None:
        """Fill the revision list (or say why it cannot)."""
        self.loaded = True
        if isinstance(message.revisions, str):
            self.query_one("#revision-entries", Static).update(Content.styled(message.revisions, "$error"))
            return
        self.history = message.revisions
        for doc in self.history:
            when = doc.created_at.astimezone().strftime("%Y-%m-%d %H:%M") if doc.created_at else "—"
            self.revisions.add_row(f"v{doc.version}", when, Text(doc.reason or "—"),
                                   plural(len(doc.entries), "entry", "entries"), key=str(doc.version))
        if not self.history:
            self.query_one("#revision-entries", Static).update(
                Content.styled("No revisions yet: the persona has never been written.", "dim"))
        else:
            self._show(0)

    @on(DataTable.RowHighlighted, "#revisions")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show(event.cursor_row)

    def _show(self, index: int) -> None:
        if not 0 <= index < len(self.history):
            return
        doc = self.history[index]
        head = Content.assemble((f"v{doc.version}", "bold"), f" · {doc.name or '(no name)'}",
                                (f" · lore: {doc.lorebook}" if doc.lorebook else "", "dim"))
        lines = [head]
        if not doc.entries:
            lines.append(Content.styled("  (empty: nothing was sent)", "dim"))
        for entry in doc.entries:
            marks = [provenance_label(entry), entry.sensitivity] + (["stale"] if entry.stale else [])
            lines.append(Content.assemble((f"  [{entry.id}] ", "bold"), entry.text, (f"  ({', '.join(marks)})", "dim")))
        self.query_one("#revision-entries", Static).update(Content("\n").join(lines))

    @property
    def shown_text(self) -> str:
        """The highlighted revision's entries as shown (plain)."""
        content = self.query_one("#revision-entries", Static).content
        return content.plain if isinstance(content, Content) else str(content)

    def action_close(self) -> None:
        """Close the history."""
        self.dismiss(None)


# -- the pane -----------------------------------------------------------------------------
