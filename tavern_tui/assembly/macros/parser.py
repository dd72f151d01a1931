"""The macro grammar: a scanner + recursive-descent parser producing a tree of text and macro nodes.

Rule source: SillyTavern 1.18 `public/scripts/macros/engine/MacroLexer.js` (its lexer modes) and
`MacroParser.js` (its grammar). The lexer modes are followed token by token:

* plain text: anything; `{` directly before `{{` is text (so `{{{x}}}` is `{` + `{{x}}` + `}`); `{{` opens a macro.
* after `{{`: whitespace, flags `! ? ~ # / >`, then `//` (the comment name, arguments follow directly),
  `.`/`$` (a variable shorthand) or an identifier `[A-Za-z][\\w-]*`. The identifier ends at whitespace,
  before `:`/`::`, before `|`/`}`.
* arguments: the first token decides the form. `::` ⇒ a list separated by `::` (empty arguments allowed);
  otherwise an optional `:` and then ONE argument that may itself contain `:` and `::` (the legacy colon and
  the whitespace forms). Each argument spans its first to its last non-whitespace token (so whitespace around
  it is dropped, inside it is kept). A `{{` inside opens a nested macro; the first `}}` ends the macro.
  `|` starts a filter, which the 1.18 parser has no rule for, so a macro with a `|` in its arguments is not a
  macro (left as written).
* variable shorthand: `.name`/`$name` (`[A-Za-z]([\\w-]*\\w)?`) then optionally one operator; `++`/`--` take
  no value, the others take the rest up to `}}` (nested macros allowed) as the value.

Anything that does not fit is not a macro: its `{{` is text and scanning goes on after it, so macros nested
in a broken one still resolve (MacroCstWalker flattens incomplete macros the same way). Parsing is memoised per
`{{` offset and nesting is capped at `MAX_DEPTH`, so the work is linear in the input.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["MAX_DEPTH", "Arg", "Macro", "Text", "parse_document"]

MAX_DEPTH = 64  # nested `{{` levels parsed as macros; deeper ones stay text (ours, not ST's)

_IDENT = re.compile(r"[A-Za-z][\w-]*")
_VAR_IDENT = re.compile(r"[A-Za-z](?:[\w-]*\w)?")
_WS = re.compile(r"\s+")
_FLAGS = "!?~#/>"
# MacroLexer var_after_identifier order: longest alternatives first where they share a prefix.
_VAR_OPS = ("++", "--", "??=", "??", "||=", "||", "-=", "==", "!=", ">=", ">", "<=", "<", "+=", "=")
_NO_VALUE_OPS = ("++", "--")


@dataclass(slots=True)
class Text:
    """Literal text `source[start:end]`."""

    start: int
    end: int


@dataclass(slots=True)
class Arg:
    """One argument: `source[start:end]` (whitespace around it excluded) and the nodes inside that range."""

    start: int
    end: int
    items: list[Text | Macro]


@dataclass(slots=True)
class Macro:
    """One `{{…}}` at `source[start:end]`; `inner_start:inner_end` is the part between the braces.

    `name` is the identifier as written ("//" for a comment; "" for a variable shorthand). `flags` are the flag
    characters before it. For a shorthand, `scope` is "." (local) or "$" (global), `var` the variable name,
    `op` the operator ("" = read) and `value` its value argument (None for no value).
    """

    start: int
    end: int
    inner_start: int
    inner_end: int
    name: str
    flags: str = ""
    args: list[Arg] = field(default_factory=list)
    scope: str = ""
    var: str = ""
    op: str = ""
    value: Arg | None = None

    @property
    def closing(self) -> bool:
        """`{{/name}}`: the closing tag of a scoped block (MacroFlags CLOSING_BLOCK)."""
        return "/" in self.flags


class _Fail(Exception):
    pass


class _Parser:
    def __init__(self, text: str, stop: Callable[[], bool] | None = None) -> None:
        self.s = text
        self.n = len(text)
        self.memo: dict[int, Macro | None] = {}
        self.too_deep = False
        self.stop = stop
        self.nodes = 0

    # -- documents ----------------------------------------------------------------------------------------
    def document(self, lo: int, hi: int) -> list[Text | Macro]:
        """Plain-text mode over `s[lo:hi]` (hi must end a plain-text region)."""
        s, items, pos, text_start = self.s, [], lo, lo
        while True:
            p = s.find("{{", pos, hi)
            if p < 0:
                break
            if p + 2 < hi and s[p + 2] == "{":
                pos = p + 1  # this `{` is text; the macro (if any) opens one brace later
                continue
            node = self.macro(p, 0)
            if node is None or node.end > hi:
                pos = p + 2
                continue
            if p > text_start:
                items.append(Text(text_start, p))
            items.append(node)
            pos = text_start = node.end
            self.nodes += 1
            if self.stop is not None and not self.nodes & 255 and self.stop():
                break  # the caller's time is up: the rest stays text (its evaluation stops too)
        if hi > text_start:
            items.append(Text(text_start, hi))
        return items

    # -- one macro ----------------------------------------------------------------------------------------
    def macro(self, p: int, depth: int) -> Macro | None:
        if p in self.memo:
            return self.memo[p]
        if depth > MAX_DEPTH:
            self.too_deep = True
            return None
        try:
            node = self._macro(p, depth)
        except _Fail:
            node = None
        # Memoised even when it failed for depth only: the macros around it then stay text, which keeps deep
        # hostile nesting linear (only inputs nested beyond MAX_DEPTH are affected).
        self.memo[p] = node
        return node

    def _skip_ws(self, q: int) -> int:
        m = _WS.match(self.s, q)
        return m.end() if m else q

    def _macro(self, p: int, depth: int) -> Macro:
        s = self.s
        q = p + 2
        flags = ""
        while True:
            q = self._skip_ws(q)
            if q >= self.n:
                raise _Fail
            if s.startswith("}}", q):
                raise _Fail  # no name
            if s.startswith("//", q):
                args, end = self._arguments(q + 2, depth)
                return Macro(p, end, p + 2, end - 2, "//", flags, args)
            c = s[q]
            if c in ".$":
                return self._variable(p, q, flags, depth)
            if c in _FLAGS:
                flags += c
                q += 1
                continue
            m = _IDENT.match(s, q)
            if not m:
                raise _Fail
            name = m.group(0)
            q = m.end()
            break
        # macro_identifier_end mode
        if s.startswith("}}", q):
            return Macro(p, q + 2, p + 2, q, name, flags)
        ws = _WS.match(s, q)
        if ws:
            q = ws.end()
        elif q >= self.n or s[q] not in ":|}":
            raise _Fail
        args, end = self._arguments(q, depth)
        return Macro(p, end, p + 2, end - 2, name, flags, args)

    def _arguments(self, q: int, depth: int) -> tuple[list[Arg], int]:
        """macro_args mode from `q`: returns the arguments and the offset just after the closing `}}`."""
        s = self.s
        q0 = self._skip_ws(q)
        if s.startswith("}}", q0):
            return [], q0 + 2
        if s.startswith("::", q0):
            args: list[Arg] = []
            q = q0 + 2
            while True:
                arg, q, stop = self._argument(q, depth, split=True)
                args.append(arg)
                if stop == "}}":
                    return args, q + 2
                q += 2  # past the `::`
        q = q0 + 1 if s.startswith(":", q0) else q0
        arg, q, _ = self._argument(q, depth, split=False)
        if arg.start == arg.end and not arg.items:
            raise _Fail  # `{{name:}}`: the argument after `:` needs at least one token
        return [arg], q + 2

    def _argument(self, q: int, depth: int, split: bool, pipes: bool = False) -> tuple[Arg, int, str]:
        """Scan one argument from `q` to the `}}` (or `::` when `split`); returns (arg, stop offset, stop).

        `pipes`: a `|` is plain content (a shorthand's value) instead of a filter that breaks the macro.
        """
        s, n = self.s, self.n
        items: list[Text | Macro] = []
        first = last = -1
        text_start = q
        while True:
            if q >= n:
                raise _Fail
            c = s[q]
            if c == "}" and s.startswith("}}", q):
                stop = "}}"
                break
            if split and c == ":" and s.startswith("::", q):
                stop = "::"
                break
            if c == "|" and not pipes:
                raise _Fail  # a filter: no parser rule in 1.18
            if c == "{" and s.startswith("{{", q):
                node = self.macro(q, depth + 1)
                if node is None:
                    raise _Fail
                if q > text_start:
                    items.append(Text(text_start, q))
                items.append(node)
                if first < 0:
                    first = q
                q = last = node.end
                text_start = q
                continue
            if c.isspace():
                q += 1
                continue
            if first < 0:
                first = q
            q += 1
            last = q
        if q > text_start:
            items.append(Text(text_start, q))
        if first < 0:
            return Arg(q, q, []), q, stop
        return Arg(first, last, _clip(items, first, last)), q, stop

    def _variable(self, p: int, q: int, flags: str, depth: int) -> Macro:
        s = self.s
        scope = s[q]
        q = self._skip_ws(q + 1)
        m = _VAR_IDENT.match(s, q)
        if not m:
            raise _Fail
        var = m.group(0)
        q = self._skip_ws(m.end())
        op = next((o for o in _VAR_OPS if s.startswith(o, q)), "")
        value = None
        if op:
            q += len(op)
            if op in _NO_VALUE_OPS:
                q = self._skip_ws(q)
            else:
                value, q, _ = self._argument(q, depth, split=False, pipes=True)
        if not s.startswith("}}", q):
            raise _Fail
        return Macro(p, q + 2, p + 2, q, "", flags, scope=scope, var=var, op=op, value=value)


def _clip(items: list[Text | Macro], lo: int, hi: int) -> list[Text | Macro]:
    """Keep the parts of `items` inside [lo, hi) (drops the whitespace around an argument)."""
    out: list[Text | Macro] = []
    for it in items:
        if isinstance(it, Macro):
            out.append(it)
            continue
        a, b = max(it.start, lo), min(it.end, hi)
        if a < b:
            out.append(Text(a, b))
    return out


def parse_document(text: str, stop: Callable[[], bool] | None = None) -> tuple[list[Text | Macro], bool]:
    """Parse `text` into top-level nodes; the flag says whether some nesting was deeper than `MAX_DEPTH`.
    `stop` is asked every 256 top-level nodes or so: once it answers true, the rest of `text` is one
    `Text` node (the caller's evaluation budget is spent, `lore.eval_budget`)."""
    parser = _Parser(text, stop)
    items = parser.document(0, len(text))
    return items, parser.too_deep
