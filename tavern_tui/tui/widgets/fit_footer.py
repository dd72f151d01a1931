"""Provides `FitFooter`, a key footer that stays on one line at any width by hiding its least
important keys when they do not all fit, and `ScreenKeys`, the command-palette provider that
lists a screen's keys (so a key the footer hides is still found by name)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from itertools import pairwise

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.geometry import Size
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup

# FooterKey, FooterLabel and KeyGroup are not exported by textual.widgets (textual is pinned).

__all__ = ["FitFooter", "ProviderSource", "ScreenKeys"]

ProviderSource = type[Provider] | Callable[[], type[Provider]]
"""What a screen's `COMMANDS` set holds (`COMMANDS: ClassVar[set[ProviderSource]] = {ScreenKeys}`)."""

Item = tuple[Widget, ...]
"""What the footer shows or hides as one: a key, or a key group with its label."""

_COMPACT_AT: dict[tuple[object, ...], int] = {}
"""Keys (a signature's `_shape`) → the widest footer they needed the compact style at: a new
footer with those keys at that width or narrower starts compact instead of restyling every key
after its first fit (~45 ms on each chat screen opened)."""

_CACHE_MAX = 2048


class FitFooter(Footer):
    """A `Footer` that hides keys instead of letting the line run past the screen's edge.

    When every key fits, every key is shown (as `Footer` does). When not, keys are hidden in
    this order until the rest fits: the actions named in `drop`, in that order (the least
    important first); then the keys shown dimmed (disabled just now: they cannot be used
    anyway), right to left; then any other, right to left. The command palette key (docked on
    the right) always stays. A hidden key keeps working, and the palette's "Keys" panel and
    `ScreenKeys` still list it. The fit is redone whenever the keys change or the footer's width does.

    Args:
        drop: binding actions ("continue", "app.focus_next", "quit"), the first hidden first.
    """

    # Textual's compact style drops the margin after a group's label ("Swipe^r Regen") and a
    # compact group's keys touch ("^←^→"): one blank cell after each label and between keys.
    DEFAULT_CSS = """
    FitFooter.-compact FooterLabel {
        margin: 0 1 0 0;
    }
    FitFooter KeyGroup.-compact FooterKey.-grouped {
        margin: 0 1 0 0;
    }
    FitFooter KeyGroup.-compact FooterKey.-grouped:last-child {
        margin: 0;
    }
    """

    def __init__(self, *, drop: Sequence[str] = (), id: str | None = None, classes: str | None = None,
                 compact: bool = False, show_command_palette: bool = True) -> None:
        super().__init__(id=id, classes=classes, compact=compact, show_command_palette=show_command_palette)
        self.drop = tuple(drop)
        self._compacted = False  # the compact style was taken for room (not asked for)
        self._compacted_at = 0  # the footer's width when it took the compact style for room
        self._pending = False  # a recompose is queued for after the next refresh
        self._shown: tuple | None = None  # what the keys show now
        self._built: tuple | None = None  # what the key widgets were built from (may hold more keys)
        self._absent: frozenset[tuple[str, str]] = frozenset()  # built keys not bound now: hidden
        self.waiting = False
        """Rebuilds wait (a step's request is going out: `wait`, `resume`)."""
        self._waited = False  # a rebuild waited

    def wait(self) -> None:
        """Hold rebuilds until `resume`: the keys change as Enter sends (the composer empties, a
        reply starts), and a rebuild then (~5-10 ms on the loop) delayed the step's request."""
        self.waiting = True

    def resume(self) -> None:
        """Rebuild now if one waited (`wait`)."""
        self.waiting = False
        if self._waited and self.is_attached:
            self._waited = False
            # On the footer's own queue: the caller may run in the app's context (a timer), and a
            # rebuild must run in the footer's (its keys bind to its data).
            self.call_later(self.bindings_changed, self.screen)

    def bindings_changed(self, screen: Screen) -> None:
        """Queue one rebuild however many times the bindings change before the next refresh
        (`Footer` queues one per change: opening a chat changed them ~20 times, each rebuild
        mounting every key again, issue 22 / benchmark transcript_window)."""
        self._bindings_ready = True
        if self.waiting:
            self._waited = True
            return
        if not screen.app.app_focus or not self.is_attached or screen is not self.screen or self._pending:
            return
        self._pending = True
        self.call_after_refresh(self.recompose)

    def compose(self) -> ComposeResult:
        """`Footer`'s keys, each given its compact style before it mounts: a key is created
        compact, so a key bound to the footer's style was restyled twice as it mounted, and the
        palette's key (always compact) once (~1 ms a key on every rebuild of every footer)."""
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                compact = True if widget.has_class("-command-palette") else self.compact
                widget.set_reactive(FooterKey.compact, compact)
                widget.set_class(compact, "-compact", update=False)
            yield widget

    def _signature(self) -> tuple:
        """What the keys are built from: the screen's active bindings that the footer shows (and
        the palette's), as shown. Not the compact style: the keys follow it by themselves
        (`data_bind`), so taking it for room rebuilds nothing; nor hidden bindings (a focused
        text area's dozens of editing keys)."""
        try:
            active = self.screen.active_bindings
        except Exception:  # not on a screen (yet): always rebuild
            return (object(),)
        palette = self.app.COMMAND_PALETTE_BINDING
        return (tuple((key, binding.action, binding.description, self.app.get_key_display(binding), enabled, tooltip)
                      for key, (_node, binding, enabled, tooltip) in active.items()
                      if binding.show or key == palette),
                self.show_command_palette)

    async def recompose(self) -> None:
        """Rebuild the keys (`Footer` does so when the bindings change) unless they would come
        out the same, then fit them. When the keys bound now are among those built (only
        enabled states changed, as when a reply starts or settles, or a key went away, as Stop
        does when it settles), the keys are updated in place: a key that went away stays built,
        hidden, and shows again when it comes back (each rebuild mounted every key and re-laid
        out the whole screen, twice a turn)."""
        self._pending = False
        if self.waiting:  # queued before `wait`: it waits too
            self._waited = True
            return
        signature, shown = self._signature(), self._shown
        if signature == shown and self.children:
            return
        self._shown = signature
        shape = _shape(signature)
        if not self.children and not self.compact and shape is not None \
                and self.size.width <= _COMPACT_AT.get(shape, -1):
            self.compact = self._compacted = True  # before the keys mount: nothing to restyle
            self._compacted_at = self.size.width
        if not (self.children and self._update_in_place(signature)):
            await super().recompose()
            self._built, self._absent = signature, frozenset()
        self.fit()

    def _update_in_place(self, signature: tuple) -> bool:
        """Show `signature` with the keys built from `self._built`: enabled states set, keys not
        bound now marked absent. False (nothing changed) when a key bound now was not built, the
        order differs, or a key group would be shown in part: those need a rebuild."""
        built = self._built
        if built is None or not _within_built(built, signature):
            return False
        present = {(entry[0], entry[1]): entry[4] for entry in signature[0]}
        absent = frozenset((entry[0], entry[1]) for entry in built[0]) - present.keys()
        for item in self._items():
            states = [(key.key, key.action) in absent for key in _keys(item)]
            if any(states) and not all(states):
                return False
        for key in self.query(FooterKey):
            if (key.key, key.action) in present:
                key._disabled = not present[key.key, key.action]  # what a click checks
                key.set_class(key._disabled, "-disabled")
        self._absent = absent
        return True

    def on_resize(self) -> None:
        # Wider than when the compact style was taken for room: try the roomy one again. Not on
        # every resize: each switch restyles every key (the first resize comes right after mount).
        if self._compacted and self.size.width > self._compacted_at:
            self.compact = self._compacted = False
            self.call_after_refresh(self.fit)
            return
        self.fit()

    def fit(self) -> None:
        """Show every key that fits the footer's width, hiding the others in the order above
        (and the keys built but not bound now)."""
        items = []
        for item in self._items():
            keys = _keys(item)
            if keys and all((key.key, key.action) in self._absent for key in keys):
                for widget in item:
                    widget.display = False
            else:
                items.append(item)
        if not items:
            return
        container, viewport = self.size, self.app.size
        widths = {item: _outer_width(item, container, viewport) for item in items}
        docked = [child for child in self.children if child.styles.dock != "none"]
        available = self.size.width - sum(sum(_outer_width((child,), container, viewport)) for child in docked)
        if _row_width([widths[i] for i in items]) > available and not self.compact:
            # Too long: first the compact style (less padding per key), then measure again
            # (issue 21 item 2: at 80 columns more keys stay). A resize starts roomy again.
            # Until then keys are hidden by the roomy widths: no frame shows a key cut at the edge.
            self.compact = self._compacted = True
            self._compacted_at = self.size.width
            shape = _shape(self._shown) if self._shown is not None else None
            if shape is not None:
                if len(_COMPACT_AT) >= _CACHE_MAX:
                    _COMPACT_AT.clear()
                _COMPACT_AT[shape] = max(self.size.width, _COMPACT_AT.get(shape, -1))
            self.call_after_refresh(self.fit)
        shown = list(items)
        for item in self._drop_order(items):
            if _row_width([widths[i] for i in shown]) <= available:
                break
            shown.remove(item)
        for item in items:
            for widget in item:
                widget.display = item in shown

    def _items(self) -> list[Item]:
        """The footer's keys in line order, a key group together with the label after it."""
        items: list[Item] = []
        children = [child for child in self.children if child.styles.dock == "none"]
        index = 0
        while index < len(children):
            child = children[index]
            if isinstance(child, KeyGroup) and index + 1 < len(children) and isinstance(children[index + 1],
                                                                                       FooterLabel):
                items.append((child, children[index + 1]))
                index += 2
            else:
                items.append((child,))
                index += 1
        return items

    def _drop_order(self, items: list[Item]) -> list[Item]:
        """Which items go first when the line is too long (see the class docstring)."""
        order: list[Item] = []
        for action in self.drop:
            order.extend(item for item in items if item not in order and action in _actions(item))
        rest = [item for item in reversed(items) if item not in order]
        order.extend(item for item in rest if _keys(item) and all(key.has_class("-disabled") for key in _keys(item)))
        order.extend(item for item in rest if item not in order)
        return order


def _within_built(built: tuple, signature: tuple) -> bool:
    """Whether `signature`'s keys (enabled states aside) are `built`'s in the same order with
    some left out, under the same palette flag."""
    if len(built) != 2 or len(signature) != 2 or built[1] != signature[1]:
        return False
    remaining = iter(entry[:4] + entry[5:] for entry in built[0])
    return all(any(entry[:4] + entry[5:] == candidate for candidate in remaining) for entry in signature[0])


def _shape(signature: tuple) -> tuple | None:
    """A `FitFooter._signature` without each key's enabled state (None for a placeholder one)."""
    if len(signature) != 2:
        return None
    keys, palette = signature
    return tuple(entry[:4] + entry[5:] for entry in keys), palette


def _keys(item: Item) -> list[FooterKey]:
    """The keys of an item (a group's are inside its KeyGroup)."""
    return [key for widget in item
            for key in ([widget] if isinstance(widget, FooterKey) else list(widget.query(FooterKey)))]


def _actions(item: Item) -> set[str]:
    return {key.action for key in _keys(item)}


def _content_width(widget: Widget, container: Size, viewport: Size) -> int:
    """The width a footer widget's content takes, in cells.

    Keys, labels and key groups are worked out from their text and the paddings they are drawn
    with now, as `FooterKey.render` lays them out (textual is pinned): measuring them through
    `get_content_width` renders each one (~0.5 ms a key, every fit of every screen opened), and
    right after the compact style is toggled it still answers with the old style's width.
    Anything else is measured."""
    if isinstance(widget, FooterKey):
        if not widget.description:
            return cell_len(widget.key_display)
        key = widget.get_component_styles("footer-key--key").padding
        description = widget.get_component_styles("footer-key--description").padding
        return (key.left + cell_len(widget.key_display) + key.right
                + description.left + cell_len(widget.description) + description.right)
    if isinstance(widget, FooterLabel):
        return cell_len(str(widget.content))
    if isinstance(widget, KeyGroup):
        shown = tuple(child for child in widget.children if child.display)
        if not shown:
            return 0
        width, left, right = _outer_width(shown, container, viewport)
        return left + width + right
    return widget.get_content_width(container, viewport)


def _outer_width(item: Item, container: Size, viewport: Size) -> tuple[int, int, int]:
    """(width, left margin, right margin) of an item as the horizontal layout places it."""
    width = 0
    margins: list[tuple[int, int]] = []
    for widget in item:
        styles = widget.styles
        width += _content_width(widget, container, viewport) + styles.gutter.width
        margins.append((styles.margin.left, styles.margin.right))
    # Inside an item the margins between its widgets collapse as between any two.
    width += sum(max(right, left) for (_, right), (left, _) in pairwise(margins))
    return width, margins[0][0], margins[-1][1]


def _row_width(widths: Iterable[tuple[int, int, int]]) -> int:
    """Where a horizontal row of items ends: the first left margin, the widths and the margins
    between them (adjacent ones collapse, as the horizontal layout does)."""
    row = list(widths)
    if not row:
        return 0
    return row[0][1] + sum(width for width, _, _ in row) + sum(max(a[2], b[1]) for a, b in pairwise(row))


class ScreenKeys(Provider):
    """Command-palette commands for the keys of the screen the palette was opened on: each of its
    own bindings with a description ("Continue", "Impersonate"), named with its key, that its
    `check_action` allows now. Moves between panes and scrolling are left out (they are keys of
    every screen, not commands). Put it in a screen's `COMMANDS`."""

    def _commands(self) -> list[tuple[str, str, str]]:
        """(name, help, action) of each command, in the screen's binding order."""
        screen = self.screen
        commands: list[tuple[str, str, str]] = []
        seen: set[str] = set()
        for namespace, binding, enabled, tooltip in screen.active_bindings.values():
            action = binding.action
            if (namespace is not screen or not enabled or not binding.description or action in seen
                    or action.startswith(("app.focus", "scroll"))):
                continue
            seen.add(action)
            key = self.app.get_key_display(binding)
            commands.append((binding.description, f"{key} · {tooltip}" if tooltip else key, action))
        return commands

    async def discover(self) -> Hits:
        for name, help_text, action in self._commands():
            yield DiscoveryHit(name, partial(self.screen.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, action in self._commands():
            if (score := matcher.match(name)) > 0:
                yield Hit(score, matcher.highlight(name), partial(self.screen.run_action, action), help=help_text)
