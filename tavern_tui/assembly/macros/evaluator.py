"""Provides `Evaluator`, one `substitute()` call's walk over the parse: pre-processors, scoped blocks,
arguments evaluated before their macro, the per-call limits and the step's budget, post-processors.

Rule source: SillyTavern 1.18 `MacroEngine.js` (pre/post-processors, resolving a call), `MacroCstWalker.js`
(evaluation order, scoped blocks) and `MacroRegistry.js` (arity and type checks). The macros themselves
are in `handlers` (importing it here fills the registry).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tavern_tui.assembly.macros import handlers  # noqa: F401 - registers every macro (`registry.DEFS`)
from tavern_tui.assembly.macros.context import MacroContext
from tavern_tui.assembly.macros.handlers.variables import shorthand
from tavern_tui.assembly.macros.parser import Macro, Text, parse_document
from tavern_tui.assembly.macros.registry import DEFS, args_valid, types_valid
from tavern_tui.assembly.macros.scopes import (
    ELSE_MARKER,
    PairingTooCostly,
    Scope,
    pair_scopes,
    raw_inner,
    trim_scoped,
)
from tavern_tui.lore.eval_budget import EXHAUSTED

__all__ = ["LIMIT_MARKER", "MAX_CALLS", "MAX_EXPANSION", "MAX_NESTING", "MAX_PAIR_WORK", "MAX_REPARSE", "PURE",
           "Evaluator", "Limit", "post"]

MAX_EXPANSION = 8_000_000  # characters macros may produce per substitute() call (ours)
MAX_CALLS = 400_000  # macro evaluations per substitute() call (ours): bounds the time of any template
MAX_REPARSE = 1_000_000  # characters re-parsed by nested evaluation per substitute() call (ours): ~0.5 s of parsing
MAX_PAIR_WORK = 1_000_000  # steps searching closing tags per substitute() call (ours): ~0.3 s
MAX_NESTING = 64  # macros evaluated inside one another (scoped blocks, arguments, resolve), as the parser's MAX_DEPTH
LIMIT_MARKER = "[macro evaluation stopped: {reason}]"

_LEGACY_TIME = re.compile(r"{{time_(UTC[+-]\d+)}}", re.IGNORECASE)
_LEGACY_MARKERS = [(re.compile(f"<{k}>", re.IGNORECASE), v) for k, v in (
    ("USER", "{{user}}"), ("BOT", "{{char}}"), ("CHAR", "{{char}}"), ("GROUP", "{{group}}"),
    ("CHARIFNOTGROUP", "{{charIfNotGroup}}"))]
_UNESCAPE = re.compile(r"\\([{}])")
_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")  # a character outside the BMP (two UTF-16 units in JS)
_TRIM_TAG = re.compile(r"{{trim}}", re.IGNORECASE)

PURE = frozenset(n.lower() for n in (
    "user", "char", "group", "charIfNotGroup", "groupNotMuted", "notChar", "persona", "charDescription",
    "description", "charPersonality", "personality", "charScenario", "scenario", "mesExamplesRaw", "mesExamples",
    "charPrompt", "charInstruction", "charDepthPrompt", "charCreatorNotes", "creatorNotes", "charVersion",
    "version", "char_version", "charFirstMessage", "greeting", "newline", "space", "noop", "trim", "if", "else",
    "reverse", "//", "comment", "pick", "banned", "original"))
"""Macros whose output depends only on `engine._fingerprint`'s fields and the text itself (`pick`: chat id,
text and offset), never on variables, time, chance, the chat's state or the runtime."""


class Limit(Exception):
    """A limit stopped the evaluation (`reason` names it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Evaluator:
    """One `substitute()` call: `run()` evaluates the text; handlers reach the context (`ctx`) and
    evaluate nested text (`resolve`, `eval_seq`) through it."""

    def __init__(self, text: str, ctx: MacroContext) -> None:
        self.ctx = ctx
        self.raw_text = text
        self.spent = 0
        self.calls = 0
        self.depth = 0
        self.reparsed = 0
        self.pair_work = [MAX_PAIR_WORK]
        self.original_used = False
        self.text_hash: int | None = None
        self.pure = True  # no macro that reads state beyond the card, the names and the chat id ran
        self.top_text = text
        self.astral = False

    def run(self) -> str:
        deadline = self.ctx.budget.deadline
        if deadline is not None and deadline.over and "{{" in self.raw_text:
            # The build's evaluation budget is spent: refused before parsing (the text stays as written).
            return self._stopped(EXHAUSTED) + self.raw_text
        text = _LEGACY_TIME.sub(lambda m: "{{time::" + m.group(1) + "}}", self.raw_text)
        for pattern, repl in _LEGACY_MARKERS:
            text = pattern.sub(repl, text)
        self.top_text = text
        self.astral = not text.isascii() and _ASTRAL.search(text) is not None
        items, too_deep = parse_document(text, self._stop)
        if too_deep:
            self.ctx.limits_hit.add("nesting too deep")
        parts: list[str] = []
        try:
            paired = self._paired(items)
        except Limit as stop:
            return post(self._stopped(stop.reason) + text)
        for item, scoped, keep_raw in paired:
            try:
                parts.append(self._eval_entry(item, scoped, keep_raw, text, 0))
            except Limit as stop:  # the rest stays as written, after a marker
                parts.append(self._stopped(stop.reason))
                parts.append(text[item.start:])
                break
        return post("".join(parts))

    @property
    def _stop(self) -> Callable[[], bool] | None:
        """What the parser asks to stop early: the build's evaluation budget is used up."""
        deadline = self.ctx.budget.deadline
        return deadline.exhausted if deadline is not None else None

    def _stopped(self, reason: str) -> str:
        """Record that a limit stopped this evaluation (`limits_hit`, and the build's evaluation
        budget's refusals when it was that one); the marker to put where it stopped."""
        self.ctx.limits_hit.add(reason)
        deadline = self.ctx.budget.deadline
        if reason == EXHAUSTED and deadline is not None:
            with deadline.part(deadline.where or f"the text starting {self.raw_text[:30]!r}"):
                deadline.refuse("macros stopped")
        return LIMIT_MARKER.format(reason=reason)

    # -- documents ------------------------------------------------------------------------------------------
    def charge_parse(self, size: int) -> None:
        """Count `size` characters of nested re-parsing: each nested block re-parses its content, so
        64 nested `{{if}}` around a megabyte would parse 64 megabytes."""
        self.reparsed += size
        budget = self.ctx.budget
        budget.reparsed -= size
        if self.reparsed > MAX_REPARSE or budget.reparsed < 0:
            raise Limit("nested blocks too large")
        if budget.deadline is not None and budget.deadline.exhausted():
            raise Limit(EXHAUSTED)

    def _eval_text_into(self, text: str, base: int, parts: list[str]) -> None:
        self.charge_parse(len(text))
        items, too_deep = parse_document(text, self._stop)
        if too_deep:
            self.ctx.limits_hit.add("nesting too deep")
        self._eval_items(items, text, base, parts)

    def resolve(self, text: str, base: int) -> str:
        """MacroExecutionContext.resolve: a full evaluation of `text` (post-processors included)."""
        parts: list[str] = []
        self._eval_text_into(text, base, parts)
        return post("".join(parts))

    def _eval_items(self, items: list[Text | Macro], s: str, base: int, parts: list[str]) -> None:
        for item, scoped, keep_raw in self._paired(items):
            parts.append(self._eval_entry(item, scoped, keep_raw, s, base))

    def _paired(self, items: list[Text | Macro]) -> list[tuple[Text | Macro, Scope | None, bool]]:
        """`pair_scopes` within this call's pairing work (`MAX_PAIR_WORK`) and the build's evaluation
        budget (checked once a sibling list: scoped blocks nest up to `MAX_NESTING` lists deep)."""
        deadline = self.ctx.budget.deadline
        if deadline is not None and deadline.exhausted():
            raise Limit(EXHAUSTED)
        try:
            return pair_scopes(items, self.pair_work)
        except PairingTooCostly:
            raise Limit("too many scoped blocks to pair") from None

    def _eval_entry(self, item: Text | Macro, scoped: Scope | None, keep_raw: bool, s: str, base: int) -> str:
        if isinstance(item, Text) or keep_raw:
            return s[item.start:item.end]
        return self._eval_macro(item, s, base, scoped)

    def eval_seq(self, items: list[Text | Macro], s: str, base: int) -> str:
        """The evaluated text of `items`, nodes of `s` (no post-processors: part of a larger text)."""
        parts: list[str] = []
        self._eval_items(items, s, base, parts)
        return "".join(parts)

    # -- one macro -----------------------------------------------------------------------------------------
    def _count(self, produced: int = 0) -> None:
        self.calls += 1
        self.spent += produced
        budget = self.ctx.budget
        budget.calls -= 1
        budget.produced -= produced
        if self.calls > MAX_CALLS or budget.calls < 0:
            raise Limit("too many macro calls")
        if self.spent > MAX_EXPANSION or budget.produced < 0:
            raise Limit("output too large")
        deadline = budget.deadline
        # The clock is read every 64 calls (a call is ~2 µs; reading it costs a fraction of that).
        if deadline is not None and (deadline.over or (not budget.calls & 63 and deadline.exhausted())):
            raise Limit(EXHAUSTED)

    def _eval_macro(self, m: Macro, s: str, base: int, scoped: Scope | None) -> str:
        self._count()
        if self.depth >= MAX_NESTING:  # deeper would end in RecursionError (300 nested {{if}} did)
            raise Limit("nesting too deep")
        self.depth += 1
        try:
            return self._eval_macro_body(m, s, base, scoped)
        finally:
            self.depth -= 1

    def _eval_macro_body(self, m: Macro, s: str, base: int, scoped: Scope | None) -> str:
        if not m.name:
            return shorthand(self, m, s, base)
        lname = m.name.lower()
        dyn = next((v for k, v in self.ctx.dynamic.items() if k.lower() == lname), None) if self.ctx.dynamic else None
        if dyn is not None or (lname not in PURE and lname in DEFS):
            self.pure = False
        d = None if dyn is not None else DEFS.get(lname)
        delay = d is not None and d.delay
        args: list[str] = []
        spans: list[tuple[int, int, str]] = []
        for a in m.args:
            value = s[a.start:a.end] if delay else self.eval_seq(a.items, s, base)
            args.append(value)
            spans.append((a.start, a.end, value))
        if scoped is not None:
            content, c_start, c_end = scoped.items, m.end, scoped.end
            if c_start >= c_end:
                args.append("")
            else:
                value = s[c_start:c_end] if delay else self.eval_seq(content, s, base)
                if not delay and "#" not in m.flags:
                    value = trim_scoped(value)
                args.append(value)
                spans.append((c_start, c_end, value))
        raw = "{{" + raw_inner(m, s, spans) + "}}"
        if dyn is not None:
            return raw if args else dyn
        if d is None:
            return raw  # unknown: as written, with its nested macros resolved (MacroEngine #resolveMacro)
        if not args_valid(d, len(args)) and d.strict:
            return raw
        if d.ints and not types_valid(d, args):
            return raw  # validateArgTypes with strictArgs
        result = d.fn(self, d.name, args, m, base, scoped is not None)
        if result is None:
            return raw  # the handler failed (ST logs it and keeps the macro as written)
        self._count(len(result))
        return result


def post(s: str) -> str:
    """MacroEngine core post-processors in priority order: unescape braces, legacy trim, leftover else markers."""
    s = _UNESCAPE.sub(r"\1", s)
    if "{{" in s:
        s = _legacy_trim(s)
    return s.replace(ELSE_MARKER, "")


def _legacy_trim(s: str) -> str:
    """`s.replace(/(?:\r?\n)*{{trim}}(?:\r?\n)*/gi, '')` (MacroEngine legacy trim post-processor) in linear
    time: the regex retried its newline run at every position, hours on megabytes of newlines."""
    out: list[str] = []
    pos = 0
    while (tag := _TRIM_TAG.search(s, pos)) is not None:
        start = tag.start()
        while start > pos and s[start - 1] == "\n":  # the longest run of \r?\n units before the tag
            start -= 1
            if start > pos and s[start - 1] == "\r":
                start -= 1
        end = tag.end()
        while True:  # and after it
            if s.startswith("\n", end):
                end += 1
            elif s.startswith("\r\n", end):
                end += 2
            else:
                break
        out.append(s[pos:start])
        pos = end
    out.append(s[pos:])
    return "".join(out)
