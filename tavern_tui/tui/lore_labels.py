"""Provides the world-book pane's and the lore tester's words: entry positions, keys, where a
book is bound, and why an entry fired (apart from `labels`, which the home screen imports before
its first paint: these load the lore engine's types)."""

from __future__ import annotations

from tavern_tui.lore.model import Position, WorldInfoEntry
from tavern_tui.lore.result import ActivationResult, Decision
from tavern_tui.tui.labels import clip
from tavern_tui.views import WorldBookView

POSITION_NAMES: dict[Position, tuple[str, str]] = {
    Position.BEFORE_CHAR: ("↑Char", "before the character"),
    Position.AFTER_CHAR: ("↓Char", "after the character"),
    Position.AN_TOP: ("↑AN", "author's note, top"),
    Position.AN_BOTTOM: ("↓AN", "author's note, bottom"),
    Position.AT_DEPTH: ("@D", "at depth in the chat"),
    Position.EM_TOP: ("↑EM", "example messages, top"),
    Position.EM_BOTTOM: ("↓EM", "example messages, bottom"),
    Position.OUTLET: ("Outlet", "outlet (a named slot)"),
}
"""(short, long) name of each entry position; the short ones are SillyTavern's own."""


def position_label(entry: WorldInfoEntry) -> str:
    """"↑Char", "@D 4" (with the depth), "Outlet"."""
    short = POSITION_NAMES[entry.position][0]
    return f"{short} {entry.depth}" if entry.position is Position.AT_DEPTH else short


def keys_label(keys: list[str], width: int) -> str:
    """Keys comma-joined; the ones that do not fit in `width` are counted: "shadowfang, beast +3"."""
    shown: list[str] = []
    for index, key in enumerate(keys):
        rest = len(keys) - index - 1
        candidate = ", ".join([*shown, key]) + (f" +{rest}" if rest else "")
        if len(candidate) > width:
            break
        shown.append(key)
    if len(shown) == len(keys):
        return ", ".join(keys)
    if not shown:  # even the first key is too long: cut it
        more = f" +{len(keys) - 1}" if len(keys) > 1 else ""
        return clip(keys[0], width - len(more)) + more
    return ", ".join(shown) + f" +{len(keys) - len(shown)}"


def binding_labels(book: WorldBookView, *, character_id: int | None, playthrough_id: int | None,
                   character_names: dict[int, str], preset_id: int | None = None) -> tuple[list[str], bool]:
    """Where a book is bound, in words, and whether it applies to the playthrough in view
    (`preset_id`: the preset that playthrough uses; None: the built-in default or no playthrough).

    Returns:
        (["global", "this character", "Skynet", "this preset"], applies); `applies` is False
        without a playthrough.
    """
    labels: list[str] = []
    applies = False
    scope_rank = {"global": 0, "character": 1, "playthrough": 2, "preset": 3}
    for binding in sorted(book.bindings, key=lambda b: scope_rank.get(b.partition(":")[0], 4)):
        scope, _, target = binding.partition(":")
        target_id = int(target) if target.isdigit() else None
        if scope == "global":
            labels.append("global")
            applies = applies or playthrough_id is not None
        elif scope == "character" and target_id == character_id:
            labels.append("this character")
            applies = True
        elif scope == "playthrough" and target_id == playthrough_id:
            labels.append("this playthrough")
            applies = True
        elif scope == "preset" and target_id is not None and target_id == preset_id:
            labels.append("this preset")
            applies = applies or playthrough_id is not None
        elif scope == "character" and target_id is not None:
            labels.append(character_names.get(target_id, f"character {target_id}"))
        else:
            labels.append(f"{scope} #{target}" if target else scope)
    return labels, applies


def decision_line(decision: Decision) -> str:
    """"✓ Eldoria#1 shadowfang — key: key 'shadowfang' found in the input"."""
    mark = "✓" if decision.fired else "✗"
    title = f" {decision.comment}" if decision.comment else ""
    return f"{mark} {decision.book}#{decision.uid}{title} — {decision.reason.value}: {decision.detail}"


def totals_line(result: ActivationResult) -> str:
    """"3 fired · 792 of 1024 budget tokens", plus " · over budget" when the budget stopped an entry, the regex
    budget's news and the first failed template ("· template failed in Book/3 (comment): timed out")."""
    fired = sum(d.fired for d in result.decisions)
    line = f"{fired} fired · {result.tokens_used} of {result.budget} budget tokens"
    line = line + " · over budget" if result.overflowed else line
    spent = result.regex_budget
    if spent.get("exhausted"):  # issue 23 item 8: say so, the decisions name the keys
        line += f" · regex time budget ({spent['seconds']} s) used up: {spent['skipped']} searches skipped"
    elif spent.get("timeouts"):
        line += f" · {spent['timeouts']} regex searches timed out"
    failures = getattr(result, "template_failures", None) or []
    if failures:  # issue 18: a template error or timeout is named in the world-book pane
        where, error = failures[0]
        more = f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""
        line += f" · template failed in {where.removeprefix('world info: ')}: {error}{more}"
    return line
