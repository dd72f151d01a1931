"""The macro engine: `MacroContext` and `substitute()` (the rules are in the package docstring).

Rule source: SillyTavern 1.18 `public/scripts/macros/engine/*` (MacroLexer, MacroParser, MacroCstWalker)
and `macros/definitions/{core,env,chat,time,variable}-macros.js`.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone

from tavern_tui.assembly.macros.jsvalues import js_string, var_add, var_get
from tavern_tui.assembly.macros.moment import aware, humanize_duration, moment_format

__all__ = ["MAX_EXPANSION", "MacroContext", "substitute"]


# ---------------------------------------------------------------------------------------------------------------
# Context


def _default_now() -> datetime:
    return datetime.now(UTC).astimezone()


@dataclass
class MacroContext:
    """Everything `substitute()` reads or writes. Source: ST 1.18 `MacroEnvBuilder` + macro definitions.

    Names/card fields are plain strings. Chat state is pre-computed by the caller in ST's form:
    `last_message_id` = index of the last message, `last_swipe_id` = number of swipes of the last message,
    `current_swipe_id` = its 1-based swipe index (None ⇒ ""). `original` is the text `{{original}}` stands for
    (None ⇒ ""); it is emitted at its first occurrence per `substitute()` call only. `now` returns the current
    time (aware; the default is local time); `rng` is a `random.Random` or a `() -> float in [0, 1)`, used by
    `{{random}}` and `{{roll}}`. `chat_id` seeds `{{pick}}`. `local_vars` (= chat_metadata.variables) and
    `global_vars` are mutated in place by the variable macros. `outlets` maps a world-info outlet name to its text.
    """

    char: str = ""
    user: str = ""
    persona: str = ""
    description: str = ""
    personality: str = ""
    scenario: str = ""
    mes_examples: str = ""
    mes_examples_raw: str = ""
    char_prompt: str = ""
    char_instruction: str = ""
    char_depth_prompt: str = ""
    creator_notes: str = ""
    char_version: str = ""
    first_message: str = ""
    original: str | None = None
    input: str = ""
    last_message: str = ""
    last_user_message: str = ""
    last_char_message: str = ""
    last_message_id: int | None = None
    last_swipe_id: int | None = None
    current_swipe_id: int | None = None
    last_user_message_at: datetime | None = None
    now: Callable[[], datetime] = _default_now
    rng: random.Random | Callable[[], float] = random.random
    chat_id: str = ""
    local_vars: dict[str, object] = field(default_factory=dict)
    global_vars: dict[str, object] = field(default_factory=dict)
    outlets: dict[str, str] = field(default_factory=dict)


MAX_EXPANSION = 8_000_000  # characters macros may produce per substitute() call
_MAX_REPEAT = 1000  # {{newline::N}}, {{space::N}}
_MAX_DICE, _MAX_SIDES = 100, 1000


def substitute(text: str, ctx: MacroContext) -> str:
    """Resolve every SillyTavern macro in `text` against `ctx` and return the result.

    Variable macros mutate `ctx.local_vars`/`ctx.global_vars`. Unknown or malformed macros are left as written.
    Rules: ST 1.18 macro engine (MacroEngine/MacroCstWalker, definitions/*.js) and docs Usage/macros.md.
    """
    if not text:
        return text
    return _Evaluator(text, ctx).run()


# ---------------------------------------------------------------------------------------------------------------
# The engine

_LIT, _RES, _RAW, _OPEN = 0, 1, 2, 3  # own literal text, resolved (opaque) text, left-as-written rope, open `{{`
_Seg = tuple[int, object]

_SCAN = re.compile(r"(\{*)\{\{|\}\}|<(user|bot|char|group|charifnotgroup)>", re.IGNORECASE)
_HEAD = re.compile(r"\s*(?:[!?~#]\s*)*(//|[A-Za-z][A-Za-z0-9_-]*)")
_LEGACY_TIME = re.compile(r"time_(UTC[+-][0-9]+)", re.IGNORECASE)
_UTC_SPEC = re.compile(r"UTC([+-][0-9]{1,6})")
_INTEGER = re.compile(r"\s*-?[0-9]+\s*")
_DICE = re.compile(r"([1-9][0-9]*)?[dD]([1-9][0-9]*)([+-][0-9]{1,15})?")
_WS = re.compile(r"\s+")

# name → (min args, max args or None for a list, handler method)
_MACROS: dict[str, tuple[int, int | None, str]] = {}


def _macro(*names: str, args: tuple[int, int | None] = (0, 0)) -> Callable[[Callable], Callable]:
    def register(fn: Callable) -> Callable:
        for name in names:
            _MACROS[name.lower()] = (args[0], args[1], fn.__name__)
        return fn
    return register


def _flatten(segs: list[_Seg]) -> str:
    parts: list[str] = []
    stack = [iter(segs)]
    while stack:
        for kind, value in stack[-1]:
            if kind == _RAW:
                stack.append(iter(value))  # type: ignore[call-overload]
                break
            parts.append(value)  # type: ignore[arg-type]
        else:
            stack.pop()
    return "".join(parts)


def _trim_pieces(pieces: list[_Seg]) -> list[_Seg]:
    """Drop literal whitespace at both ends of an argument (ST skips whitespace tokens; nested output is kept)."""
    pieces = list(pieces)
    while pieces and pieces[0][0] == _LIT:
        text = pieces[0][1].lstrip()  # type: ignore[union-attr]
        if text:
            pieces[0] = (_LIT, text)
            break
        pieces.pop(0)
    while pieces and pieces[-1][0] == _LIT:
        text = pieces[-1][1].rstrip()  # type: ignore[union-attr]
        if text:
            pieces[-1] = (_LIT, text)
            break
        pieces.pop()
    return pieces


_LEADING_NEWLINES = re.compile(r"(?:\r?\n)*")
_LEADING_NEWLINES_REVERSED = re.compile(r"(?:\n\r?)*")


def _strip_newlines_right(s: str) -> str:
    """Remove the line breaks (LF or CRLF) that end `s`: the ones just before a `{{trim}}`."""
    if not s.endswith("\n"):
        return s
    return s[:len(s) - _LEADING_NEWLINES_REVERSED.match(s[::-1]).end()]  # type: ignore[union-attr]


def _strip_newlines_left(s: str) -> str:
    """Remove the line breaks (LF or CRLF) that start `s`: the ones just after a `{{trim}}`."""
    return s[_LEADING_NEWLINES.match(s).end():]  # type: ignore[union-attr]


class _Evaluator:
    def __init__(self, text: str, ctx: MacroContext) -> None:
        self.text = text
        self.ctx = ctx
        self.spent = 0
        self.original_used = False
        self._text_hash: str | None = None
        # {{trim}} and {{noop}} leave one-character markers, resolved after everything else (as ST does).
        free = [chr(c) for c in range(0xFDD0, 0xFDF0) if chr(c) not in text] + ["\ufdd0", "\ufdd1"]
        self.trim_mark, self.noop_mark = free[0], free[1]

    # -- scanning -------------------------------------------------------------------------------------------
    def run(self) -> str:
        text = self.text
        out: list[_Seg] = []
        frames: list[tuple[int, int]] = []  # (index of the _OPEN placeholder in out, offset of `{{` in text)
        pos = 0
        for m in _SCAN.finditer(text):
            if m.start() > pos:
                out.append((_LIT, text[pos:m.start()]))
            token = m.group(0)
            if token[-1] == "{":
                if m.group(1):
                    out.append((_LIT, m.group(1)))  # in `{{{`, the last two braces open the macro
                frames.append((len(out), m.end() - 2))
                out.append((_OPEN, "{{"))
            elif token == "}}":
                if frames:
                    start, offset = frames.pop()
                    segs = out[start + 1:]
                    del out[start:]
                    out.append(self._close(segs, offset))
                else:
                    out.append((_LIT, "}}"))
            else:
                out.append((_RES, self._marker(m.group(2).lower())))
            pos = m.end()
        if pos < len(text):
            out.append((_LIT, text[pos:]))
        return self._post(_flatten(out))

    def _marker(self, name: str) -> str:
        if name == "user":
            return self.ctx.user
        return self.ctx.char  # <BOT>, <CHAR>, and in a solo chat <GROUP>, <CHARIFNOTGROUP>

    def _post(self, s: str) -> str:
        """MacroEngine post-processors: unescape braces, legacy trim, then drop the noop markers."""
        s = re.sub(r"\\([{}])", r"\1", s)
        if self.trim_mark in s:
            pieces = s.split(self.trim_mark)
            last = len(pieces) - 1
            for i, piece in enumerate(pieces):
                if i > 0:
                    piece = _strip_newlines_left(piece)
                if i < last:
                    piece = _strip_newlines_right(piece)
                pieces[i] = piece
            s = "".join(pieces)
        return s.replace(self.noop_mark, "")

    # -- one macro --------------------------------------------------------------------------------------------
    def _close(self, segs: list[_Seg], offset: int) -> _Seg:
        """Evaluate one `{{…}}` whose nested macros are already resolved; anything else is left as written."""
        result = self._evaluate(segs, offset)
        return result if result is not None else (_RAW, [(_RES, "{{"), *segs, (_RES, "}}")])

    def _evaluate(self, segs: list[_Seg], offset: int) -> _Seg | None:
        if self.spent > MAX_EXPANSION or not segs or segs[0][0] != _LIT:
            return None
        head: str = segs[0][1]  # type: ignore[assignment]
        if len(segs) == 1 and (legacy := _LEGACY_TIME.fullmatch(head)):
            return self._call("time", [legacy.group(1)], offset)
        m = _HEAD.match(head)
        if not m:
            return None
        name = m.group(1).lower()
        if name in ("//", "comment"):
            return (_RES, "")  # a comment is removed whatever it contains
        if name not in _MACROS:
            return None
        args = self._split_args(head[m.end():], segs[1:])
        if args is None:
            return None
        low, high, _ = _MACROS[name]
        if len(args) < low or (high is not None and len(args) > high):
            return None
        values = [_flatten(a) for a in args]
        self.spent += sum(map(len, values))
        return self._call(name, values, offset)

    def _split_args(self, rest: str, tail: list[_Seg]) -> list[list[_Seg]] | None:
        """Arguments after the name, or None when the macro is malformed (MacroParser `arguments` rule)."""
        if not rest:
            return [] if not tail else None  # `{{name{{x}}}}` is not a macro
        ws = _WS.match(rest)
        if ws:
            rest = rest[ws.end():]
            if not rest and not tail:
                return []
        elif rest[0] != ":":
            return None
        if rest.startswith("::"):
            args: list[list[_Seg]] = [[]]
            pieces = ([(_LIT, rest[2:])] if len(rest) > 2 else []) + tail
            for kind, value in pieces:
                if kind != _LIT:
                    args[-1].append((kind, value))
                    continue
                parts = value.split("::")  # type: ignore[union-attr]
                for i, part in enumerate(parts):
                    if i:
                        args.append([])
                    if part:
                        args[-1].append((_LIT, part))
            return [_trim_pieces(a) for a in args]
        colon = rest.startswith(":")
        pieces = ([(_LIT, rest[1:] if colon else rest)] if rest[colon:] else []) + tail
        single = _trim_pieces(pieces)
        if not single:
            return None  # `{{name:}}` is a parse error in ST
        return [single]

    def _call(self, name: str, args: list[str], offset: int) -> _Seg | None:
        method = getattr(self, _MACROS[name][2])
        if name not in ("random", "pick", "reverse"):  # markers never leak into variables or lookups
            args = [a.replace(self.trim_mark, "").replace(self.noop_mark, "") for a in args]
        result = method(name, args, offset)
        if result is None:
            return None
        self.spent += len(result)
        return (_RES, result)

    # -- helpers ---------------------------------------------------------------------------------------------
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

    # -- names and card fields (env-macros.js) ---------------------------------------------------------------
    @_macro("user")
    def _user(self, name: str, args: list[str], offset: int) -> str:
        return self.ctx.user

    @_macro("char", "group", "charIfNotGroup", "groupNotMuted")
    def _char(self, name: str, args: list[str], offset: int) -> str:
        return self.ctx.char  # solo chat: the group lists are the character's name

    @_macro("notChar")
    def _not_char(self, name: str, args: list[str], offset: int) -> str:
        return self.ctx.user  # solo chat: every participant but the speaker

    @_macro("persona", "description", "charDescription", "personality", "charPersonality", "scenario",
            "charScenario", "mesExamples", "mesExamplesRaw", "charPrompt", "charInstruction", "charJailbreak",
            "charDepthPrompt", "charCreatorNotes", "creatorNotes", "charVersion", "version", "char_version",
            "input", "lastMessage", "lastUserMessage", "lastCharMessage")
    def _field(self, name: str, args: list[str], offset: int) -> str:
        return getattr(self.ctx, _FIELDS[name])

    @_macro("lastMessageId", "lastSwipeId", "currentSwipeId")
    def _number_field(self, name: str, args: list[str], offset: int) -> str:
        value = getattr(self.ctx, _FIELDS[name])
        return "" if value is None else str(value)

    @_macro("charFirstMessage", "greeting", args=(0, 1))
    def _greeting(self, name: str, args: list[str], offset: int) -> str | None:
        if args and not _INTEGER.fullmatch(args[0]):
            return None
        return self.ctx.first_message if not args or int(args[0]) == 0 else ""  # alternates are not in the ctx

    @_macro("original")
    def _original(self, name: str, args: list[str], offset: int) -> str:
        if self.original_used:
            return ""
        self.original_used = True
        return self.ctx.original or ""

    # -- utility (core-macros.js) ----------------------------------------------------------------------------
    @_macro("newline", "space", args=(0, 1))
    def _repeat(self, name: str, args: list[str], offset: int) -> str | None:
        if args and not _INTEGER.fullmatch(args[0]):
            return None
        count = int(args[0]) if args else 1
        if not 0 <= count <= _MAX_REPEAT:
            return None
        return ("\n" if name == "newline" else " ") * count

    @_macro("noop")
    def _noop(self, name: str, args: list[str], offset: int) -> str:
        return self.noop_mark

    @_macro("trim", args=(0, 1))
    def _trim(self, name: str, args: list[str], offset: int) -> str:
        return self.trim_mark

    @_macro("reverse", args=(1, 1))
    def _reverse(self, name: str, args: list[str], offset: int) -> str:
        return args[0][::-1]

    @_macro("banned", args=(1, 1))
    def _banned(self, name: str, args: list[str], offset: int) -> str:
        return ""  # banning words is a text-completion request option; the macro prints nothing

    @_macro("outlet", args=(1, 1))
    def _outlet(self, name: str, args: list[str], offset: int) -> str:
        return self.ctx.outlets.get(args[0], "") if args[0] else ""

    @_macro("random", args=(0, None))
    def _random_pick(self, name: str, args: list[str], offset: int) -> str:
        items = self._list(args)
        if not items:
            return ""
        return items[min(int(self._random() * len(items)), len(items) - 1)]

    @_macro("pick", args=(0, None))
    def _stable_pick(self, name: str, args: list[str], offset: int) -> str:
        """Seeded by chat id + the whole input text + the macro's offset (core-macros.js; not ST's exact hash)."""
        items = self._list(args)
        if not items:
            return ""
        if self._text_hash is None:
            self._text_hash = hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()
        seeded = random.Random(f"{self.ctx.chat_id}\x1f{self._text_hash}\x1f{offset}")
        return items[int(seeded.random() * len(items))]

    @_macro("roll", args=(1, 1))
    def _roll(self, name: str, args: list[str], offset: int) -> str:
        """droll syntax `[N]dM[+-K]`; digits alone mean 1dM; invalid or over our limits ⇒ ""."""
        formula = args[0]
        if formula.isascii() and formula.isdigit():
            formula = "1d" + formula
        m = _DICE.fullmatch(formula)
        if not m:
            return ""
        count, faces, bonus = m.groups()
        if len(count or "") > 3 or len(faces) > 4:
            return ""
        dice, sides = int(count or 1), int(faces)
        if dice > _MAX_DICE or sides > _MAX_SIDES:
            return ""
        total = sum(min(int(self._random() * sides), sides - 1) + 1 for _ in range(dice))
        return str(total + int(bonus or 0))

    # -- time (time-macros.js) -------------------------------------------------------------------------------
    def _now(self) -> datetime:
        return aware(self.ctx.now())

    @_macro("time", args=(0, 1))
    def _time(self, name: str, args: list[str], offset: int) -> str:
        now = self._now()
        m = _UTC_SPEC.fullmatch(args[0]) if args else None
        if m:
            n = int(m.group(1))
            minutes = n * 60 if -16 < n < 16 else n  # moment utcOffset(): |n| < 16 means hours
            if abs(minutes) < 24 * 60:
                now = now.astimezone(timezone(timedelta(minutes=minutes)))
        return moment_format(now, "LT")

    @_macro("date", "weekday", "isotime", "isodate")
    def _date(self, name: str, args: list[str], offset: int) -> str:
        fmt = {"date": "LL", "weekday": "dddd", "isotime": "HH:mm", "isodate": "YYYY-MM-DD"}[name]
        return moment_format(self._now(), fmt)

    @_macro("datetimeformat", args=(1, 1))
    def _datetimeformat(self, name: str, args: list[str], offset: int) -> str:
        return moment_format(self._now(), args[0])

    @_macro("idleDuration", "idle_duration")
    def _idle(self, name: str, args: list[str], offset: int) -> str:
        last = self.ctx.last_user_message_at
        if last is None:
            return "just now"
        return humanize_duration(self._now() - aware(last))

    # -- variables (variable-macros.js, variables.js) ---------------------------------------------------------
    def _store(self, name: str) -> dict[str, object]:
        return self.ctx.global_vars if "global" in name else self.ctx.local_vars

    @_macro("setvar", "setglobalvar", args=(2, 2))
    def _setvar(self, name: str, args: list[str], offset: int) -> str:
        self._store(name)[args[0]] = args[1]
        return ""

    @_macro("getvar", "getglobalvar", args=(1, 1))
    def _getvar(self, name: str, args: list[str], offset: int) -> str:
        return js_string(var_get(self._store(name), args[0]))

    @_macro("addvar", "addglobalvar", args=(2, 2))
    def _addvar(self, name: str, args: list[str], offset: int) -> str:
        var_add(self._store(name), args[0], args[1])
        return ""

    @_macro("incvar", "incglobalvar", "decvar", "decglobalvar", args=(1, 1))
    def _incvar(self, name: str, args: list[str], offset: int) -> str:
        return js_string(var_add(self._store(name), args[0], 1 if name.startswith("inc") else -1))

    @_macro("hasvar", "varexists", "hasglobalvar", "globalvarexists", args=(1, 1))
    def _hasvar(self, name: str, args: list[str], offset: int) -> str:
        return "true" if args[0] in self._store(name) else "false"

    @_macro("deletevar", "flushvar", "deleteglobalvar", "flushglobalvar", args=(1, 1))
    def _deletevar(self, name: str, args: list[str], offset: int) -> str:
        self._store(name).pop(args[0], None)
        return ""


_FIELDS = {
    "persona": "persona", "description": "description", "chardescription": "description",
    "personality": "personality", "charpersonality": "personality", "scenario": "scenario",
    "charscenario": "scenario", "mesexamples": "mes_examples", "mesexamplesraw": "mes_examples_raw",
    "charprompt": "char_prompt", "charinstruction": "char_instruction", "charjailbreak": "char_instruction",
    "chardepthprompt": "char_depth_prompt", "charcreatornotes": "creator_notes", "creatornotes": "creator_notes",
    "charversion": "char_version", "version": "char_version", "char_version": "char_version", "input": "input",
    "lastmessage": "last_message", "lastusermessage": "last_user_message", "lastcharmessage": "last_char_message",
    "lastmessageid": "last_message_id", "lastswipeid": "last_swipe_id", "currentswipeid": "current_swipe_id",
}
