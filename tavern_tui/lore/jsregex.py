"""Translates a JavaScript regular expression into the Python `regex` module's syntax.

SillyTavern tests `/pattern/flags` keys with `new RegExp(pattern, flags).test(buffer)`
(public/scripts/world-info.js `parseRegexFromString`, `WorldInfoBuffer.matchKeys`). Python's
syntax looks alike but means different things in places, so each construct is rewritten:

- `\\d \\w \\b` (and negations) are ASCII in JS (`\\w` = `[A-Za-z0-9_]`), Unicode in Python;
  `\\s` is JS's own whitespace set (it includes U+FEFF, Python's does not).
- `.` without `s` excludes \\n, \\r, U+2028, U+2029 (Python: only \\n).
- `$` without `m` is the very end (Python's `$` also matches before a final newline);
  with `m`, `^`/`$` see all four JS line terminators.
- `[]` never matches, `[^]` matches anything; `[\\w-z]` has a literal `-` (Annex B).
- Annex B leniency without `u`: a lone `{`, `}` or `]` is literal, `\\q` is `q`, `\\1` beyond the
  group count is an octal escape; `\\uD83D\\uDE00` surrogate escapes become one code point.
- `(?<name>…)` / `\\k<name>` → `(?P<name>…)` / `(?P=name)`.
- `y` (sticky) anchors the test at position 0, as a fresh RegExp's `.test` does; `g` is a no-op
  for a single `.test` on a fresh RegExp.

Not replicated (documented limits): JS `i` without `u` folds case by `toUpperCase` and keeps
`ſ`/`K` apart from ASCII; Python folds them together. A backreference to a group that has not
matched matches "" in JS and fails in Python. Inline modifier groups `(?i:…)` (ES2025) are
refused. A pattern Python cannot compile is treated like an invalid JS regex.

Cost limits (not in SillyTavern, whose V8 runs counted repeats without unrolling them): `regex`
unrolls `x{n}` into n copies, ~260 bytes each, so `/a{99999999}/` took minutes and gigabytes to
compile. A pattern longer than `MAX_PATTERN_CHARS`, a counted repeat above `MAX_REPEAT`, or an
estimated program (atoms times nested repeat counts) above `MAX_PROGRAM_UNITS` raises
`JSRegexTooCostly` before anything is compiled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import regex

from tavern_tui.lore.jsregex_cost import (
    MAX_PATTERN_CHARS,
    Cost,
    JSRegexError,
    JSRegexTooCostly,
)

# JS `\s` (ECMAScript WhiteSpace + LineTerminator), as class-body text.
JS_SPACE_CLASS = "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
JS_WHITESPACE = frozenset("\t\n\x0b\x0c\r \xa0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff") | frozenset(
    chr(c) for c in range(0x2000, 0x200B)
)
_JS_WHITESPACE_CHARS = "".join(sorted(JS_WHITESPACE))
_WORD_CLASS = "A-Za-z0-9_"
_DIGIT_CLASS = "0-9"
_LINE_TERMS = "\\n\\r\\u2028\\u2029"
# JS `\\b` / `\\B` look at `[A-Za-z0-9_]` on both sides: `regex`'s own boundary under the ASCII
# flag is exactly that (checked for every code point by the tests) and ~15x faster than
# lookarounds. Under `iu` JS also counts ſ (U+017F) and K (U+212A) as word characters
# (ECMAScript WordCharacters); that class is spelled out, with IGNORECASE off (it would add İ, ı).
_BOUNDARY = "(?a:\\b)"
_NON_BOUNDARY = "(?a:\\B)"
_IU_WORD = "[A-Za-z0-9_\\u017f\\u212a]"
_BOUNDARY_IU = f"(?-i:(?<={_IU_WORD})(?!{_IU_WORD})|(?<!{_IU_WORD})(?={_IU_WORD}))"
_NON_BOUNDARY_IU = f"(?-i:(?<={_IU_WORD})(?={_IU_WORD})|(?<!{_IU_WORD})(?!{_IU_WORD}))"
_SHORTHANDS = {"d": (_DIGIT_CLASS, False), "D": (_DIGIT_CLASS, True), "w": (_WORD_CLASS, False),
               "W": (_WORD_CLASS, True), "s": (JS_SPACE_CLASS, False), "S": (JS_SPACE_CLASS, True)}
_CONTROL = {"t": "\t", "n": "\n", "r": "\r", "v": "\x0b", "f": "\x0c"}
_QUANT = re.compile(r"\{(\d+)(,(\d*))?\}")
_HEX2 = re.compile(r"[0-9A-Fa-f]{2}")
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")
_BRACED_HEX = re.compile(r"\{([0-9A-Fa-f]+)\}")
_GROUP_NAME = re.compile(r"<([A-Za-z_$][\w$]*)>")
_PROPERTY = re.compile(r"\{[A-Za-z_]+(=[A-Za-z_]+)?\}")
_PLAIN_GROUPS = ("(", "(?:", "(?=", "(?!")
_PLAIN_DEPTH = 20  # deeper nesting is compiled to find out (`regex`'s parser recurses per level)


def js_trim(text: str) -> str:
    """`String.prototype.trim`: strip JS whitespace (differs from `str.strip` at U+FEFF, U+001C–1F, U+0085)."""
    return text.strip(_JS_WHITESPACE_CHARS)  # C speed: a 2 MB key of newlines once took 64 ms in a loop


def compile_js_regex(pattern: str, flags: str) -> tuple[regex.Pattern[str], bool]:
    """Compile the JS regex `/pattern/flags` for Python.

    Returns (compiled pattern, sticky): with sticky true the caller must use `.match` (test at
    position 0) instead of `.search`.

    Raises:
        JSRegexError: invalid or duplicate flags, invalid JS syntax, an unsupported construct, or
            a translation Python cannot compile.
        JSRegexTooCostly: a valid pattern over the cost limits (see the module docstring).
    """
    translation = translate_js_regex(pattern, flags)
    return compile_translation(translation), translation.sticky


@dataclass(frozen=True)
class JSTranslation:
    """A JS regex translated for `regex`, not compiled yet (`translate_js_regex`).

    Attributes:
        source: the JS pattern. text: the Python pattern. ignorecase: compile with IGNORECASE.
        sticky: test at position 0 (`.match`). flags: the compiled pattern's `.flags` to be.
        plain_syntax: only constructs `regex.compile` always accepts once translated
            (`_Translator.plain`), so compiling can wait until first use; False: not known.
    """

    source: str
    text: str
    ignorecase: bool
    sticky: bool
    plain_syntax: bool
    flags: int


def translate_js_regex(pattern: str, flags: str) -> JSTranslation:
    """Translate the JS regex `/pattern/flags` without compiling it (cheap: no `regex` parse).

    Raises:
        JSRegexError: invalid or duplicate flags, invalid JS syntax, an unsupported construct
            (never "a translation Python cannot compile": only `compile_translation` knows).
        JSRegexTooCostly: a valid pattern over the cost limits (see the module docstring).
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise JSRegexTooCostly(f"pattern is {len(pattern)} characters long (at most {MAX_PATTERN_CHARS})")
    if len(set(flags)) != len(flags) or set(flags) - set("dgimsuyv"):
        raise JSRegexError(f"invalid flags {flags!r}")
    if "v" in flags or "d" in flags:
        raise JSRegexError(f"unsupported flags {flags!r}")
    translator = _Translator(pattern, flags)
    text, folded = translator.run(), "i" in flags
    return JSTranslation(pattern, text, folded, "y" in flags, translator.plain, _FLAGS_I if folded else _FLAGS)


def compile_translation(translation: JSTranslation) -> regex.Pattern[str]:
    """`regex.compile` of a translation. Raises JSRegexError if Python cannot (never if `plain_syntax`)."""
    try:
        return regex.compile(translation.text, regex.IGNORECASE if translation.ignorecase else 0)
    except (regex.error, OverflowError, RecursionError) as error:
        raise JSRegexError(f"cannot compile {translation.source!r}: {error}") from None


_FLAGS = regex.compile("").flags  # (the default version and UNICODE, as for every str pattern)
_FLAGS_I = regex.compile("", regex.IGNORECASE).flags


def _lit(code: int) -> str:
    """One literal code point, safe both inside and outside a character class."""
    ch = chr(code)
    if ch.isascii() and (ch.isalnum() or ch == "_"):
        return ch
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


class _Literals(dict[int, str]):
    """code point -> `_lit(code)`, filled on first use: `str.translate` with it writes a run of
    literal characters as `_lit` writes each, in one C-level pass."""

    def __missing__(self, code: int) -> str:
        text = self[code] = _lit(code)
        return text


_LITERALS = _Literals()
_UNCOUNTED_GROUPS = ("(?:", "(?=", "(?!", "(?<=", "(?<!")  # (no two can start at one "(")
_SPECIAL = frozenset("\\[](){}*+?.^$|")
_LITERAL_RUN = re.compile(r"[^\\\[\](){}*+?.^$|]+")
"""Characters `_Translator.run` writes as plain literals (`_one`, via `_lit`): anything but a
backslash, brackets, parentheses, braces, quantifiers and `. ^ $ |`."""


class _Translator:
    def __init__(self, pattern: str, flags: str) -> None:
        self.p = pattern
        self.n = len(pattern)
        self.unicode = "u" in flags
        self.dotall = "s" in flags
        self.multiline = "m" in flags
        extra_words = self.unicode and "i" in flags  # ſ and K are word characters then
        self.boundary = _BOUNDARY_IU if extra_words else _BOUNDARY
        self.non_boundary = _NON_BOUNDARY_IU if extra_words else _NON_BOUNDARY
        self.group_count, self.group_names = self._scan_groups()
        self.cost = Cost()
        # `plain`: so far only items `regex.compile` always accepts as translated, in a sequence it
        # always accepts: literals, classes, shorthands, `.`, anchors, `\\b`/`\\B`, `|`, groups
        # `(…)`/`(?:…)` and lookaheads up to `_PLAIN_DEPTH` deep, balanced; a quantifier only
        # after a literal, a class, a shorthand, `.` or a closed `(…)`/`(?:…)`. Anything else
        # (backreferences, named groups, lookbehinds, `\\p{…}`, a quantifier elsewhere) clears it.
        self.plain = True
        self.groups: list[bool] = []  # per open group: whether a quantifier may follow its ")"

    def _scan_groups(self) -> tuple[int, set[str]]:
        """(capturing groups, group names): `(` not followed by `?`, and `(?<name>`, outside
        escapes and classes."""
        p = self.p
        if p.count("(") == sum(map(p.count, _UNCOUNTED_GROUPS)):  # every "(" opens one of those
            return 0, set()
        count, names, i, in_class = 0, set(), 0, False
        while i < self.n:
            c = p[i]
            if c == "\\":
                i += 2
                continue
            if in_class:
                in_class = c != "]"
            elif c == "[":
                in_class = True
                if p.startswith("]", i + 1) or p.startswith("^]", i + 1):
                    i += 2 if p[i + 1] == "]" else 3
                    in_class = False
                    continue
            elif c == "(":
                if not p.startswith("?", i + 1):
                    count += 1
                elif p.startswith("?<", i + 1) and not p.startswith(("?<=", "?<!"), i + 1):
                    count += 1
                    m = _GROUP_NAME.match(p, i + 2)
                    if m:
                        names.add(m.group(1))
            i += 1
        return count, names

    def run(self) -> str:
        out: list[str] = []
        i, p = 0, self.p
        last_quant = False  # a quantifier right after a quantifier is a JS syntax error
        target = False  # the last item is one `plain` lets a quantifier follow
        while i < self.n:
            c = p[i]
            quant = False
            if c not in _SPECIAL:  # a run of plain literals: each as `_one` writes it, one atom each
                end = _LITERAL_RUN.match(p, i).end()  # type: ignore[union-attr]
                out.append(p[i:end].translate(_LITERALS))
                self.cost.atom(1, end - i)
                i, target, last_quant = end, True, False
                continue
            if c == "\\":
                piece, i = self._escape(i)
                out.append(_lit(piece) if isinstance(piece, int) else piece)
                target = piece not in (self.boundary, self.non_boundary)
            elif c == "[":
                piece, i = self._class(i)
                out.append(piece)
                target = piece != "(?!)"
            elif c == "(":
                piece, i = self._group_open(i)
                out.append(piece)
                self.cost.open()
                self.groups.append(piece in ("(", "(?:"))  # (a lookahead is not quantified in `plain`)
                self.plain = self.plain and piece in _PLAIN_GROUPS and len(self.groups) <= _PLAIN_DEPTH
                target = False
            elif c in "*+?" or (c == "{" and _QUANT.match(p, i)):
                if last_quant:
                    raise JSRegexError("nothing to repeat")
                i = self._quantifier(i, out)
                quant, self.plain, target = True, self.plain and target, False
            elif c in "{}]":
                if self.unicode:
                    raise JSRegexError(f"lone {c!r}")
                out.append(_lit(ord(c)))
                i += 1
                target = True
            elif c == ")":
                out.append(c)
                self.cost.close()
                i += 1
                self.plain = self.plain and bool(self.groups)  # (an unbalanced ")": `regex` rejects it)
                target = self.groups.pop() if self.groups else False
            else:
                out.append(self._one(c))
                i += 1
                target = c not in "^$|"
            if not quant and c not in "(|)":
                self.cost.atom()
            last_quant = quant
        self.plain = self.plain and not self.groups
        return "".join(out)

    def _one(self, c: str) -> str:
        """The translation of the one-character item `c`: `.`, `^`, `$`, `|` or a literal."""
        if c == ".":
            return "(?s:.)" if self.dotall else f"[^{_LINE_TERMS}]"
        if c == "^":
            return f"(?<![^{_LINE_TERMS}])" if self.multiline else "\\A"
        if c == "$":
            return f"(?![^{_LINE_TERMS}])" if self.multiline else "\\Z"
        return c if c == "|" else _lit(ord(c))

    def _quantifier(self, i: int, out: list[str]) -> int:
        """Translate the quantifier at `p[i]` (and a lazy `?` after it) into `out`; returns the next index."""
        p = self.p
        if p[i] == "{":
            m = _QUANT.match(p, i)
            assert m is not None
            lo, hi = int(m.group(1)), m.group(3)
            if m.group(2) and hi and int(hi) < lo:
                raise JSRegexError("numbers out of order in {} quantifier")
            out.append(m.group(0))
            self.cost.repeat(max(lo, int(hi)) if hi else lo)
            i = m.end()
        else:
            out.append(p[i])
            i += 1
        if i < self.n and p[i] == "?":
            out.append("?")
            i += 1
        return i

    def _group_open(self, i: int) -> tuple[str, int]:
        p = self.p
        for prefix in ("(?:", "(?=", "(?!", "(?<=", "(?<!"):
            if p.startswith(prefix, i):
                return prefix, i + len(prefix)
        if p.startswith("(?<", i):
            m = _GROUP_NAME.match(p, i + 2)
            if not m:
                raise JSRegexError("invalid capture group name")
            return f"(?P<{m.group(1)}>", m.end()
        if p.startswith("(?", i):
            raise JSRegexError("unsupported group syntax")
        return "(", i + 1

    def _escape(self, i: int, in_class: bool = False) -> tuple[str | int, int]:
        """Translate the escape at `p[i] == '\\'`; returns (piece, next index).

        The piece is a code point for a single literal character, else pattern text; inside a
        class it is class-body text, and a negated shorthand comes back as "\\0NEG:" + its set
        (the class builder composes those)."""
        p = self.p
        if i + 1 >= self.n:
            raise JSRegexError("\\ at end of pattern")
        d = p[i + 1]
        if d in _SHORTHANDS:
            body, negated = _SHORTHANDS[d]
            if in_class:
                return ("\0NEG:" + body if negated else body), i + 2
            return f"[{'^' if negated else ''}{body}]", i + 2
        if d == "b":
            return (8 if in_class else self.boundary), i + 2
        if d == "B" and not in_class:
            return self.non_boundary, i + 2
        if d in _CONTROL:
            return ord(_CONTROL[d]), i + 2
        if d == "0" and not (i + 2 < self.n and p[i + 2].isdigit()):
            return 0, i + 2
        if d == "c":
            if i + 2 < self.n and p[i + 2].isascii() and p[i + 2].isalpha():
                return ord(p[i + 2]) % 32, i + 3
            if self.unicode:
                raise JSRegexError("invalid \\c escape")
            return ord("\\"), i + 1  # Annex B: a literal backslash, then "c" as itself
        if d == "x":
            m = _HEX2.match(p, i + 2)
            if m:
                return int(m.group(0), 16), m.end()
            return self._identity(d, i)
        if d == "u":
            return self._unicode_escape(i)
        if d.isdigit():
            return self._decimal_escape(i, in_class)
        if d == "k" and not in_class and (self.unicode or self.group_names):
            self.plain = False
            m = _GROUP_NAME.match(p, i + 2)
            if not m or m.group(1) not in self.group_names:
                raise JSRegexError("invalid named reference")
            return f"(?P={m.group(1)})", m.end()
        if d in "pP" and self.unicode:
            self.plain = False
            m = _PROPERTY.match(p, i + 2)
            if not m:
                raise JSRegexError("invalid property escape")
            return f"\\{d}{m.group(0)}", m.end()
        return self._identity(d, i)

    def _identity(self, d: str, i: int) -> tuple[int, int]:
        if self.unicode and d.isascii() and d.isalnum():
            raise JSRegexError(f"invalid escape \\{d}")
        return ord(d), i + 2

    def _unicode_escape(self, i: int) -> tuple[int, int]:
        p = self.p
        if self.unicode:
            m = _BRACED_HEX.match(p, i + 2)
            if m:
                code = int(m.group(1), 16)
                if code > 0x10FFFF:
                    raise JSRegexError("invalid unicode escape")
                return code, m.end()
        m = _HEX4.match(p, i + 2)
        if not m:
            return self._identity("u", i)
        code, end = int(m.group(0), 16), m.end()
        # A surrogate pair written as two escapes is one code point in a Python string.
        if 0xD800 <= code < 0xDC00 and p.startswith("\\u", end):
            low = _HEX4.match(p, end + 2)
            if low and 0xDC00 <= int(low.group(0), 16) < 0xE000:
                code = 0x10000 + ((code - 0xD800) << 10) + (int(low.group(0), 16) - 0xDC00)
                end = low.end()
        return code, end

    def _decimal_escape(self, i: int, in_class: bool) -> tuple[str | int, int]:
        p = self.p
        j = i + 1
        while j < self.n and p[j].isdigit():
            j += 1
        number = int(p[i + 1:j])
        if not in_class and 0 < number <= self.group_count:
            self.plain = False
            return f"(?:\\{number})", j
        if self.unicode:
            raise JSRegexError("invalid escape")
        # Annex B: a legacy octal escape (at most 0o377), else the digit itself.
        j = i + 1
        while j < self.n and j < i + 4 and p[j] in "01234567" and int(p[i + 1:j + 1], 8) <= 0o377:
            j += 1
        if j == i + 1:
            return ord(p[i + 1]), i + 2
        return int(p[i + 1:j], 8), j

    def _class(self, i: int) -> tuple[str, int]:
        """A JS character class at `i` (its `[`) as a Python class or alternation; (text, end)."""
        j = i + 1
        negated = j < self.n and self.p[j] == "^"
        if negated:
            j += 1
        atoms, j = self._class_atoms(j)
        if not atoms:
            return ("(?s:.)" if negated else "(?!)"), j
        body, negs = self._class_body(atoms)
        inner = "".join(body)
        if not negs:
            return f"[{'^' if negated else ''}{inner}]", j
        if not negated:
            alternatives = ([f"[{inner}]"] if inner else []) + [f"[^{n}]" for n in negs]
            return "(?:" + "|".join(alternatives) + ")", j
        # [^ P \W …] = not in P and inside every complemented set.
        look = (f"(?![{inner}])" if inner else "") + "".join(f"(?=[{n}])" for n in negs[:-1])
        return f"(?:{look}[{negs[-1]}])", j

    def _class_atoms(self, j: int) -> tuple[list[tuple], int]:
        """The class's atoms up to its `]`: ("c", code) a char, ("-",) an unescaped dash,
        ("set", body), ("neg", body); and the index after the `]`."""
        p = self.p
        atoms: list[tuple] = []
        while True:
            if j >= self.n:
                raise JSRegexError("unterminated character class")
            ch = p[j]
            if ch == "]":
                return atoms, j + 1
            if ch == "\\":
                piece, j = self._escape(j, in_class=True)
                if isinstance(piece, int):
                    atoms.append(("c", piece))
                elif piece.startswith("\0NEG:"):
                    atoms.append(("neg", piece[5:]))
                else:
                    atoms.append(("set", piece))
            else:
                atoms.append(("-",) if ch == "-" else ("c", ord(ch)))
                j += 1

    def _class_body(self, atoms: list[tuple]) -> tuple[list[str], list[str]]:
        """(the class's Python pieces: chars, ranges, sets; the complemented sets apart)."""
        body: list[str] = []
        negs: list[str] = []
        k = 0
        while k < len(atoms):
            atom = atoms[k]
            if (k + 2 < len(atoms) and atoms[k + 1] == ("-",) and atom[0] in ("c", "-")
                    and atoms[k + 2][0] in ("c", "-")):
                lo = atom[1] if atom[0] == "c" else ord("-")
                hi = atoms[k + 2][1] if atoms[k + 2][0] == "c" else ord("-")
                if lo > hi:
                    raise JSRegexError("range out of order in character class")
                body.append(f"{_lit(lo)}-{_lit(hi)}")
                k += 3
                continue
            if (atom == ("-",) and 0 < k < len(atoms) - 1 and self.unicode
                    and (atoms[k - 1][0] in ("set", "neg") or atoms[k + 1][0] in ("set", "neg"))):
                raise JSRegexError("invalid character class range")
            if atom[0] == "c":
                body.append(_lit(atom[1]))
            elif atom[0] == "-":
                body.append(_lit(ord("-")))
            elif atom[0] == "set":
                body.append(atom[1])
            else:
                negs.append(atom[1])
            k += 1
        return body, negs
