"""Provides the macro definitions' table (`DEFS`), the `macro` decorator that fills it, the post-passes
(`POST_PASSES`, filled by `post_pass`) and the arity and type checks.

Every handler is a function `(evaluator, name, args, macro, base, scoped) -> str | None` (None: leave the
macro as written) in `macros.handlers`, registered by `@macro(...)` on its definition; importing
`macros.handlers` (which `macros.evaluator` does) fills the table.

Rule source: SillyTavern 1.18 `MacroRegistry.js` (names and aliases, arity, list arguments, `strictArgs`,
integer-typed arguments, `delayArgResolution`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tavern_tui.assembly.macros.parser import Macro

if TYPE_CHECKING:
    from tavern_tui.assembly.macros.context import MacroContext
    from tavern_tui.assembly.macros.evaluator import Evaluator

    Handler = Callable[[Evaluator, str, list[str], Macro, int, bool], str | None]
    """(evaluator, the definition's primary name, arguments, the macro, offset of its text, scoped) → text, or
    None to leave the macro as written."""

__all__ = ["DEFS", "POST_PASSES", "Def", "args_valid", "macro", "macros", "post_pass", "types_valid", "whole"]


@dataclass(frozen=True, slots=True)
class Def:
    name: str  # primary name
    fn: Handler
    min: int = 0
    max: int = 0
    list: bool = False
    strict: bool = True
    ints: tuple[int, ...] = ()  # positions typed `integer`
    delay: bool = False  # delayArgResolution: handler gets raw argument text


DEFS: dict[str, Def] = {}
"""Every macro by lower-case name (aliases included), filled by `macro` as `macros.handlers` is imported."""

POST_PASSES: list[Callable[[str, MacroContext], str]] = []
"""Text passes run on every `substitute` result (and every expanded history message) after SillyTavern's
macros: Tavern Helper's "macro-like" replacements that need the text around them (`handlers.mvu`:
`{{format_*_variable::path}}` indents by its line's prefix). Each returns its input unchanged when it has
nothing to do."""


def macro(*names: str, min: int = 0, max: int = 0, list: bool = False, strict: bool = True,
          ints: tuple[int, ...] = (), delay: bool = False) -> Callable[[Handler], Handler]:
    """Decorator: register the handler as one macro under `names` (case-insensitive; the first is the name
    the handler is given), with its arity (`min`…`max` arguments, or `min` or more when `list`), `strict`
    arity, integer-typed positions `ints` and `delay` (raw argument text, MacroRegistry delayArgResolution).
    A name registers once (so no import order decides which handler a name has)."""

    def register(fn: Handler) -> Handler:
        d = Def(names[0], fn, min, max, list, strict, ints, delay)
        for n in names:
            if n.lower() in DEFS:
                raise ValueError(f"macro {n!r} is registered twice")
            DEFS[n.lower()] = d
        return fn

    return register


def macros(groups: Iterable[tuple[str, ...]], *, min: int = 0, max: int = 0,
           ints: tuple[int, ...] = ()) -> Callable[[Handler], Handler]:
    """Decorator: `macro(*group, …)` for each group of names (one definition a group, as for the
    card fields or the instruct sequences)."""

    def register(fn: Handler) -> Handler:
        for group in groups:
            macro(*group, min=min, max=max, ints=ints)(fn)
        return fn

    return register


def post_pass(fn: Callable[[str, MacroContext], str]) -> Callable[[str, MacroContext], str]:
    """Decorator: add `fn` to `POST_PASSES`."""
    POST_PASSES.append(fn)
    return fn


def args_valid(d: Def, n: int) -> bool:
    """MacroRegistry isArgsValid."""
    if not d.list:
        return d.min <= n <= d.max
    return n >= d.min


_INTEGER = re.compile(r"-?[0-9]+")


def types_valid(d: Def, args: list[str]) -> bool:
    """MacroRegistry validateArgTypes with strictArgs: the `integer` positions hold whole numbers."""
    for pos in d.ints:
        if pos < len(args) and not _INTEGER.fullmatch(args[pos].strip()):
            return False
    return True


def whole(text: str) -> int:
    """A macro's whole-number argument (digits, perhaps signed, as its pattern checked). Past 16
    digits it is beyond any limit here (and beyond a JS number's exact range), so it reads as
    ±10**16 rather than making Python parse thousands of digits (which it refuses past 4,300)."""
    digits = text.strip().lstrip("+-")
    if len(digits) > 16:
        return -(10**16) if text.strip().startswith("-") else 10**16
    return int(text)
