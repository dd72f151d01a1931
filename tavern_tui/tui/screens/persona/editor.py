"""`PersonaEditor`: the modal that edits one piece of persona text (an entry, or the name).

Rules: seed 002 (ADR-0079) decisions 4-8 and 12: every write carries the version the pane read,
and credential-shaped text is refused before it is stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import Checkbox, Input, Label, Select, Static, TextArea

from tavern_tui.errors import Conflict
from tavern_tui.persona.model import SENSITIVITIES, PersonaDocument
from tavern_tui.tui.typed_first import after_typed_keys
from tavern_tui.tui.widgets.save_cancel import SaveCancelModal, refusal_text

SaveFn = Callable[[str, str, bool], PersonaDocument]
"""Writes the editor's (text, sensitivity, stale) through the service; raises its refusals."""


class PersonaEditor(SaveCancelModal[PersonaDocument | Conflict | None]):
    """Edits one piece of persona text: a new or existing entry (text, sensitivity and, for a
    stale entry, its stale mark), or the persona's name (one line, no sensitivity).

    Ctrl+S saves through `save` in a thread worker; Esc cancels. A refusal (a secret, empty
    text) is shown here and the editor stays open with the text; a stale version dismisses
    with the `Conflict` (the pane reloads). Dismisses with the revision written, or None.
    """

    @dataclass
    class Saved(Message):
        """The editor's save worker finished: the revision written, or the refusal."""

        result: PersonaDocument | BaseException

    ERROR_ID: ClassVar[str] = "persona-editor-error"  # `begin_save` / `save_refused` show refusals here

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="persona_editor.cancel"),
        Binding("ctrl+s", "save", "Save", id="persona_editor.save", priority=True),
    ]

    def __init__(self, title: str, save: SaveFn, *, text: str = "", sensitivity: str | None = "normal",
                 stale: bool | None = None, multiline: bool = True, hint: str = "") -> None:
        super().__init__()
        self._title = title
        self._save = save
        self._text = text
        self._sensitivity = sensitivity
        self._stale = stale
        self._multiline = multiline
        self._hint = hint
        self.saving = False
        """A save is running (Esc and Ctrl+S wait for it)."""

    def compose(self) -> ComposeResult:
        # The form scrolls inside the box, which never exceeds the screen (80x24 included); the
        # error line and Save / Cancel stay docked at its foot.
        with Vertical(id="persona-editor-box", classes="modal-box") as box:
            box.border_title = Content(self._title)  # a str is markup
            with VerticalScroll(id="persona-editor-form", can_focus=False, classes="modal-form"):
                if self._hint:
                    yield Static(self._hint, id="persona-editor-hint", markup=False)
                if self._multiline:
                    yield TextArea(self._text, id="persona-text", soft_wrap=True)
                else:
                    yield Input(self._text, id="persona-text")
                if self._sensitivity is not None or self._stale is not None:
                    with Horizontal(classes="persona-editor-row"):
                        if self._sensitivity is not None:
                            yield Label("Sensitivity", classes="persona-editor-label", markup=False)
                            yield Select([(level, level) for level in SENSITIVITIES], value=self._sensitivity,
                                         allow_blank=False, id="persona-sensitivity", compact=True)
                        if self._stale is not None:
                            yield Checkbox("Still stale (uncheck once reviewed)", self._stale, id="persona-stale",
                                           compact=True)
            with Vertical(id="persona-editor-foot", classes="modal-foot"):
                yield from self.compose_save_cancel(buttons_id="persona-editor-buttons", keys_id="persona-editor-keys")

    def on_mount(self) -> None:
        self.query_one("#persona-text").focus()

    @property
    def text(self) -> str:
        """The text as typed."""
        widget = self.query_one("#persona-text")
        return widget.text if isinstance(widget, TextArea) else widget.value if isinstance(widget, Input) else ""

    @property
    def error_text(self) -> str:
        """The refusal shown, "" when none."""
        return str(self.query_one("#persona-editor-error", Static).content)

    @after_typed_keys
    def action_save(self) -> None:
        """Save in a worker; say why when the text is empty."""
        if self.saving:
            return
        text = self.text.strip()
        if not text:
            self.query_one("#persona-editor-error", Static).update("Type the text first (empty text is not saved).")
            return
        sensitivity = self._sensitivity or "normal"
        if self._sensitivity is not None:
            value = self.query_one("#persona-sensitivity", Select).value
            sensitivity = value if isinstance(value, str) else sensitivity
        stale = self.query_one("#persona-stale", Checkbox).value if self._stale is not None else False
        self.begin_save()
        self._run_save(text, sensitivity, stale)

    @work(thread=True, exclusive=True, group="persona-save", exit_on_error=False, description="save the persona")
    def _run_save(self, text: str, sensitivity: str, stale: bool) -> None:
        result: PersonaDocument | BaseException
        try:
            result = self._save(text, sensitivity, stale)
        except Exception as exc:  # a refusal stays on screen; anything else must not leave the editor stuck
            result = exc
        self.post_message(self.Saved(result))

    def on_persona_editor_saved(self, message: PersonaEditor.Saved) -> None:
        """Close on success or a conflict; otherwise show the refusal and keep the text."""
        result = message.result
        if isinstance(result, (PersonaDocument, Conflict)):
            self.save_done(result)
            return
        # A SecretRefused names the kind, never the text, so it can be shown as is.
        self.save_refused(f"Not saved: {refusal_text(result)}")
