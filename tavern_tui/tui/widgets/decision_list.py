"""Provides `DecisionList`: one line per world-info decision, fired ones marked and coloured."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from tavern_tui.lore.result import Decision, Reason
from tavern_tui.tui.lore_labels import decision_line

SKIPPED_SHOWN = 200
"""At most this many entries that did not fire are listed (every fired one is)."""


class DecisionList(Widget):
    """The decisions of one activation, in the order given (the tester passes `insertion_order`).

    One widget draws every line, so a book of thousands of entries is one render, not thousands
    of mounted widgets; the colours still come from the stylesheet through component classes.
    Wrapping thousands of lines takes seconds, so only `SKIPPED_SHOWN` skipped entries are listed.

    | component class | line |
    | --- | --- |
    | `decision-list--fired` | an entry that fired |
    | `decision-list--skipped` | an entry that did not |
    | `decision-list--over-budget` | an entry the budget stopped |

    Its `DEFAULT_CSS` colours the lines with the app's variables `$wi-fired`, `$wi-skipped` and
    `$wi-over-budget` (`theming.APP_VARIABLES`): the app must declare them.
    """

    DEFAULT_CSS = """
    DecisionList {
        height: auto;
    }

    DecisionList > .decision-list--fired { color: $wi-fired; }
    DecisionList > .decision-list--skipped { color: $wi-skipped; }
    DecisionList > .decision-list--over-budget { color: $wi-over-budget; }
    """

    COMPONENT_CLASSES = {"decision-list--fired", "decision-list--skipped", "decision-list--over-budget"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.shown: list[Decision] = []
        """The decisions listed: every fired one, then the first `SKIPPED_SHOWN` of the rest."""
        self.hidden = 0
        """Skipped entries left out of the list."""
        self.placeholder = ""

    @property
    def lines(self) -> list[str]:
        """The shown lines as plain text ("✓ Eldoria#1 shadowfang — key: …")."""
        return [decision_line(d) for d in self.shown] + ([self._hidden_line()] if self.hidden else [])

    def _hidden_line(self) -> str:
        return f"… and {self.hidden} more entries that did not fire"

    def show(self, decisions: list[Decision], placeholder: str = "") -> None:
        """Show `decisions`, or `placeholder` when there are none."""
        skipped = [d for d in decisions if not d.fired]
        keep = {id(d) for d in skipped[:SKIPPED_SHOWN]}
        self.shown = [d for d in decisions if d.fired or id(d) in keep]
        self.hidden = len(decisions) - len(self.shown)
        self.placeholder = placeholder
        self.refresh(layout=True)

    def render(self) -> Text:
        styles = {name: self.get_component_rich_style(f"decision-list--{name}")
                  for name in ("fired", "skipped", "over-budget")}
        if not self.shown:
            return Text(self.placeholder, style=styles["skipped"])
        text = Text()
        for index, decision in enumerate(self.shown):
            if index:
                text.append("\n")
            if decision.fired:
                kind = "fired"
            elif decision.reason is Reason.OVER_BUDGET:
                kind = "over-budget"
            else:
                kind = "skipped"
            text.append(decision_line(decision), style=styles[kind])
        if self.hidden:
            text.append("\n" + self._hidden_line(), style=styles["skipped"])
        return text
