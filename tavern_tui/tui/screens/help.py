"""Provides `HelpScreen` (F1, or `?` outside a text field): every key of the screen it was opened
on, by group, generated from the bindings in force there (issue 21 item 2).

Nothing here lists keys by hand: the rows are the screen's binding chain (the focused widget,
its containers, the screen, the app) after the config's `[keys]` remaps, so a remapped or new
key shows as it is, plus the keys a widget of that chain handles itself and declares beside the
code that handles them (`HELP_KEYS`: the composer's Enter, ctrl+J, alt+Enter, ↑). A key the
screen refuses just now (Stop while nothing streams) is listed, marked "not now"; a key that
cannot apply there at all (a screen's `help_skips(action)`: a group chat's keys in a chat with
one character) is not listed.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

_HIDDEN_ACTIONS = ("app.focus", "scroll", "app.command_palette")

FOOTER_ONLY = " · "
"""A binding label holding this is the footer's compact hint for more than one key ("palette · f1
help"), not a description: the help lists such a key by its tooltip alone."""


def _description(binding: Binding) -> str:
    """What the help says a key does: its label, with its tooltip after a colon when that says
    more; a footer-only label gives way to the tooltip."""
    description = binding.description or binding.tooltip or binding.action
    if binding.tooltip and FOOTER_ONLY in description:
        return binding.tooltip
    if not binding.tooltip or binding.tooltip == description:
        return description
    return f"{description}: {binding.tooltip}"


@dataclass(frozen=True)
class HelpRow:
    """One key in the help: `keys` as shown ("ctrl+r"), what it does, its binding id, and whether
    the screen allows it now."""

    keys: str
    description: str
    binding_id: str
    available: bool


def _group_name(node: DOMNode, binding: Binding | None, screen: Screen) -> str:
    if binding is not None and binding.group is not None:
        return binding.group.description
    if node is screen.app:
        return "Everywhere"
    if node is screen:
        return "This screen"
    return f"In the {type(node).__name__.lower()}"


def help_rows(screen: Screen) -> dict[str, list[HelpRow]]:
    """The keys of `screen` by group, in binding order: the screen's own first, then its groups,
    the focused widget's, then the app's.

    Reads Textual's binding chain of the screen (`_modal_binding_chain`, textual is pinned), so
    the keys are those in force, after the keymap.
    """
    app = screen.app
    skips = getattr(screen, "help_skips", None)  # keys that cannot apply on this screen as it is
    groups: dict[str, list[HelpRow]] = {}
    seen: set[tuple[str, str]] = set()
    chain = list(screen._modal_binding_chain)  # focused widget … screen … app
    order = sorted(chain, key=lambda link: 0 if link[0] is screen else (2 if link[0] is app else 1))
    for node, bindings in order:
        # Keys a widget handles itself (in the order typed, not as bindings) come first in its
        # group, never "not now" and with no id ([keys] cannot remap them).
        for keys, does in getattr(node, "HELP_KEYS", ()):
            if node is not screen and node is not app:
                groups.setdefault(_group_name(node, None, screen), []).append(HelpRow(keys, does, "", True))
        # Keyed by the binding's id (else its action): "escape,r" is one binding per key in the
        # chain, shown as one row with both keys.
        by_binding: dict[str, list[str]] = {}
        first: dict[str, Binding] = {}
        for key, binding in bindings:
            # Scrolling and focus moves are every widget's keys, not this screen's (its own stay).
            if binding.system or (node is not screen and binding.action.startswith(_HIDDEN_ACTIONS)):
                continue
            if skips is not None and skips(binding.action.split("(", 1)[0]):
                continue
            ident = binding.id or f"{binding.action}:{key}"
            by_binding.setdefault(ident, []).append(app.get_key_display(binding.with_key(key)))
            first.setdefault(ident, binding)
        for ident, binding in first.items():
            mark = (node.__class__.__name__, binding.id or binding.action)
            if mark in seen:
                continue
            seen.add(mark)
            state = app._check_action_state(binding.action, node)
            row = HelpRow(" ".join(dict.fromkeys(by_binding[ident])), _description(binding), binding.id or "",
                          state is not False)
            groups.setdefault(_group_name(node, binding, screen), []).append(row)
    # The screen's own bindings the chain left out (Textual drops some it cannot use now), from
    # its declared BINDINGS, marked by whether the screen allows them now.
    listed = {row.binding_id for rows in groups.values() for row in rows}
    for key, binding in screen._bindings:
        if skips is not None and skips(binding.action.split("(", 1)[0]):
            continue
        if binding.id and binding.id not in listed and not binding.system:
            listed.add(binding.id)
            state = app._check_action_state(binding.action, screen)
            groups.setdefault(_group_name(screen, binding, screen), []).append(HelpRow(
                app.get_key_display(binding.with_key(key)), _description(binding), binding.id, state is not False))
    return groups


class HelpScreen(ModalScreen[None]):
    """The keys of `about` (the screen F1 was pressed on), by group; Esc, F1 or q closes it.

    Args:
        about: the screen whose keys are listed.
    """

    DEFAULT_CSS = """
    HelpScreen { align: center middle; background: $background 60%; }
    HelpScreen #help-box {
        width: 100; max-width: 100%; height: auto; max-height: 100%;
        border: round $primary; border-title-color: $primary; background: $surface; padding: 0 1;
    }
    HelpScreen #help-keys { height: auto; max-height: 1fr; }
    HelpScreen #help-hint { color: $text-muted; }
    """

    BINDINGS = [
        Binding("escape,f1,q", "close", "Close", id="help.close"),
    ]

    def __init__(self, about: Screen) -> None:
        super().__init__()
        self._about = about

    def compose(self) -> ComposeResult:
        title = getattr(self._about, "HELP_TITLE", "") or type(self._about).__name__.removesuffix("Screen")
        with Vertical(id="help-box") as box:
            box.border_title = Content(f"Keys · {title}")
            with VerticalScroll(id="help-keys"):
                for group, rows in help_rows(self._about).items():
                    yield Static(self._table(group, rows), classes="help-group", markup=False)
            yield Static("Esc closes · ctrl+p searches every command by name · remap a key in the config's "
                         "[keys] table by the id shown on the right", id="help-hint", markup=False)

    @staticmethod
    def _table(group: str, rows: list[HelpRow]) -> Table:
        table = Table(title=group, title_justify="left", title_style="bold", show_header=False, box=None,
                      expand=True, padding=(0, 1))
        table.add_column("keys", style="bold", no_wrap=True, ratio=None, min_width=12)
        table.add_column("does", ratio=1)
        table.add_column("id", style="dim", no_wrap=True)
        for row in rows:
            does = Text(row.description)
            if not row.available:
                does.append("  (not now)", style="dim italic")
            table.add_row(row.keys, does, row.binding_id)
        return table

    def action_close(self) -> None:
        """Close the help."""
        self.dismiss(None)
