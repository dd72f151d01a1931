"""Provides `StateScreen`: a playthrough's MVU state (`stat_data` as a tree) and what the last reply changed
(issue 18 item 5)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static, Tree

from tavern_tui.service.mvu import MvuView
from tavern_tui.tui.labels import clip
from tavern_tui.tui.screens.base import TavernScreen
from tavern_tui.tui.widgets.fit_footer import ProviderSource, ScreenKeys
from tavern_tui.tui.widgets.screen_title import ScreenTitle

VALUE_WIDTH = 60
"""Characters of a value shown on one tree line."""


def _is_vwd(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and isinstance(value[1], str) and not isinstance(
        value[0], (dict, list))


def leaf_text(key: str, value: Any) -> str:
    """One tree line: `key = value`; a `[value, "description"]` shows the value, then the description dimmed."""
    if _is_vwd(value):
        return f"{key} = {clip(json.dumps(value[0], ensure_ascii=False), VALUE_WIDTH)}  ({clip(value[1], 40)})"
    return f"{key} = {clip(json.dumps(value, ensure_ascii=False), VALUE_WIDTH)}"


def changes_text(view: MvuView) -> str:
    """What the reply that made this record changed (`path: old → new (reason)`), then what it refused."""
    lines = []
    for change in view.changes:
        old, new = (clip(json.dumps(change[k], ensure_ascii=False), 30) for k in ("old", "new"))
        reason = f"  ({change['reason']})" if change.get("reason") else ""
        lines.append(f"{change['path'] or '(all)'}: {old} → {new}{reason}")
    for refusal in view.refused:
        lines.append(f"refused {clip(refusal['command'], 50)}: {clip(refusal['reason'].strip(), 80)}")
    return "\n".join(lines) if lines else "The last reply changed nothing."


def refused_status(view: MvuView | None) -> str:
    """The status line's words for a reply whose commands were refused ("" when none was)."""
    if view is None or not view.refused:
        return ""
    first = view.refused[0]["reason"].strip()
    more = f" (+{len(view.refused) - 1} more)" if len(view.refused) > 1 else ""
    # the key early: a narrow status line cuts the reason, the state pane shows it whole
    return (f"MVU refused {len(view.refused)} command{'s' if len(view.refused) > 1 else ''} (ctrl+g): "
            f"{clip(first, 120)}{more}")



def refused_whole(view: MvuView | None) -> str:
    """Every refused command of a reply with its full reason, one a line ("" when none was): what
    the notifications screen keeps of a status line that can only show the first, cut."""
    if view is None or not view.refused:
        return ""
    lines = [f"MVU refused {len(view.refused)} command{'s' if len(view.refused) > 1 else ''}:"]
    for refusal in view.refused:
        command = str(refusal.get("command") or "").strip()
        reason = str(refusal.get("reason") or "").strip()
        lines.append(f"• {reason}" + (f" — {command}" if command else ""))
    return "\n".join(lines)

class StateScreen(TavernScreen[None]):
    """The state pane (palette: "State"; ctrl+g in the chat): read only."""

    DEFAULT_CSS = """
    StateScreen #state-body {
        padding: 0 1;
    }
    StateScreen .state-heading {
        color: $primary;
        text-style: bold;
        margin-top: 1;
    }
    StateScreen #state-tree {
        height: auto;
        max-height: 70%;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="state.back"),
        Binding("r", "refresh", "Refresh", id="state.refresh"),
    ]

    COMMANDS: ClassVar[set[ProviderSource]] = {ScreenKeys}  # the palette lists this screen's keys

    tree = getters.query_one("#state-tree", Tree)
    changes = getters.query_one("#state-changes", Static)
    note = getters.query_one("#state-note", Static)

    def compose(self) -> ComposeResult:
        yield ScreenTitle("State", id="state-title", markup=False)
        with VerticalScroll(id="state-body"):
            yield Static("…", id="state-note", markup=False)
            # What changed first: on a small terminal the whole tree pushes it out of sight.
            yield Static("What the last reply changed", classes="state-heading", markup=False)
            yield Static("…", id="state-changes", markup=False)
            yield Static("stat_data", classes="state-heading", markup=False)
            yield Tree("stat_data", id="state-tree")
        yield Footer()

    def on_mount(self) -> None:
        self.action_refresh()

    def _load(self) -> MvuView:
        assert self.playthrough_id is not None
        return self.tavern.mvu.head(self.playthrough_id)

    def _show(self, view: MvuView) -> None:
        tree = self.tree
        tree.clear()
        if view.record is None:
            self.note.update("This card keeps no MVU state (no [InitVar] entry, no greeting <initvar>).")
            self.changes.update("")
            return
        self.note.update("" if view.committed else "Initial state: it is committed when the first reply is asked for.")
        self._fill(tree.root, view.record.get("stat_data"))
        tree.root.expand_all()
        self.changes.update(changes_text(view))

    def _fill(self, node: Any, value: Any) -> None:
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in items:
            if isinstance(child, (dict, list)) and child and not _is_vwd(child):
                self._fill(node.add(Text(str(key))), child)  # a str label is markup
            else:
                node.add_leaf(Text(leaf_text(str(key), child)))

    def action_refresh(self) -> None:
        """Read the state again."""
        self.call(self._load, title="State", then=self._show, exclusive=True, group="state")

    def action_back(self) -> None:
        """Close the pane."""
        self.dismiss(None)
