"""`ToolAskScreen`: may this tool call run? (issue 19 §4: the guard asks in the TUI).

Shows the tool's name, risk and the call's arguments; answers "once" (run this call), "always"
(run every call of this tool for the rest of this run) or "refuse" (the model is told it was
refused). Esc refuses; ←/→ or Tab move between the buttons, Enter presses one.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ToolAskScreen(ModalScreen[str]):
    """Asks whether one tool call may run; dismisses with "once", "always" or "refuse".

    | id | part |
    | --- | --- |
    | `tool-ask-box` | the framed box (`$warning` round border on `$surface`, 90 wide at most) |
    | `tool-ask-what` | the tool's name, source and risk |
    | `tool-ask-arguments` | the arguments, as JSON (scrolls) |
    | `tool-ask-buttons` | allow once / always for this tool / refuse |
    """

    DEFAULT_CSS = """
    ToolAskScreen {
        align: center middle;
        background: $background 60%;
        &:ansi { background: $background 60%; }
    }

    ToolAskScreen #tool-ask-box {
        width: 90;
        max-width: 100%;
        height: auto;
        max-height: 100%;
        padding: 1 2;
        border: round $warning;
        border-title-color: $warning;
        background: $surface;
    }

    ToolAskScreen #tool-ask-scroll {
        height: auto;
        max-height: 16;
        scrollbar-size-vertical: 1;
    }

    ToolAskScreen #tool-ask-arguments { color: $text-muted; height: auto; }

    ToolAskScreen #tool-ask-buttons { height: 1; margin-top: 1; }

    ToolAskScreen #tool-ask-buttons Button { margin-right: 2; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "answer('once')", "Allow once", id="tool_ask.once"),
        Binding("a", "answer('always')", "Always for this tool", id="tool_ask.always"),
        Binding("escape,r", "answer('refuse')", "Refuse", id="tool_ask.refuse"),
        Binding("left", "move(-1)", "Previous button", id="tool_ask.previous", show=False),
        Binding("right", "move(1)", "Next button", id="tool_ask.next", show=False),
    ]

    def __init__(self, name: str, source: str, risk: str, arguments: dict[str, Any]) -> None:
        super().__init__()
        self._name = name
        self._source = source
        self._risk = risk
        self._arguments = arguments

    def compose(self) -> ComposeResult:
        with Vertical(id="tool-ask-box") as box:
            box.border_title = "Run this tool?"
            yield Static(f"The model wants to call {self._name} ({self._source}, risk {self._risk}).",
                         id="tool-ask-what", markup=False)
            with VerticalScroll(id="tool-ask-scroll", can_focus=False):
                yield Static(json.dumps(self._arguments, ensure_ascii=False, indent=2), id="tool-ask-arguments",
                             markup=False)
            with Horizontal(id="tool-ask-buttons"):
                yield Button("Allow once (o)", id="once", compact=True)
                yield Button("Always for this tool (a)", id="always", compact=True)
                yield Button("Refuse (r, Esc)", id="refuse", variant="error", compact=True)

    def on_mount(self) -> None:
        self.query_one("#refuse", Button).focus()

    def action_move(self, step: int) -> None:
        """←/→: focus the previous / next button (Tab still works), stopping at either end."""
        buttons = list(self.query(Button))
        index = buttons.index(self.focused) if self.focused in buttons else len(buttons) - 1
        buttons[max(0, min(len(buttons) - 1, index + step))].focus()

    def action_answer(self, answer: str) -> None:
        """Dismiss with the answer."""
        self.dismiss(answer)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(str(event.button.id))
