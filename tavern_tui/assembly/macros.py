"""SillyTavern macros: `substitute()` (the macro engine) and `substitute_names()` (names only).

Rule source: SillyTavern 1.18, the macro engine that is on by default (`public/scripts/macros/engine/*`,
`macros/definitions/{core,env,chat,time,variable}-macros.js`), `variables.js`, and the docs page
Usage/macros.md; summarised in format-digest §e.

Syntax (MacroLexer/MacroParser): `{{name}}`, `{{name::a::b}}`, `{{name:arg}}` and `{{name arg}}` (one argument,
which may itself contain `:`/`::`); names are case-insensitive; whitespace around the name and the arguments is
ignored. Macros nest and resolve inside-out; a nested result is one opaque piece of its argument (its `::` never
splits). Anything that is not a known macro with the right number of arguments stays as written (with the macros
nested inside it resolved, as MacroEngine does). `\\{` / `\\}` lose their backslash at the end, so `\\{\\{x\\}\\}` gives
`{{x}}`. Legacy markers `<USER>`, `<BOT>`, `<CHAR>`, `<GROUP>`, `<CHARIFNOTGROUP>` and `{{time_UTC+2}}` are accepted.

Not implemented (left as written): scoped blocks (`{{if}}…{{/if}}`, `{{setvar x}}…{{/setvar}}`), variable
shorthands (`{{.x}}`, `{{$x}}`), filters (`|`), `{{timeDiff}}`, and runtime/template macros (`{{model}}`,
`{{maxPrompt}}`, instruct sequences…).

Safety limits (ours, not ST's): dice N ≤ 100 and M ≤ 1000 (else ""), `{{newline::N}}`/`{{space::N}}` with
N ≤ 1000 (else left as written), and at most `MAX_EXPANSION` characters produced by macros per call; once
spent, the remaining macros are left as written. Parsing is a single stack pass, so the work is linear in the
input plus that budget. Nothing is ever executed or `eval`-ed.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone

__all__ = ["MAX_EXPANSION", "MacroContext", "humanize_duration", "moment_format", "substitute", "substitute_names"]

_NAME_MACROS = re.compile(r"\{\{\s*(char|user)\s*\}\}|<(BOT|CHAR|USER)>", re.IGNORECASE)


def substitute_names(text: str, char: str, user: str) -> str:
    """Replace `{{char}}`/`<BOT>`/`<CHAR>` with `char` and `{{user}}`/`<USER>` with `user`.

    Case-insensitive (`{{Char}}`, `<bot>` count). Other macros are left as written.
    """
    if not text:
        return text

    def repl(match: re.Match[str]) -> str:
        name = (match.group(1) or match.group(2)).lower()
        return user if name == "user" else char

    return _NAME_MACROS.sub(repl, text)


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
# JavaScript value semantics (variables.js stores JS values; numbers print like Number#toString)

_JS_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_JS_RADIX = re.compile(r"0(?:([xX])([0-9a-fA-F]+)|([oO])([0-7]+)|([bB])([01]+))")


def _to_number(value: object) -> float:
    """JavaScript `Number(value)`; lists and dicts count as NaN (ST coerces some arrays; we do not)."""
    if value is None:
        return 0.0
    if isinstance(value, bool | int | float):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if not isinstance(value, str):
        return math.nan
    s = value.strip().strip("\ufeff")
    if not s:
        return 0.0
    if _JS_DECIMAL.fullmatch(s):
        return float(s)
    if s in ("Infinity", "+Infinity", "-Infinity"):
        return -math.inf if s[0] == "-" else math.inf
    m = _JS_RADIX.fullmatch(s)
    if m:
        digits, base = (m.group(2), 16) if m.group(1) else (m.group(4), 8) if m.group(3) else (m.group(6), 2)
        try:
            return float(int(digits, base))
        except OverflowError:
            return math.inf
    return math.nan


def _js_number(x: float) -> str:
    """JavaScript `String(number)`: `5` not `5.0`, `1e+21`, `1e-7`, `0.000001`."""
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) < 2**53:
        return str(x)
    try:
        x = float(x)
    except OverflowError:
        return "Infinity" if x > 0 else "-Infinity"
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp = repr(abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    n = len(whole) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        e = n - 1
        body = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + body


def _jsonable(value: object) -> object:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _js_string(value: object) -> str:
    """What a macro prints for a value (MacroEngine.normalizeMacroResult): objects become JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _js_number(value)
    try:
        return json.dumps(_jsonable(value), ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _store_number(x: float) -> int | float:
    return int(x) if x.is_integer() and abs(x) < 2**53 else x


def _var_get(store: dict[str, object], name: str) -> object:
    """variables.js getLocalVariable: missing ⇒ "", numeric strings ⇒ numbers."""
    if name not in store:
        return ""
    value = store[name]
    if value == "":
        return ""
    number = _to_number(value)
    if math.isnan(number):
        return value if value else ""
    return number


def _var_add(store: dict[str, object], name: str, value: str | int) -> object:
    """variables.js addLocalVariable: JSON array ⇒ push; both numeric ⇒ add; else string append."""
    current = _var_get(store, name) or 0
    if isinstance(current, str):
        try:
            parsed = json.loads(current, parse_float=lambda t: _store_number(float(t)))
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, list):
            parsed.append(value)
            store[name] = _js_string(parsed)
            return parsed
    increment = _to_number(value)
    if math.isnan(increment) or math.isnan(_to_number(current)):
        result = _js_string(current or "") + _js_string(value)
        store[name] = result
        return result
    total = _to_number(current) + increment
    if math.isnan(total):
        return ""
    store[name] = _store_number(total)
    return total


# ---------------------------------------------------------------------------------------------------------------
# Time: moment.js formatting (en locale) and Duration#humanize

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_LOCAL_FORMATS = {"LT": "h:mm A", "LTS": "h:mm:ss A", "L": "MM/DD/YYYY", "LL": "MMMM D, YYYY",
                  "LLL": "MMMM D, YYYY h:mm A", "LLLL": "dddd, MMMM D, YYYY h:mm A", "l": "M/D/YYYY",
                  "ll": "MMM D, YYYY", "lll": "MMM D, YYYY h:mm A", "llll": "ddd, MMM D, YYYY h:mm A"}
_MOMENT_TOKENS = re.compile(
    r"\[[^\[]*\]|\\.|LTS|LT|LLLL|LLL|LL|L|llll|lll|ll|l|YYYY|YY|Qo|Q|MMMM|MMM|MM|Mo|M|DDDD|DDDo|DDD|DD|Do|D"
    r"|dddd|ddd|dd|do|d|HH|H|hh|h|kk|k|mm|m|ss|s|SSS|SS|S|A|a|ZZ|Z|X|x", re.DOTALL)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _offset(dt: datetime, colon: bool) -> str:
    delta = dt.utcoffset() or timedelta(0)
    minutes = int(delta.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    hours, mins = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}{':' if colon else ''}{mins:02d}"


def moment_format(dt: datetime, fmt: str) -> str:
    """Format `dt` like moment.js `format(fmt)` in the English locale.

    Supported tokens: YYYY YY Q Qo MMMM MMM MM Mo M DDDD DDDo DDD DD Do D dddd ddd dd do d HH H hh h kk k mm m
    ss s SSS SS S A a ZZ Z X x, the localized LT LTS L LL LLL LLLL l ll lll llll, `[literal]` and `\\c` escapes.
    Any other character (including unsupported moment tokens such as w, E, N, gg) is printed as is.
    """
    def token(match: re.Match[str]) -> str:
        t = match.group(0)
        if t[0] == "[":
            return t[1:-1]
        if t[0] == "\\":
            return t[1:]
        if t in _LOCAL_FORMATS:
            return moment_format(dt, _LOCAL_FORMATS[t])
        hour12 = dt.hour % 12 or 12
        weekday = (dt.weekday() + 1) % 7  # moment: Sunday = 0
        doy = dt.timetuple().tm_yday
        match t:
            case "YYYY": return f"{dt.year:04d}"
            case "YY": return f"{dt.year % 100:02d}"
            case "Q": return str((dt.month - 1) // 3 + 1)
            case "Qo": return _ordinal((dt.month - 1) // 3 + 1)
            case "MMMM": return _MONTHS[dt.month - 1]
            case "MMM": return _MONTHS[dt.month - 1][:3]
            case "MM": return f"{dt.month:02d}"
            case "Mo": return _ordinal(dt.month)
            case "M": return str(dt.month)
            case "DDDD": return f"{doy:03d}"
            case "DDDo": return _ordinal(doy)
            case "DDD": return str(doy)
            case "DD": return f"{dt.day:02d}"
            case "Do": return _ordinal(dt.day)
            case "D": return str(dt.day)
            case "dddd": return _DAYS[weekday]
            case "ddd": return _DAYS[weekday][:3]
            case "dd": return _DAYS[weekday][:2]
            case "do": return _ordinal(weekday)
            case "d": return str(weekday)
            case "HH": return f"{dt.hour:02d}"
            case "H": return str(dt.hour)
            case "hh": return f"{hour12:02d}"
            case "h": return str(hour12)
            case "kk": return f"{dt.hour or 24:02d}"
            case "k": return str(dt.hour or 24)
            case "mm": return f"{dt.minute:02d}"
            case "m": return str(dt.minute)
            case "ss": return f"{dt.second:02d}"
            case "s": return str(dt.second)
            case "SSS": return f"{dt.microsecond // 1000:03d}"
            case "SS": return f"{dt.microsecond // 10000:02d}"
            case "S": return str(dt.microsecond // 100000)
            case "A": return "AM" if dt.hour < 12 else "PM"
            case "a": return "am" if dt.hour < 12 else "pm"
            case "ZZ": return _offset(dt, colon=False)
            case "Z": return _offset(dt, colon=True)
            case "X": return str(math.floor(_aware(dt).timestamp()))
            case "x": return str(math.floor(_aware(dt).timestamp() * 1000))
        return t

    return _MOMENT_TOKENS.sub(token, fmt)


def _aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo is not None else dt.astimezone()


def _js_round(x: float) -> int:
    return math.floor(x + 0.5)


def humanize_duration(delta: timedelta) -> str:
    """moment.js `duration.humanize()` without suffix (en), sign ignored.

    Thresholds (moment defaults ss=44, s=45, m=45, h=22, d=26, M=11; units rounded half-up):
    ≤44 s "a few seconds"; ≤1 min "a minute"; <45 min "N minutes"; ≤1 h "an hour"; <22 h "N hours";
    ≤1 day "a day"; <26 days "N days"; ≤1 month "a month"; <11 months "N months"; ≤1 year "a year";
    else "N years" (months = days × 4800 / 146097, years = months / 12).
    """
    ms = abs(delta.total_seconds() * 1000)
    seconds, minutes, hours = _js_round(ms / 1000), _js_round(ms / 6e4), _js_round(ms / 36e5)
    days_f = ms / 864e5
    days, months, years = _js_round(days_f), _js_round(days_f * 4800 / 146097), _js_round(days_f * 400 / 146097)
    if seconds <= 44:
        return "a few seconds"
    if seconds < 45:
        return f"{seconds} seconds"
    if minutes <= 1:
        return "a minute"
    if minutes < 45:
        return f"{minutes} minutes"
    if hours <= 1:
        return "an hour"
    if hours < 22:
        return f"{hours} hours"
    if days <= 1:
        return "a day"
    if days < 26:
        return f"{days} days"
    if months <= 1:
        return "a month"
    if months < 11:
        return f"{months} months"
    if years <= 1:
        return "a year"
    return f"{years} years"


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
        return _aware(self.ctx.now())

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
        return humanize_duration(self._now() - _aware(last))

    # -- variables (variable-macros.js, variables.js) ---------------------------------------------------------
    def _store(self, name: str) -> dict[str, object]:
        return self.ctx.global_vars if "global" in name else self.ctx.local_vars

    @_macro("setvar", "setglobalvar", args=(2, 2))
    def _setvar(self, name: str, args: list[str], offset: int) -> str:
        self._store(name)[args[0]] = args[1]
        return ""

    @_macro("getvar", "getglobalvar", args=(1, 1))
    def _getvar(self, name: str, args: list[str], offset: int) -> str:
        return _js_string(_var_get(self._store(name), args[0]))

    @_macro("addvar", "addglobalvar", args=(2, 2))
    def _addvar(self, name: str, args: list[str], offset: int) -> str:
        _var_add(self._store(name), args[0], args[1])
        return ""

    @_macro("incvar", "incglobalvar", "decvar", "decglobalvar", args=(1, 1))
    def _incvar(self, name: str, args: list[str], offset: int) -> str:
        return _js_string(_var_add(self._store(name), args[0], 1 if name.startswith("inc") else -1))

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
