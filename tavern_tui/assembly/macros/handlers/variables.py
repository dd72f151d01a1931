"""The variable macros (`{{setvar}}` … `{{deletevar}}` and their global forms) and the variable
shorthands `{{.local}}`/`{{$global}}` with their operators. `{{getvar}}` is `handlers.mvu`'s (it also
reads MVU's message variables); `{{getglobalvar}}` is here.

Rule source: SillyTavern 1.18 `macros/definitions/variable-macros.js`, `variables.js` and `MacroCstWalker.js`
(#executeVariableOperation).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tavern_tui.assembly.macros.handlers.core import FALSE
from tavern_tui.assembly.macros.jsvalues import js_string, to_number, var_add, var_get
from tavern_tui.assembly.macros.registry import macro

if TYPE_CHECKING:
    from tavern_tui.assembly.macros.evaluator import Evaluator
    from tavern_tui.assembly.macros.parser import Macro

__all__ = ["shorthand"]


def _store(ev: Evaluator, name: str) -> tuple[str, dict[str, object]]:
    return ("global", ev.ctx.global_vars) if "global" in name else ("local", ev.ctx.local_vars)


def _refused(ev: Evaluator, name: str, value: object) -> bool:
    if ev.ctx.refuse_write is not None and ev.ctx.refuse_write(f"{name}\n{value}"):
        ev.ctx.limits_hit.add("a variable holding the configured API key was not written")
        return True
    return False


@macro("setvar", min=2, max=2)
@macro("setglobalvar", min=2, max=2)
def setvar(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    if not _refused(ev, args[0], args[1]):
        _store(ev, name)[1][args[0]] = args[1]
    return ""


@macro("getglobalvar", min=1, max=1)
def getvar(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    scope, store = _store(ev, name)
    ev.ctx.reads.add((scope, args[0]))
    return js_string(var_get(store, args[0]))


@macro("addvar", min=2, max=2)
@macro("addglobalvar", min=2, max=2)
def addvar(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    scope, store = _store(ev, name)
    ev.ctx.reads.add((scope, args[0]))
    if not _refused(ev, args[0], args[1]):
        var_add(store, args[0], args[1])
    return ""


@macro("incvar", min=1, max=1)
@macro("decvar", min=1, max=1)
@macro("incglobalvar", min=1, max=1)
@macro("decglobalvar", min=1, max=1)
def incvar(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    scope, store = _store(ev, name)
    ev.ctx.reads.add((scope, args[0]))
    return js_string(var_add(store, args[0], 1 if name.startswith("inc") else -1))


@macro("hasvar", "varexists", min=1, max=1)
@macro("hasglobalvar", "globalvarexists", min=1, max=1)
def hasvar(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    scope, store = _store(ev, name)
    ev.ctx.reads.add((scope, args[0]))
    return "true" if args[0] in store else "false"


@macro("deletevar", "flushvar", min=1, max=1)
@macro("deleteglobalvar", "flushglobalvar", min=1, max=1)
def deletevar(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    _store(ev, name)[1].pop(args[0], None)
    return ""


# -- the shorthands -----------------------------------------------------------------------------------------------

class _Shorthand:
    """One `{{.name op value}}`: its store, and its value evaluated only when needed, at most once."""

    __slots__ = ("ev", "m", "s", "base", "store", "scope", "name", "_value")

    def __init__(self, ev: Evaluator, m: Macro, s: str, base: int) -> None:
        self.ev, self.m, self.s, self.base = ev, m, s, base
        self.store = ev.ctx.global_vars if m.scope == "$" else ev.ctx.local_vars
        self.scope = "global" if m.scope == "$" else "local"
        self.name = m.var
        self._value: str | None = None

    def value(self) -> str:
        if self._value is None:
            m = self.m
            self._value = self.ev.eval_seq(m.value.items, self.s, self.base).strip() if m.value else ""
        return self._value

    def read(self) -> None:
        self.ev.ctx.reads.add((self.scope, self.name))

    def get(self) -> object:
        self.read()
        return var_get(self.store, self.name)

    def write(self, value: str) -> None:
        """Store `value`, unless it holds the configured API key (as `setvar` refuses it)."""
        if not _refused(self.ev, self.name, value):
            self.store[self.name] = value


def _falsy(v: object) -> bool:  # `!val || isFalseBoolean(normalize(val))`
    return v == "" or v == 0 or v != v or js_string(v).strip().lower() in FALSE


def _assign(v: _Shorthand) -> str:
    v.write(v.value())
    return ""


def _step(v: _Shorthand, by: int) -> str:
    v.read()
    return js_string(var_add(v.store, v.name, by))


def _add(v: _Shorthand) -> str:
    v.read()
    if not _refused(v.ev, v.name, v.value()):
        var_add(v.store, v.name, v.value())
    return ""


def _subtract(v: _Shorthand) -> str:
    v.read()
    number = to_number(v.value())
    if number == number:  # not NaN
        var_add(v.store, v.name, -number)
    return ""


def _or(v: _Shorthand) -> str:
    current = v.get()
    return v.value() if _falsy(current) else js_string(current)


def _nullish(v: _Shorthand) -> str:
    v.read()
    return js_string(var_get(v.store, v.name)) if v.name in v.store else v.value()


def _or_assign(v: _Shorthand) -> str:
    current = v.get()
    if _falsy(current):
        v.write(v.value())
        return v.value()
    return js_string(current)


def _nullish_assign(v: _Shorthand) -> str:
    v.read()
    if v.name not in v.store:
        v.write(v.value())
        return v.value()
    return js_string(var_get(v.store, v.name))


def _equal(v: _Shorthand, want: bool) -> str:
    same = js_string(v.get()) == v.value()
    return "true" if same == want else "false"


def _compare(v: _Shorthand, op: str) -> str:
    left, right = to_number(v.get()), to_number(v.value())
    if left != left or right != right:
        return "false"
    result = {">": left > right, ">=": left >= right, "<": left < right, "<=": left <= right}[op]
    return "true" if result else "false"


_OPS: dict[str, Callable[[_Shorthand], str]] = {
    "": lambda v: js_string(v.get()),
    "=": _assign,
    "++": lambda v: _step(v, 1),
    "--": lambda v: _step(v, -1),
    "+=": _add,
    "-=": _subtract,
    "||": _or,
    "??": _nullish,
    "||=": _or_assign,
    "??=": _nullish_assign,
    "==": lambda v: _equal(v, True),
    "!=": lambda v: _equal(v, False),
}


def shorthand(ev: Evaluator, m: Macro, s: str, base: int) -> str:
    """MacroCstWalker #executeVariableOperation for the shorthand `m` (a node of `s`, at `base` in the text)."""
    ev.pure = False
    op = _OPS.get(m.op)
    v = _Shorthand(ev, m, s, base)
    return op(v) if op is not None else _compare(v, m.op)
