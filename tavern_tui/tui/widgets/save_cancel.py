"""Provides `SaveCancelModal`: the Save / Cancel behaviour the editor modals share."""

from __future__ import annotations

from typing import TypeVar

from textual import on
from textual.screen import ModalScreen
from textual.widgets import Button

ResultT = TypeVar("ResultT")


class SaveCancelModal(ModalScreen[ResultT]):
    """A modal editor with `#save` and `#cancel` buttons wired to `action_save` /
    `action_cancel`. While `saving` is True (a save running in a worker), cancel does nothing:
    the save's result decides how the modal closes. Subclasses implement `action_save`."""

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
