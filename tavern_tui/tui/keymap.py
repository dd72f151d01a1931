"""Provides the app's bindings as data (`all_bindings`, for the keymap and help) and
`resolve_keymap`, which turns the config's `[keys]` table into Textual's keymap (issue 21 item 9).

`[keys]` names a binding by its id ("chat.regenerate", shown in the help screen) or by its
action name ("regenerate": every binding of that action); the value is Textual's key syntax
("ctrl+g", "f3,ctrl+e"). Unknown names and keys that are not keys are reported, naming the file
and the key, like the rest of the config file (`config.schema`).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass

from textual.binding import Binding
from textual.dom import DOMNode
from textual.keys import Keys, _character_to_key

import tavern_tui.tui

MODIFIERS = frozenset({"ctrl", "alt", "shift", "super", "meta", "hyper"})

_NAMED = {key.value.rsplit("+", 1)[-1] for key in Keys} | {
    "enter", "tab", "space", "backspace", "escape", "delete", "insert", "home", "end", "pageup", "pagedown",
    "up", "down", "left", "right", *(f"f{n}" for n in range(1, 25)),
} | {_character_to_key(chr(code)) for code in range(32, 127)}  # "question_mark", "slash", …


@dataclass(frozen=True)
class BoundKey:
    """One binding of one of the app's classes.

    Attributes:
        owner: the class name holding it ("ChatScreen").
        binding: the binding as declared (its key before any remap).
    """

    owner: str
    binding: Binding


def _load_tui_modules() -> None:
    """Import every module of `tavern_tui.tui`, so every screen and widget class exists."""
    for info in pkgutil.walk_packages(tavern_tui.tui.__path__, "tavern_tui.tui."):
        importlib.import_module(info.name)


def all_bindings() -> list[BoundKey]:
    """Every binding with an id that the app's own classes (screens, modals, widgets, the app)
    declare, from their `BINDINGS` (so the list cannot fall out of step with the code)."""
    _load_tui_modules()
    found: list[BoundKey] = []
    seen: set[str] = set()
    stack = list(DOMNode.__subclasses__())
    classes = []
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__.startswith("tavern_tui.tui") and "BINDINGS" in cls.__dict__:
            classes.append(cls)
    for cls in sorted(classes, key=lambda c: (c.__module__, c.__name__)):
        for binding in cls.__dict__["BINDINGS"]:
            if isinstance(binding, Binding) and binding.id and binding.id not in seen:
                seen.add(binding.id)
                found.append(BoundKey(cls.__name__, binding))
    return found


def valid_key(key: str) -> bool:
    """True when `key` is one key in Textual's syntax: modifiers, then a key name or one character."""
    parts = key.strip().lower().split("+")
    *mods, last = parts
    if not last or any(m not in MODIFIERS for m in mods):
        return False
    return last in _NAMED or len(last) == 1


def resolve_keymap(keys: Mapping[str, str], file: str = "config.toml") -> tuple[dict[str, str], list[str]]:
    """Turn `[keys]` into Textual's keymap (binding id → keys).

    Returns:
        (keymap, problems): problems name the file, the `keys.NAME` entry and what was expected.
    """
    if not keys:
        return {}, []  # nothing to remap: the screens stay unimported until first used (start-up)
    bound = all_bindings()
    ids = {b.binding.id for b in bound}
    by_action: dict[str, list[str]] = {}
    for b in bound:
        action = b.binding.action.split("(", 1)[0]
        by_action.setdefault(action, []).append(str(b.binding.id))
    keymap: dict[str, str] = {}
    problems: list[str] = []
    for name, value in keys.items():
        targets = [name] if name in ids else by_action.get(name, [])
        if not targets:
            problems.append(f"{file}: keys.{name}: expected a binding id or action name (press F1 to see them, "
                            f"e.g. chat.regenerate)")
            continue
        wrong = [k for k in str(value).split(",") if not valid_key(k)]
        if wrong:
            problems.append(f"{file}: keys.{name}: expected keys such as \"ctrl+g\" or \"f3,ctrl+e\", "
                            f"got {', '.join(repr(w.strip()) for w in wrong)}")
            continue
        for target in targets:
            keymap[target] = ",".join(k.strip() for k in str(value).split(","))
    return keymap, problems
