"""Provides `fast_tree`: `re._parser.parse` for the simple patterns `jsregex` produces, faster.

`regex_plan.analyse_regex` reads a key's translation as the tree `re._parser` (pure Python,
~40 µs a key) builds. Most translations are short sequences of literals (`\\xHH`/`\\uHHHH`
escapes included), character classes of literals and ranges, `\\A`/`\\Z`, quantifiers and
`(?:…|…)` groups: `fast_tree` tokenizes those with one regex and builds the same tree, with the
parser's own rewrites (non-capturing groups unpacked, a prefix common to all branches moved out,
branches of single characters made a class, a class of one literal made a literal). Anything
else (capturing groups, lookarounds, inline flags, `.`, other escapes, whatever might raise)
returns None and is left to `re._parser`. tests/lore/test_regex_fastplan.py compares both
trees and plans on generated patterns, the benchmark's and the corpus books' keys.
"""

from __future__ import annotations

import codecs
import re
from itertools import repeat

try:  # Python 3.11+: the pure-Python parser behind `re` (sre_parse is a deprecated alias of it).
    import re._constants as _sre
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as _sre  # type: ignore[no-redef]

_HEX = r"\\x[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"
_CH = rf"[A-Za-z0-9_]|{_HEX}"
_CLASS_CH = rf"[A-Za-z0-9_ ]|{_HEX}|\\[nrtfv]"
_TOKEN = re.compile(
    rf"(?P<run>(?:{_CH})+)"
    rf"|\[(?P<neg>\^)?(?P<body>(?:(?:{_CLASS_CH})(?:-(?:{_CLASS_CH}))?)+)\]"
    r"|(?P<quant>(?:[?*+]|\{(?P<lo>\d+)(?P<comma>,(?P<hi>\d*))?\})(?P<lazy>\?)?)"
    r"|(?P<open>\(\?:)|(?P<bar>\|)|(?P<close>\))|\\(?P<at>[AZ])")
_CLASS_ITEM = re.compile(rf"({_CLASS_CH})(?:-({_CLASS_CH}))?")
_ESCAPES = {"\\n": 10, "\\r": 13, "\\t": 9, "\\f": 12, "\\v": 11}
_LITERAL, _NOT_LITERAL, _IN, _RANGE, _NEGATE = _sre.LITERAL, _sre.NOT_LITERAL, _sre.IN, _sre.RANGE, _sre.NEGATE
_BRANCH, _AT = _sre.BRANCH, _sre.AT
_MAXREPEAT = _sre.MAXREPEAT
_AT_CODES = {"A": _sre.AT_BEGINNING_STRING, "Z": _sre.AT_END_STRING}
_SIMPLE_OPS = frozenset({_LITERAL, _NOT_LITERAL, _IN, _AT})
_GROUP = object()
"""Stands for a non-capturing group in a sequence being parsed (unpacked at its end)."""


class _Decline(Exception):
    """The pattern is outside what `fast_tree` reads."""


def fast_tree(pattern: str) -> list | None:
    """`list(re._parser.parse(pattern))` with nested lists for its SubPatterns, or None when the
    pattern is not one of the simple forms this module reads (see the module docstring)."""
    tokens = []
    end = 0
    for m in _TOKEN.finditer(pattern):
        if m.start() != end:
            return None
        end = m.end()
        tokens.append(m)
    if end != len(pattern):
        return None
    tokens.append(None)
    try:
        tree, at = _sub(tokens, 0)
    except _Decline:
        return None
    return tree if tokens[at] is None else None


def _sub(tokens: list, at: int) -> tuple[list, int]:
    """`_parse_sub`: an alternation from `tokens[at]`; (its items, the index after it)."""
    branches = []
    while True:
        seq, at = _seq(tokens, at)
        branches.append(seq)
        token = tokens[at]
        if token is None or token.lastgroup != "bar":
            break
        at += 1
    if len(branches) == 1:
        return branches[0], at
    out = []
    while all(branches) and all(_same(b[0], branches[0][0]) for b in branches):
        out.append(branches[0][0])
        for b in branches:
            del b[0]
    if all(len(b) == 1 and (b[0][0] is _LITERAL or (b[0][0] is _IN and b[0][1][0][0] is not _NEGATE))
           for b in branches):
        chars: list = []
        for (op, av), in branches:
            chars.extend(av if op is _IN else [(op, av)])
        out.append((_IN, list(dict.fromkeys(chars))))
    else:
        out.append((_BRANCH, (None, branches)))
    return out, at


def _same(a: tuple, b: tuple) -> bool:
    """The parser's `item[0] != prefix` test: items holding a SubPattern compare by identity."""
    return a[0] is b[0] and a[0] in _SIMPLE_OPS and a[1] == b[1]


def _seq(tokens: list, at: int) -> tuple[list, int]:
    """`_parse` for one branch: items up to `|`, `)` or the end; (items, index after them)."""
    items: list = []
    grouped = False
    while True:
        token = tokens[at]
        kind = None if token is None else token.lastgroup
        if kind is None or kind in ("bar", "close"):
            break
        at += 1
        if kind == "run":
            items.extend(zip(repeat(_LITERAL), _codes(token.group())))
        elif kind == "body":
            items.append(_class(token.group("body"), bool(token.group("neg"))))
        elif kind == "open":
            inner, at = _sub(tokens, at)
            if tokens[at] is None or tokens[at].lastgroup != "close":
                raise _Decline
            at += 1
            items.append((_GROUP, inner))
            grouped = True
        elif kind == "at":
            items.append((_AT, _AT_CODES[token.group("at")]))
        else:
            _repeat(items, token, tokens[at])
    if not grouped:
        return items, at
    out: list = []
    for op, av in items:  # unpack non-capturing groups
        if op is _GROUP:
            out.extend(av)
        else:
            out.append((op, av))
    return out, at


def _repeat(items: list, token: re.Match, following: re.Match | None) -> None:
    """Make the last item of `items` repeated as the quantifier `token` says."""
    if not items or items[-1][0] is _AT or (following is not None and following.lastgroup == "quant"):
        raise _Decline
    op, av = items[-1]
    text = token.group("quant")
    if text[0] == "{":
        low = int(token.group("lo"))
        high = token.group("hi")
        high_n = low if not token.group("comma") else int(high) if high else _MAXREPEAT
        if low >= _MAXREPEAT or (high and (int(high) >= _MAXREPEAT or int(high) < low)):
            raise _Decline
    else:
        low, high_n = {"?": (0, 1), "*": (0, _MAXREPEAT), "+": (1, _MAXREPEAT)}[text[0]]
    item = av if op is _GROUP else [(op, av)]
    if not item:
        raise _Decline
    items[-1] = (_sre.MIN_REPEAT if token.group("lazy") else _sre.MAX_REPEAT, (low, high_n, item))


def _codes(run: str) -> list[int]:
    """The code points a run of literals (plain characters and hex escapes) stands for."""
    if "\\" not in run:
        return list(map(ord, run))
    try:  # (a run is ASCII: `\\x..`, `\\u....` and `\\U........` are Python's escapes too)
        return list(map(ord, codecs.decode(run, "unicode_escape")))
    except UnicodeDecodeError:  # `\\U` above U+10FFFF
        raise _Decline from None


def _class_code(text: str) -> int:
    """The code point of one class character (plain, hex or control escape)."""
    if len(text) == 1:
        return ord(text)
    code = _ESCAPES.get(text)
    if code is None:
        code = int(text[2:], 16)
        if code > 0x10FFFF:
            raise _Decline
    return code


def _class(body: str, negated: bool) -> tuple:
    """The item a class `[body]` (`[^body]` if `negated`) parses to."""
    chars: list = []
    for m in _CLASS_ITEM.finditer(body):  # the token regex already matched all of `body`
        low = _class_code(m.group(1))
        if m.group(2) is None:
            chars.append((_LITERAL, low))
            continue
        high = _class_code(m.group(2))
        if high < low:
            raise _Decline
        chars.append((_RANGE, (low, high)))
    chars = list(dict.fromkeys(chars))
    if len(chars) == 1 and chars[0][0] is _LITERAL:
        return (_NOT_LITERAL, chars[0][1]) if negated else chars[0]
    return (_IN, [(_NEGATE, None), *chars] if negated else chars)
