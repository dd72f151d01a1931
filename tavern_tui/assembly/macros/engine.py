"""The macro engine: `MacroContext` and `substitute()` (the grammar is in `parser`, the rules in the package docstring).

Rule source: SillyTavern 1.18 `public/scripts/macros/engine/MacroEngine.js` (pre/post-processors, resolving a
call, `trimScopedContent`), `MacroCstWalker.js` (evaluation order, scoped blocks, variable shorthands),
`MacroRegistry.js` (arity and type checks) and `macros/definitions/*.js` (each macro).
"""

from __future__ import annotations

import copy
import random
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from tavern_tui.assembly.macros.context import (
    STEP_CALLS,
    STEP_EXPANSION,
    STEP_REPARSE,
    MacroBudget,
    MacroContext,
)
from tavern_tui.assembly.macros.jsvalues import js_string, to_number, var_add, var_get
from tavern_tui.assembly.macros.moment import aware, humanize_duration, moment_format
from tavern_tui.assembly.macros.parser import Macro, Text, parse_document
from tavern_tui.assembly.macros.registry import DEFS as _DEFS
from tavern_tui.assembly.macros.registry import ELSE_MARKER, EXTERNAL, POST_PASSES, PairingTooCostly
from tavern_tui.assembly.macros.registry import Scope as _Scope
from tavern_tui.assembly.macros.registry import args_valid as _args_valid
from tavern_tui.assembly.macros.registry import macro as _macro
from tavern_tui.assembly.macros.registry import pair_scopes as _pair_scopes
from tavern_tui.assembly.macros.registry import raw_inner as _raw_inner
from tavern_tui.assembly.macros.registry import split_else as _split_else
from tavern_tui.assembly.macros.seeded import seedrandom, string_hash
from tavern_tui.lore.eval_budget import EXHAUSTED
from tavern_tui.text.dice import parse_dice

__all__ = ["LIMIT_MARKER", "MAX_CALLS", "MAX_EXPANSION", "MAX_NESTING", "STEP_CALLS", "STEP_EXPANSION",
           "STEP_REPARSE", "MacroBudget", "MacroContext", "history_expander", "is_falsy", "substitute",
           "substitute_in", "substitute_readonly", "trim_scoped"]


MAX_EXPANSION = 8_000_000  # characters macros may produce per substitute() call (ours)
MAX_CALLS = 400_000  # macro evaluations per substitute() call (ours): bounds the time of any template
MAX_REPARSE = 1_000_000  # characters re-parsed by nested evaluation per substitute() call (ours): ~0.5 s of parsing
MAX_PAIR_WORK = 1_000_000  # steps searching closing tags per substitute() call (ours): ~0.3 s
MAX_NESTING = 64  # macros evaluated inside one another (scoped blocks, arguments, resolve), as the parser's MAX_DEPTH
LIMIT_MARKER = "[macro evaluation stopped: {reason}]"
_MAX_REPEAT = 1000  # {{newline::N}}, {{space::N}} (ours)


def _whole(text: str) -> int:
    """A macro's whole-number argument (digits, perhaps signed, as its pattern checked). Past 16
    digits it is beyond any limit here (and beyond a JS number's exact range), so it reads as
    ±10**16 rather than making Python parse thousands of digits (which it refuses past 4,300)."""
    digits = text.strip().lstrip("+-")
    if len(digits) > 16:
        return -(10**16) if text.strip().startswith("-") else 10**16
    return int(text)



_LEGACY_TIME = re.compile(r"{{time_(UTC[+-]\d+)}}", re.IGNORECASE)
_LEGACY_MARKERS = [(re.compile(f"<{k}>", re.IGNORECASE), v) for k, v in (
    ("USER", "{{user}}"), ("BOT", "{{char}}"), ("CHAR", "{{char}}"), ("GROUP", "{{group}}"),
    ("CHARIFNOTGROUP", "{{charIfNotGroup}}"))]
_UNESCAPE = re.compile(r"\\([{}])")
_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")  # a character outside the BMP (two UTF-16 units in JS)
_TRIM_TAG = re.compile(r"{{trim}}", re.IGNORECASE)
_UTC_SPEC = re.compile(r"UTC([+-][0-9]+)")
_INTEGER = re.compile(r"-?[0-9]+")
_VAR_COND = re.compile(r"([.$])([A-Za-z](?:[\w-]*\w)?)")
_FALSE = ("off", "false", "0")  # utils.js isFalseBoolean (trimmed, lower-cased)


class _Limit(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _post_passes(text: str, ctx: MacroContext) -> str:
    for run in POST_PASSES:
        text = run(text, ctx)
    return text


def substitute(text: str, ctx: MacroContext) -> str:
    """Resolve every SillyTavern macro in `text` against `ctx` and return the result.

    Variable macros mutate `ctx.local_vars`/`ctx.global_vars`. Unknown or malformed macros are left as written.
    If a limit (output size, number of calls, nesting depth) stops evaluation, the rest is left as written,
    `LIMIT_MARKER` is added where it stopped and `ctx.limits_hit` names the limit. Never executes code.
    Rules: ST 1.18 MacroEngine.evaluate (pre-processors, parse, walk, post-processors).
    """
    ctx.limits_hit = set()
    if not text:
        return ""
    # Nothing a pre-processor, the parser or a post-processor acts on (no brace, no legacy <USER>
    # marker, no escape, no else marker): the walk would give the text back as it is.
    plain = "{" not in text and "<" not in text and "\\" not in text and "\u0000" not in text
    out = text if plain else _post_passes(_Evaluator(text, ctx).run(), ctx)
    if ctx.templates is not None and ("<%" in out or getattr(ctx.templates, "pending", None)):
        out = ctx.templates(out, ctx)
    return out


def substitute_in(text: str, ctx: MacroContext, where: str) -> str:
    """`substitute`, with `where` (e.g. "description") naming the text in the refusals of the build's
    evaluation budget (`MacroBudget.deadline`, `lore.eval_budget`)."""
    deadline = ctx.budget.deadline
    if deadline is None:
        return substitute(text, ctx)
    with deadline.part(where):
        return substitute(text, ctx)


def substitute_readonly(text: str, ctx: MacroContext) -> str:
    """`substitute` on a copy of `ctx`'s variables: the result, with no variable changed and no read recorded."""
    if "{{" not in text and "<" not in text:
        return text
    return substitute(text, replace(ctx, local_vars=copy.deepcopy(ctx.local_vars),
                                    global_vars=copy.deepcopy(ctx.global_vars), reads=set()))


_PURE = frozenset(n.lower() for n in (
    "user", "char", "group", "charIfNotGroup", "groupNotMuted", "notChar", "persona", "charDescription",
    "description", "charPersonality", "personality", "charScenario", "scenario", "mesExamplesRaw", "mesExamples",
    "charPrompt", "charInstruction", "charDepthPrompt", "charCreatorNotes", "creatorNotes", "charVersion",
    "version", "char_version", "charFirstMessage", "greeting", "newline", "space", "noop", "trim", "if", "else",
    "reverse", "//", "comment", "pick", "banned", "original"))
"""Macros whose output depends only on `_fingerprint`'s fields and the text itself (`pick`: chat id,
text and offset), never on variables, time, chance, the chat's state or the runtime."""

_HISTORY_CACHE_SIZE = 20_000
_history_cache: OrderedDict[tuple[str, tuple], str] = OrderedDict()
_history_lock = threading.Lock()


def _fingerprint(ctx: MacroContext) -> tuple:
    return (ctx.char, ctx.user, ctx.persona, ctx.description, ctx.personality, ctx.scenario, ctx.mes_examples,
            ctx.mes_examples_raw, ctx.char_prompt, ctx.char_instruction, ctx.char_depth_prompt, ctx.creator_notes,
            ctx.char_version, ctx.first_message, tuple(ctx.alternate_greetings), ctx.original, ctx.chat_id,
            ctx.chat_id_hash, repr(ctx.pick_reroll_seed))


def history_expander(ctx: MacroContext) -> Callable[[str], str]:
    """`substitute_readonly` for the stored chat, with the expansions cached across builds.

    SillyTavern expands the stored messages again on every prompt build without writing variables;
    a message's expansion is kept (keyed by its text and the card fields, names and chat id, read
    once here) when every macro it ran is in `_PURE`; one that read a variable, the time, chance, the
    chat's state or a runtime value is expanded again each time, since its result can change.
    """
    fingerprint = _fingerprint(ctx)

    def expand(text: str) -> str:
        if "{{" not in text and "<" not in text:
            return text
        key = (text, fingerprint)
        with _history_lock:
            hit = _history_cache.get(key)
            if hit is not None:
                _history_cache.move_to_end(key)
                return _post_passes(hit, ctx)
        copy_ctx = replace(ctx, local_vars=copy.deepcopy(ctx.local_vars), global_vars=copy.deepcopy(ctx.global_vars),
                           reads=set(), limits_hit=set())
        evaluator = _Evaluator(text, copy_ctx)
        result = evaluator.run()
        if evaluator.pure and not copy_ctx.limits_hit:
            with _history_lock:
                _history_cache[key] = result
                while len(_history_cache) > _HISTORY_CACHE_SIZE:
                    _history_cache.popitem(last=False)
        return _post_passes(result, copy_ctx)

    return expand


def is_falsy(value: str) -> bool:
    """`{{if}}`'s test (core-macros.js): "" or, trimmed and lower-cased, "off", "false" or "0"."""
    return value == "" or value.strip().lower() in _FALSE


def trim_scoped(content: str) -> str:
    """MacroEngine.trimScopedContent: dedent by the first non-empty line's indentation, then trim."""
    if not content:
        return ""
    lines = content.split("\n")
    base = 0
    for line in lines:
        if line.strip():
            base = len(line) - len(line.lstrip(" \t"))
            break
    if base == 0:
        return content.strip()
    out = []
    for line in lines:
        indent = len(line) - len(line.lstrip(" \t"))
        out.append(line[base:] if indent >= base else line.lstrip())
    return "\n".join(out).strip()


class _Evaluator:
    def __init__(self, text: str, ctx: MacroContext) -> None:
        self.ctx = ctx
        self.raw_text = text
        self.spent = 0
        self.calls = 0
        self.depth = 0
        self.reparsed = 0
        self.pair_work = [MAX_PAIR_WORK]
        self.original_used = False
        self._text_hash: int | None = None
        self.pure = True  # no macro that reads state beyond the card, the names and the chat id ran
        self.top_text = text
        self._astral = False

    def run(self) -> str:
        deadline = self.ctx.budget.deadline
        if deadline is not None and deadline.over and "{{" in self.raw_text:
            # The build's evaluation budget is spent: refused before parsing (the text stays as written).
            return self._stopped(EXHAUSTED) + self.raw_text
        text = _LEGACY_TIME.sub(lambda m: "{{time::" + m.group(1) + "}}", self.raw_text)
        for pattern, repl in _LEGACY_MARKERS:
            text = pattern.sub(repl, text)
        self.top_text = text
        self._astral = not text.isascii() and _ASTRAL.search(text) is not None
        items, too_deep = parse_document(text, self._stop)
        if too_deep:
            self.ctx.limits_hit.add("nesting too deep")
        parts: list[str] = []
        try:
            paired = self._paired(items)
        except _Limit as stop:
            return _post(self._stopped(stop.reason) + text)
        for item, scoped, keep_raw in paired:
            try:
                parts.append(self._eval_entry(item, scoped, keep_raw, text, 0))
            except _Limit as stop:  # the rest stays as written, after a marker
                parts.append(self._stopped(stop.reason))
                parts.append(text[item.start:])
                break
        return _post("".join(parts))

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
    def _charge_parse(self, size: int) -> None:
        """Count `size` characters of nested re-parsing: each nested block re-parses its content, so
        64 nested `{{if}}` around a megabyte would parse 64 megabytes."""
        self.reparsed += size
        budget = self.ctx.budget
        budget.reparsed -= size
        if self.reparsed > MAX_REPARSE or budget.reparsed < 0:
            raise _Limit("nested blocks too large")
        if budget.deadline is not None and budget.deadline.exhausted():
            raise _Limit(EXHAUSTED)

    def _eval_text_into(self, text: str, base: int, parts: list[str]) -> None:
        self._charge_parse(len(text))
        items, too_deep = parse_document(text, self._stop)
        if too_deep:
            self.ctx.limits_hit.add("nesting too deep")
        self._eval_items(items, text, base, parts)

    def resolve(self, text: str, base: int) -> str:
        """MacroExecutionContext.resolve: a full evaluation of `text` (post-processors included)."""
        parts: list[str] = []
        self._eval_text_into(text, base, parts)
        return _post("".join(parts))

    def _eval_items(self, items: list[Text | Macro], s: str, base: int, parts: list[str]) -> None:
        for item, scoped, keep_raw in self._paired(items):
            parts.append(self._eval_entry(item, scoped, keep_raw, s, base))

    def _paired(self, items: list[Text | Macro]) -> list[tuple[Text | Macro, _Scope | None, bool]]:
        """`pair_scopes` within this call's pairing work (`MAX_PAIR_WORK`) and the build's evaluation
        budget (checked once a sibling list: scoped blocks nest up to `MAX_NESTING` lists deep)."""
        deadline = self.ctx.budget.deadline
        if deadline is not None and deadline.exhausted():
            raise _Limit(EXHAUSTED)
        try:
            return _pair_scopes(items, self.pair_work)
        except PairingTooCostly:
            raise _Limit("too many scoped blocks to pair") from None

    def _eval_entry(self, item: Text | Macro, scoped: _Scope | None, keep_raw: bool, s: str, base: int) -> str:
        if isinstance(item, Text) or keep_raw:
            return s[item.start:item.end]
        return self._eval_macro(item, s, base, scoped)

    def _eval_seq(self, items: list[Text | Macro], s: str, base: int) -> str:
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
            raise _Limit("too many macro calls")
        if self.spent > MAX_EXPANSION or budget.produced < 0:
            raise _Limit("output too large")
        deadline = budget.deadline
        # The clock is read every 64 calls (a call is ~2 µs; reading it costs a fraction of that).
        if deadline is not None and (deadline.over or (not budget.calls & 63 and deadline.exhausted())):
            raise _Limit(EXHAUSTED)

    def _eval_macro(self, m: Macro, s: str, base: int, scoped: _Scope | None) -> str:
        self._count()
        if self.depth >= MAX_NESTING:  # deeper would end in RecursionError (300 nested {{if}} did)
            raise _Limit("nesting too deep")
        self.depth += 1
        try:
            return self._eval_macro_body(m, s, base, scoped)
        finally:
            self.depth -= 1

    def _eval_macro_body(self, m: Macro, s: str, base: int, scoped: _Scope | None) -> str:
        if not m.name:
            return self._eval_variable(m, s, base)
        lname = m.name.lower()
        dyn = next((v for k, v in self.ctx.dynamic.items() if k.lower() == lname), None) if self.ctx.dynamic else None
        if dyn is not None or (lname not in _PURE and lname in _DEFS):
            self.pure = False
        d = None if dyn is not None else _DEFS.get(lname)
        delay = d is not None and d.delay
        args: list[str] = []
        spans: list[tuple[int, int, str]] = []
        for a in m.args:
            value = s[a.start:a.end] if delay else self._eval_seq(a.items, s, base)
            args.append(value)
            spans.append((a.start, a.end, value))
        if scoped is not None:
            content, c_start, c_end = scoped.items, m.end, scoped.end
            if c_start >= c_end:
                args.append("")
            else:
                value = s[c_start:c_end] if delay else self._eval_seq(content, s, base)
                if not delay and "#" not in m.flags:
                    value = trim_scoped(value)
                args.append(value)
                spans.append((c_start, c_end, value))
        raw = "{{" + _raw_inner(m, s, spans) + "}}"
        if dyn is not None:
            return raw if args else dyn
        if d is None:
            return raw  # unknown: as written, with its nested macros resolved (MacroEngine #resolveMacro)
        if not _args_valid(d, len(args)) and d.strict:
            return raw
        for pos in d.ints:
            if pos < len(args) and not _INTEGER.fullmatch(args[pos].strip()):
                return raw  # validateArgTypes with strictArgs
        external = EXTERNAL.get(d.fn)
        result = (external(self.ctx, args) if external is not None
                  else getattr(self, d.fn)(d.name, args, m, base, scoped is not None))
        if result is None:
            return raw  # the handler failed (ST logs it and keeps the macro as written)
        self._count(len(result))
        return result

    def _eval_variable(self, m: Macro, s: str, base: int) -> str:
        self.pure = False
        """MacroCstWalker #executeVariableOperation; the value is evaluated only when needed, at most once."""
        store = self.ctx.global_vars if m.scope == "$" else self.ctx.local_vars
        scope = "global" if m.scope == "$" else "local"
        name, op = m.var, m.op
        cache: list[str] = []

        def value() -> str:
            if not cache:
                cache.append(self._eval_seq(m.value.items, s, base).strip() if m.value else "")
            return cache[0]

        def get() -> object:
            self.ctx.reads.add((scope, name))
            return var_get(store, name)

        def falsy(v: object) -> bool:  # `!val || isFalseBoolean(normalize(val))`
            return v == "" or v == 0 or v != v or js_string(v).strip().lower() in _FALSE

        if op == "":
            return js_string(get())
        if op == "=":
            store[name] = value()
            return ""
        if op in ("++", "--"):
            self.ctx.reads.add((scope, name))
            return js_string(var_add(store, name, 1 if op == "++" else -1))
        if op == "+=":
            self.ctx.reads.add((scope, name))
            var_add(store, name, value())
            return ""
        if op == "-=":
            self.ctx.reads.add((scope, name))
            number = to_number(value())
            if number == number:  # not NaN
                var_add(store, name, -number)
            return ""
        if op == "||":
            current = get()
            return value() if falsy(current) else js_string(current)
        if op == "??":
            self.ctx.reads.add((scope, name))
            return js_string(var_get(store, name)) if name in store else value()
        if op == "||=":
            current = get()
            if falsy(current):
                store[name] = value()
                return value()
            return js_string(current)
        if op == "??=":
            self.ctx.reads.add((scope, name))
            if name not in store:
                store[name] = value()
                return value()
            return js_string(var_get(store, name))
        if op in ("==", "!="):
            same = js_string(get()) == value()
            return "true" if same == (op == "==") else "false"
        left, right = to_number(get()), to_number(value())
        if left != left or right != right:
            return "false"
        result = {">": left > right, ">=": left >= right, "<": left < right, "<=": left <= right}[op]
        return "true" if result else "false"

    # -- helpers -------------------------------------------------------------------------------------------
    def _random(self) -> float:
        rng = self.ctx.rng
        return rng.random() if isinstance(rng, random.Random) else rng()

    @staticmethod
    def _list(args: list[str]) -> list[str]:
        """core-macros.js readSingleArgsRandomList: one argument ⇒ split on `::`, else on `,` (`\\,` escapes)."""
        if len(args) != 1:
            return args
        one = args[0]
        if "::" in one:
            return [item.strip() for item in one.split("::")]
        placeholder = "\x00"
        return [item.strip().replace(placeholder, ",") for item in one.replace("\\,", placeholder).split(",")]

    # -- core-macros.js ------------------------------------------------------------------------------------
    def _repeat(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str | None:
        count = _whole(args[0]) if args else 1
        if not 0 <= count <= _MAX_REPEAT:
            return None  # a negative count throws in ST (String#repeat); a huge one is our limit
        return ("\n" if name == "newline" else " ") * count

    def _empty(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        return ""

    def _trim(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        # Scoped: the (already trimmed) content. Inline: itself, for the legacy post-processor.
        return (args[0] if args else "") if scoped else "{{trim}}"

    def _if(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        condition, content = args
        inverted = bool(re.match(r"\s*!", condition))
        if inverted:
            condition = re.sub(r"^\s*!\s*", "", condition)
        offset = base + m.start
        condition = self.resolve(condition, offset)
        var = _VAR_COND.fullmatch(condition)
        if var:
            macro = "getvar" if var.group(1) == "." else "getglobalvar"
            condition = self.resolve("{{" + macro + "::" + var.group(2) + "}}", offset)
        else:
            d = _DEFS.get(condition.lower())
            if d is not None and d.min == 0:
                condition = self.resolve("{{" + condition + "}}", offset)
        falsy = is_falsy(condition)
        if inverted:
            falsy = not falsy
        self._charge_parse(len(content))
        then_branch, else_branch = _split_else(content)
        chosen = else_branch if falsy else then_branch
        if chosen is None:
            return ""
        result = self.resolve(chosen, offset)
        return result if "#" in m.flags else trim_scoped(result)

    def _else(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        return ELSE_MARKER

    def _runtime(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        return self.ctx.runtime.get(name.lower(), _RUNTIME_DEFAULTS.get(name.lower(), ""))

    def _reverse(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        return args[0][::-1]

    def _banned(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        return ""  # banning words is a text-completion request option; the macro prints nothing

    def _outlet(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        return self.ctx.outlets.get(args[0], "") if args[0] else ""

    def _random_pick(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        items = self._list(args)
        if not items:
            return ""
        return items[min(int(self._random() * len(items)), len(items) - 1)]

    def _stable_pick(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        """core-macros.js `pick`: seeded by getStringHash("chatIdHash-contentHash-globalOffset[-rerollSeed]")
        through seedrandom (`seeded`); the offset counts UTF-16 units of the pre-processed text, as JS does."""
        items = self._list(args)
        if not items:
            return ""
        if self._text_hash is None:
            self._text_hash = string_hash(self.raw_text)
        offset = base + m.start
        if self._astral:
            offset += sum(1 for ch in self.top_text[:offset] if ord(ch) > 0xFFFF)
        ctx = self.ctx
        chat_hash = ctx.chat_id_hash if ctx.chat_id_hash is not None else string_hash(ctx.chat_id)
        parts = [str(chat_hash), str(self._text_hash), str(offset)]
        if ctx.pick_reroll_seed is not None:
            parts.append(js_string(ctx.pick_reroll_seed))
        rng = seedrandom(str(string_hash("-".join(parts))))
        return items[int(rng() * len(items))]

    def _roll(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        """droll syntax `[N]dM[+-K]`; digits alone mean 1dM; invalid or over our limits ⇒ ""."""
        dice = parse_dice(args[0]) if args[0] == args[0].strip() else None  # text.dice: the one rule
        if dice is None:
            return ""
        return str(sum(dice.roll(self._random)) + dice.bonus)

    # -- env-macros.js / chat-macros.js --------------------------------------------------------------------
    def _field(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        attr = _FIELDS[name.lower()]
        value = getattr(self.ctx, attr)
        if value is None and attr in _SOLO:  # not a group chat: the names ST falls back to
            value = getattr(self.ctx, _SOLO[attr])
        if value is None and attr in self.ctx.lazy:
            value = self.ctx.lazy[attr]()
            setattr(self.ctx, attr, value)
        return "" if value is None else str(value)

    def _greeting(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        index = _whole(args[0]) if args else 0
        if index == 0:
            return self.ctx.first_message
        alternates = self.ctx.alternate_greetings
        return alternates[index - 1] if 0 < index <= len(alternates) else ""

    def _original(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str | None:
        if self.ctx.original is None:
            return None
        if self.original_used:
            return ""
        self.original_used = True
        return self.ctx.original

    def _all_chat_range(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        n = self.ctx.chat_length
        return f"0-{n - 1}" if n else ""

    # -- time-macros.js ------------------------------------------------------------------------------------
    def _now(self) -> datetime:
        return aware(self.ctx.now())

    def _time(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        now = self._now()
        match = _UTC_SPEC.fullmatch(args[0]) if args else None
        if match:
            n = _whole(match.group(1))
            minutes = n * 60 if -16 < n < 16 else n  # moment utcOffset(): |n| < 16 means hours
            if abs(minutes) < 24 * 60:
                now = now.astimezone(timezone(timedelta(minutes=minutes)))
        return moment_format(now, "LT")

    def _date(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        fmt = {"date": "LL", "weekday": "dddd", "isotime": "HH:mm", "isodate": "YYYY-MM-DD"}[name]
        return moment_format(self._now(), fmt)

    def _datetimeformat(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        return moment_format(self._now(), args[0])

    def _idle(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        last = self.ctx.last_user_message_at
        if last is None:
            return "just now"
        return humanize_duration(self._now() - aware(last))

    def _time_diff(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        """moment(a).diff(moment(b)) humanized with a suffix; ISO 8601 dates only (else moment's "Invalid date")."""
        try:
            left, right = (aware(datetime.fromisoformat(a.strip())) for a in args)
        except ValueError:
            return "Invalid date"
        delta = left - right
        words = humanize_duration(abs(delta))
        return f"in {words}" if delta >= timedelta(0) else f"{words} ago"

    # -- variable-macros.js / variables.js -----------------------------------------------------------------
    def _store(self, name: str) -> tuple[str, dict[str, object]]:
        return ("global", self.ctx.global_vars) if "global" in name else ("local", self.ctx.local_vars)

    def _refused(self, name: str, value: object) -> bool:
        if self.ctx.refuse_write is not None and self.ctx.refuse_write(f"{name}\n{value}"):
            self.ctx.limits_hit.add("a variable holding the configured API key was not written")
            return True
        return False

    def _setvar(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        if not self._refused(args[0], args[1]):
            self._store(name)[1][args[0]] = args[1]
        return ""

    def _getvar(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        scope, store = self._store(name)
        self.ctx.reads.add((scope, args[0]))
        return js_string(var_get(store, args[0]))

    def _addvar(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        scope, store = self._store(name)
        self.ctx.reads.add((scope, args[0]))
        if not self._refused(args[0], args[1]):
            var_add(store, args[0], args[1])
        return ""

    def _incvar(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        scope, store = self._store(name)
        self.ctx.reads.add((scope, args[0]))
        return js_string(var_add(store, args[0], 1 if name.startswith("inc") else -1))

    def _hasvar(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        scope, store = self._store(name)
        self.ctx.reads.add((scope, args[0]))
        return "true" if args[0] in store else "false"

    def _deletevar(self, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
        self._store(name)[1].pop(args[0], None)
        return ""


# ---------------------------------------------------------------------------------------------------------------
# Evaluation helpers

def _post(s: str) -> str:
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


# ---------------------------------------------------------------------------------------------------------------
# The registry (definitions/*.js): names and aliases, arity, integer-typed positions.

_macro("space", fn="_repeat", max=1, ints=(0,))
_macro("newline", fn="_repeat", max=1, ints=(0,))
_macro("noop", fn="_empty")
_macro("trim", fn="_trim", max=1)
_macro("if", fn="_if", min=2, max=2, delay=True)
_macro("else", fn="_else")
_macro("input", fn="_field")
_macro("maxPrompt", "maxPromptTokens", fn="_runtime")
_macro("maxContext", "maxContextTokens", fn="_runtime")
_macro("maxResponse", "maxResponseTokens", fn="_runtime")
_macro("reverse", fn="_reverse", min=1, max=1)
_macro("//", "comment", fn="_empty", min=1, max=1, list=True, strict=False)
_macro("roll", fn="_roll", min=1, max=1)
_macro("random", fn="_random_pick", list=True)
_macro("pick", fn="_stable_pick", list=True)
_macro("banned", fn="_banned", min=1, max=1)
_macro("outlet", fn="_outlet", min=1, max=1)
for _names in (("user",), ("char",), ("group", "charIfNotGroup"), ("groupNotMuted",), ("notChar",),
               ("charPrompt",), ("charInstruction",), ("charDescription", "description"),
               ("charPersonality", "personality"), ("charScenario", "scenario"), ("persona",), ("mesExamplesRaw",),
               ("mesExamples",), ("charDepthPrompt",), ("charCreatorNotes", "creatorNotes"),
               ("charVersion", "version", "char_version"), ("lastMessage",), ("lastMessageId",),
               ("lastUserMessage",), ("lastCharMessage",), ("firstIncludedMessageId",), ("lastSwipeId",),
               ("currentSwipeId",), ("authorsNote",), ("charAuthorsNote",), ("defaultAuthorsNote",), ("summary",)):
    _macro(*_names, fn="_field")
_macro("charFirstMessage", "greeting", fn="_greeting", max=1, ints=(0,))
_macro("model", fn="_runtime")
_macro("original", fn="_original")
_macro("isMobile", fn="_runtime")
_macro("firstDisplayedMessageId", fn="_runtime")
_macro("allChatRange", fn="_all_chat_range")
_macro("time", fn="_time", max=1)
_macro("date", fn="_date")
_macro("weekday", fn="_date")
_macro("isotime", fn="_date")
_macro("isodate", fn="_date")
_macro("datetimeformat", fn="_datetimeformat", min=1, max=1)
_macro("idleDuration", "idle_duration", fn="_idle")
_macro("timeDiff", fn="_time_diff", min=2, max=2)
_macro("lastGenerationType", fn="_runtime")
_macro("hasExtension", fn="_runtime", min=1, max=1)
for _names in (("instructStoryStringPrefix",), ("instructStoryStringSuffix",), ("instructUserPrefix", "instructInput"),
               ("instructUserSuffix",), ("instructAssistantPrefix", "instructOutput"),
               ("instructAssistantSuffix", "instructSeparator"), ("instructSystemPrefix",), ("instructSystemSuffix",),
               ("instructFirstAssistantPrefix", "instructFirstOutputPrefix"),
               ("instructLastAssistantPrefix", "instructLastOutputPrefix"), ("instructStop",), ("instructUserFiller",),
               ("instructSystemInstructionPrefix",), ("instructFirstUserPrefix", "instructFirstInput"),
               ("instructLastUserPrefix", "instructLastInput"),
               ("defaultSystemPrompt", "instructSystem", "instructSystemPrompt"), ("systemPrompt",),
               ("exampleSeparator", "chatSeparator"), ("chatStart",)):
    _macro(*_names, fn="_runtime")
for _scope in ("", "global"):
    _macro(f"set{_scope}var", fn="_setvar", min=2, max=2)
    _macro(f"add{_scope}var", fn="_addvar", min=2, max=2)
    _macro(f"inc{_scope}var", fn="_incvar", min=1, max=1)
    _macro(f"dec{_scope}var", fn="_incvar", min=1, max=1)
    _macro(f"get{_scope}var", fn="_getvar", min=1, max=1)
    _macro(f"has{_scope}var", f"{_scope}varexists" if _scope else "varexists", fn="_hasvar", min=1, max=1)
    _macro(f"delete{_scope}var", f"flush{_scope}var", fn="_deletevar", min=1, max=1)

_SOLO = {"group": "char", "group_not_muted": "char", "not_char": "user"}
"""The group macros' values outside a group chat (SillyTavern: `{{group}}` is `{{char}}`)."""

_RUNTIME_DEFAULTS = {"ismobile": "false", "hasextension": "false"}  # String(isMobile()), String(undefined ?? false)

_FIELDS = {
    "user": "user", "char": "char", "group": "group", "charifnotgroup": "group", "groupnotmuted": "group_not_muted",
    "notchar": "not_char",
    "persona": "persona", "chardescription": "description", "charpersonality": "personality",
    "charscenario": "scenario", "mesexamples": "mes_examples", "mesexamplesraw": "mes_examples_raw",
    "charprompt": "char_prompt", "charinstruction": "char_instruction", "chardepthprompt": "char_depth_prompt",
    "charcreatornotes": "creator_notes", "charversion": "char_version", "input": "input",
    "lastmessage": "last_message", "lastusermessage": "last_user_message", "lastcharmessage": "last_char_message",
    "lastmessageid": "last_message_id", "lastswipeid": "last_swipe_id", "currentswipeid": "current_swipe_id",
    "firstincludedmessageid": "first_included_message_id", "authorsnote": "authors_note",
    "charauthorsnote": "char_authors_note", "defaultauthorsnote": "default_authors_note", "summary": "summary",
}
