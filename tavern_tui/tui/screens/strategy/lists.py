"""The strategy pane's two lists: `StrategyList` (Enter applies) and `PresetList` (Enter binds)."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import OptionList


class StrategyList(OptionList):
    """The strategies; Enter applies the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select", "Apply strategy", id="strategy.apply")]


class PresetList(OptionList):
    """The presets (the built-in default first); Enter binds the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select", "Bind preset", id="strategy.bind")]

