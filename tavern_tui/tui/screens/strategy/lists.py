"""The strategy pane's two lists: `StrategyList` (Enter applies) and `PresetList` (Enter binds)."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import OptionList


class PaneList(OptionList):
    """A list of the strategy pane that keeps its highlighted option in view when its height
    changes (its options arrived and it grew, the terminal was resized)."""

    def on_resize(self) -> None:
        """Scroll the highlighted option into view once the list is laid out at its new size."""
        self.call_after_refresh(self.scroll_to_highlight)


class StrategyList(PaneList):
    """The strategies; Enter applies the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select", "Apply strategy", id="strategy.apply")]


class PresetList(PaneList):
    """The presets (the built-in default first); Enter binds the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select", "Bind preset", id="strategy.bind")]

