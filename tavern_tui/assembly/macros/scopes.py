"""Provides the pairing of scoped blocks (`{{if}}…{{/if}}`) over one sibling list of the parse, the
`{{else}}` split and the trimming of a block's content.

Rule source: SillyTavern 1.18 `MacroCstWalker.js` (#processScopedMacros, #canAcceptScopedContent, rawInner),
`core-macros.js` (splitOnTopLevelElse, ELSE_MARKER) and `MacroEngine.js` (trimScopedContent).
"""

from __future__ import annotations

from dataclasses import dataclass

from tavern_tui.assembly.macros.parser import Macro, Text, parse_document
from tavern_tui.assembly.macros.registry import DEFS

__all__ = ["ELSE_MARKER", "PairingTooCostly", "Scope", "can_accept_scope", "pair_scopes", "raw_inner", "split_else",
           "trim_scoped"]

# core-macros.js ELSE_MARKER: what {{else}} prints; removed by a post-processor wherever it is left over.
ELSE_MARKER = "\u0000\u001fELSE\u001f\u0000"


def can_accept_scope(m: Macro) -> bool:
    """MacroCstWalker #canAcceptScopedContent: unknown ⇒ yes; list macros ⇒ no; else one more arg must fit."""
    d = DEFS.get(m.name.lower())
    if d is None:
        return True
    if d.list:
        return False
    return d.min <= len(m.args) + 1 <= d.max


@dataclass(slots=True)
class Scope:
    """A paired block's content: the sibling items between the tags and where the closing tag starts."""

    items: list[Text | Macro]
    end: int


def _closer(infos: list[tuple[int, Macro, str]], k: int, stop: int, matched: set[int], work: list[int] | None) -> int:
    """The item index of the closing tag pairing the opener `infos[k]` (searched up to `infos[stop]`), or -1;
    the steps taken are charged to `work`."""
    depth, close, target = 1, -1, infos[k][2]
    steps = 0
    for j in range(k + 1, stop):
        index2, other, name = infos[j]
        steps += 1
        if name != target or index2 in matched:
            continue
        if other.closing:
            depth -= 1
            if depth == 0:
                close = index2
                break
        elif can_accept_scope(other):
            depth += 1
    if work is not None:
        work[0] -= steps
        if work[0] < 0:
            raise PairingTooCostly()
    return close


class PairingTooCostly(Exception):
    """`pair_scopes` used up the work it was given (`work`): too many unpaired openers to search."""


def pair_scopes(items: list[Text | Macro], work: list[int] | None = None,
                ) -> list[tuple[Text | Macro, Scope | None, bool]]:
    """MacroCstWalker #processScopedMacros over one sibling list: pair the outermost `{{x}}…{{/x}}`.

    Returns (item, scoped content items or None, keep raw) with the paired content and closing tags removed.
    A pair whose opener cannot take one more argument stays as written (both tags); so do stray closing tags.
    Only openers whose name has a closing tag later in the list are searched for their closer; `work`
    (`[steps left]`, shared by the caller's calls) bounds the searching, ours: each opener left unpaired
    searches to the end of the list, so thousands of them would cost their square.

    Raises:
        PairingTooCostly: `work` ran out.
    """
    infos = [(i, it, it.name.lower()) for i, it in enumerate(items) if isinstance(it, Macro) and it.name]
    last_close: dict[str, int] = {}
    for k, (_, it, name) in enumerate(infos):
        if it.closing:
            last_close[name] = k
    if not last_close:
        return [(it, None, False) for it in items]
    matched: set[int] = set()
    keep_raw: set[int] = set()
    inside: set[int] = set()
    pairs: dict[int, int] = {}
    for k, (index, it, target) in enumerate(infos):
        if it.closing or index in matched or index in inside or last_close.get(target, -1) < k:
            continue
        close = _closer(infos, k, last_close[target] + 1, matched, work)
        if close < 0:
            continue
        matched.update((index, close))
        if not can_accept_scope(it):
            keep_raw.update((index, close))
            continue
        pairs[index] = close
        inside.update(range(index + 1, close))
    for index, it, _ in infos:
        if it.closing and index not in matched:
            keep_raw.add(index)
    out: list[tuple[Text | Macro, Scope | None, bool]] = []
    skip_until = -1
    for i, it in enumerate(items):
        if i <= skip_until:
            continue
        if i in pairs:
            close = pairs[i]
            out.append((it, Scope(items[i + 1:close], items[close].start), False))
            skip_until = close
        else:
            out.append((it, None, i in keep_raw))
    return out


def raw_inner(m: Macro, s: str, spans: list[tuple[int, int, str]]) -> str:
    """MacroCstWalker rawInner: the text between the braces with each argument replaced by its value.

    A scoped content lies after the opener's `}}`, so (as in ST) the text up to it, `}}` included, is kept.
    """
    out: list[str] = []
    cursor = m.inner_start
    for start, end, value in sorted(spans):
        if start > cursor:
            out.append(s[cursor:start])
        out.append(value)
        cursor = end
    if cursor < m.inner_end:
        out.append(s[cursor:m.inner_end])
    return "".join(out)


def split_else(content: str) -> tuple[str, str | None]:
    """core-macros.js splitOnTopLevelElse: split at the first `{{else}}` outside nested block `{{if}}`s."""
    if "else" not in content.lower():  # (no else macro: skip the parse)
        return content, None
    items, _ = parse_document(content)
    depth = 0
    for it in items:
        if not isinstance(it, Macro) or not it.name:
            continue
        if it.name == "if" and not it.closing and len(it.args) == 1:
            depth += 1
        elif it.name == "if" and it.closing:
            depth -= 1
        elif it.name == "else" and depth == 0:
            return content[:it.start], content[it.end:]
    return content, None


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
