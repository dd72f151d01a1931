"""Provides `VariablesScreen`: a playthrough's macro variables now, and their history per message (issue 17 §5)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from tavern_tui.service.variables import VariablesView
from tavern_tui.tui.labels import clip
from tavern_tui.tui.screens.base import TavernScreen
from tavern_tui.tui.widgets.fit_footer import ProviderSource, ScreenKeys
from tavern_tui.tui.widgets.screen_title import ScreenTitle

ORIGIN_LABELS = {"step": "a reply's prompt", "operator": "you", "import": "the imported chat"}
"""Who made a commit, as the history words it."""

VALUE_WIDTH = 40
"""Characters of a value shown on one line."""


def value_text(value: object) -> str:
    """A variable's value as JSON (strings quoted, so "5" and 5 differ), clipped to one line."""
    return clip(json.dumps(value, ensure_ascii=False), VALUE_WIDTH)


def now_text(view: VariablesView) -> str:
    """The current variables: "local" then "global", one `name = value` line each (or "(none)")."""
    lines: list[str] = []
    for title, values in (("Local (this branch)", view.local), ("Global (every chat)", view.global_)):
        lines.append(f"{title}: {len(values)}")
        lines += [f"  {name} = {value_text(values[name])}" for name in sorted(values)] or ["  (none)"]
    return "\n".join(lines)


def history_line(entry: dict[str, Any]) -> str:
    """One commit: where it sits, who made it, and what it set or deleted in each scope."""
    where = (f"after message {entry['after_message']} ({clip(entry['message_preview'], 30)!r})"
             if entry["after_message"] else "before the first message")
    changes: list[str] = []
    for scope in ("local", "global"):
        part = entry.get(scope) or {}
        sets = ", ".join(f"{name} = {value_text(value)}" for name, value in sorted((part.get("set") or {}).items()))
        if sets:
            changes.append(f"{scope}: {sets}")
        if part.get("delete"):
            changes.append(f"{scope} deleted: {', '.join(part['delete'])}")
    who = ORIGIN_LABELS.get(entry.get("origin", "step"), entry.get("origin", "?"))
    return f"{where} · by {who}\n    " + "; ".join(changes)


class VariablesScreen(TavernScreen[None]):
    """The variables pane (palette: "Variables"; F11 in the chat): read only; `tavern vars` changes them."""

    DEFAULT_CSS = """
    VariablesScreen #vars-body {
        padding: 0 1;
    }
    VariablesScreen .vars-heading {
        color: $primary;
        text-style: bold;
        margin-top: 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="variables.back"),
        Binding("r", "refresh", "Refresh", id="variables.refresh"),
    ]

    COMMANDS: ClassVar[set[ProviderSource]] = {ScreenKeys}  # the palette lists this screen's keys

    now = getters.query_one("#vars-now", Static)
    history = getters.query_one("#vars-history", Static)

    def compose(self) -> ComposeResult:
        # A stateful card's state is not a macro variable: a SillyTavern/MVU player looks for it here.
        yield ScreenTitle("Variables · the chat's macro variables ({{setvar}}, {{getvar}}) · a stateful card's "
                          "MVU state (stat_data): ctrl+g in the chat", id="vars-title", markup=False)
        with VerticalScroll(id="vars-body"):
            yield Static("Now", classes="vars-heading", markup=False)
            yield Static("…", id="vars-now", markup=False)
            yield Static("History on this branch (oldest first)", classes="vars-heading", markup=False)
            yield Static("…", id="vars-history", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.action_refresh()

    def _load(self) -> tuple[VariablesView, list[dict[str, Any]]]:
        assert self.playthrough_id is not None
        return (self.tavern.variables.variables(self.playthrough_id),
                self.tavern.variables.history(self.playthrough_id))

    def _show(self, loaded: tuple[VariablesView, list[dict[str, Any]]]) -> None:
        view, history = loaded
        self.now.update(now_text(view))
        self.history.update("\n".join(history_line(e) for e in history) if history else
                            "No variable has been set on this branch yet.")

    def action_refresh(self) -> None:
        """Read the variables again (after `tavern vars --set` in another terminal)."""
        self.call(self._load, title="Variables", then=self._show, exclusive=True, group="variables")

    def action_back(self) -> None:
        """Close the pane."""
        self.dismiss(None)
