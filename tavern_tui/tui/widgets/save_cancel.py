"""Provides `SaveCancelModal`: the Save / Cancel behaviour the editor modals share."""

from __future__ import annotations

from typing import ClassVar, TypeVar

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from tavern_tui.errors import TavernError

ResultT = TypeVar("ResultT")


def refusal_text(exc: BaseException) -> str:
    """How an editor shows a failed save: a `TavernError` as it says itself (its messages never
    echo secrets), anything else with its type, so the editor is never left stuck."""
    return str(exc) if isinstance(exc, TavernError) else f"{type(exc).__name__}: {exc}"


class SaveCancelModal(ModalScreen[ResultT]):
    """A modal editor with `#save` and `#cancel` buttons wired to `action_save` /
    `action_cancel`. While `saving` is True (a save running in a worker), cancel does nothing:
    the save's result decides how the modal closes. Subclasses implement `action_save`.

    Optional shared pieces (a subclass may use them or do the same by hand):
    - `compose_save_cancel()` yields the error line and the Save / Cancel row;
    - `begin_save()`, `save_refused()` and `save_done()` run one save: a refusal is shown in
      the error line (`ERROR_ID`) and the editor stays open with what it holds; a success closes it.

    It carries the editors' frame: centred over the dimmed screen, a box that is never taller than
    the screen, a form that scrolls and a foot that stays at the bottom. A subclass gives its parts
    these classes and sets only its own widths (the box's `width`, its labels' and fields') in its
    own `DEFAULT_CSS` or the app stylesheet:

    | class | part |
    | --- | --- |
    | `modal-box` | the framed box (`$primary` round border on `$surface`) |
    | `modal-form` | the scrolling form inside it |
    | `modal-foot` | the foot docked under the form (the error line and the buttons) |
    | `modal-error` | the error line (`compose_save_cancel`; bold `$error`) |
    | `modal-buttons` | the Save / Cancel row (`compose_save_cancel`) |
    | `modal-keys` | the keys' hint at the row's right (`compose_save_cancel`; muted) |

    Every `Label` inside (the field labels) is `$text-muted`.
    """

    DEFAULT_CSS = """
    SaveCancelModal {
        align: center middle;
        background: $background 60%;
    }

    SaveCancelModal .modal-box {
        height: auto;
        max-height: 100%;
        padding: 1 2;
        border: round $primary;
        border-title-color: $primary;
        background: $surface;
    }

    SaveCancelModal .modal-form {
        height: auto;
        max-height: 100%;
        scrollbar-size-vertical: 1;
    }

    SaveCancelModal .modal-foot {
        dock: bottom;
        height: auto;
    }

    SaveCancelModal Label {
        color: $text-muted;
    }

    SaveCancelModal .modal-error {
        height: auto;
        color: $error;
        text-style: bold;
    }

    SaveCancelModal .modal-buttons {
        height: 1;
        margin-top: 1;
    }

    SaveCancelModal .modal-buttons Button {
        margin-right: 2;
    }

    SaveCancelModal .modal-keys {
        width: 1fr;
        text-align: right;
        color: $text-muted;
    }
    """

    ERROR_ID: ClassVar[str] = "editor-error"
    """The id of the Static that shows a refused save (`compose_save_cancel`, `save_refused`)."""

    saving = False

    def action_save(self) -> None:
        """Save what the editor holds (subclasses)."""
        raise NotImplementedError

    def action_cancel(self) -> None:
        """Close without saving (not while a save runs: its result decides)."""
        if not self.saving:
            self.dismiss(None)

    @on(Button.Pressed, "#save")
    def _save_pressed(self) -> None:
        self.action_save()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    def compose_save_cancel(self, *, buttons_id: str = "editor-buttons", keys_id: str = "editor-hint",
                            keys: str = "Ctrl+S saves · Esc cancels") -> ComposeResult:
        """The error line (`ERROR_ID`, empty) and a row with Save, Cancel and the keys' hint."""
        yield Static("", id=self.ERROR_ID, markup=False, classes="modal-error")
        with Horizontal(id=buttons_id, classes="modal-buttons"):
            yield Button("Save", id="save", variant="primary", compact=True)
            yield Button("Cancel", id="cancel", compact=True)
            yield Static(keys, id=keys_id, classes="modal-keys", markup=False)

    def begin_save(self) -> bool:
        """Start a save: False (do nothing) when one is running already; else mark it running,
        disable Save and clear the last refusal."""
        if self.saving:
            return False
        self.saving = True
        self.query_one("#save", Button).disabled = True
        self.query_one(f"#{self.ERROR_ID}", Static).update("")
        return True

    def save_refused(self, shown: str) -> None:
        """End the save without closing: show why and enable Save again (the edits stay)."""
        self.saving = False
        self.query_one("#save", Button).disabled = False
        self.query_one(f"#{self.ERROR_ID}", Static).update(shown)

    def save_done(self, result: ResultT) -> None:
        """End the save and close with what was saved."""
        self.saving = False
        self.dismiss(result)
