"""The core macros: `{{space}}`, `{{newline}}`, `{{noop}}`, `{{trim}}`, `{{if}}`/`{{else}}`, `{{reverse}}`,
comments, `{{roll}}`, `{{random}}`, `{{pick}}`, `{{banned}}` and `{{outlet}}`.

Rule source: SillyTavern 1.18 `macros/definitions/core-macros.js`.
"""

from __future__ import annotations

import random
import re
from typing import TYPE_CHECKING

from tavern_tui.assembly.macros.jsvalues import js_string
from tavern_tui.assembly.macros.registry import DEFS, macro, whole
from tavern_tui.assembly.macros.scopes import ELSE_MARKER, split_else, trim_scoped
from tavern_tui.assembly.macros.seeded import seedrandom, string_hash
from tavern_tui.text.dice import parse_dice

if TYPE_CHECKING:
    from tavern_tui.assembly.macros.context import MacroContext
    from tavern_tui.assembly.macros.evaluator import Evaluator
    from tavern_tui.assembly.macros.parser import Macro

__all__ = ["FALSE", "is_falsy"]

FALSE = ("off", "false", "0")  # utils.js isFalseBoolean (trimmed, lower-cased)
_MAX_REPEAT = 1000  # {{newline::N}}, {{space::N}} (ours)
_VAR_COND = re.compile(r"([.$])([A-Za-z](?:[\w-]*\w)?)")


def is_falsy(value: str) -> bool:
    """`{{if}}`'s test (core-macros.js): "" or, trimmed and lower-cased, "off", "false" or "0"."""
    return value == "" or value.strip().lower() in FALSE


def _random(ctx: MacroContext) -> float:
    rng = ctx.rng
    return rng.random() if isinstance(rng, random.Random) else rng()


def _list(args: list[str]) -> list[str]:
    """core-macros.js readSingleArgsRandomList: one argument ⇒ split on `::`, else on `,` (`\\,` escapes)."""
    if len(args) != 1:
        return args
    one = args[0]
    if "::" in one:
        return [item.strip() for item in one.split("::")]
    placeholder = "\x00"
    return [item.strip().replace(placeholder, ",") for item in one.replace("\\,", placeholder).split(",")]


@macro("space", max=1, ints=(0,))
@macro("newline", max=1, ints=(0,))
def repeat(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str | None:
    count = whole(args[0]) if args else 1
    if not 0 <= count <= _MAX_REPEAT:
        return None  # a negative count throws in ST (String#repeat); a huge one is our limit
    return ("\n" if name == "newline" else " ") * count


@macro("noop")
@macro("//", "comment", min=1, max=1, list=True, strict=False)
def empty(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    return ""


@macro("trim", max=1)
def trim(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    # Scoped: the (already trimmed) content. Inline: itself, for the legacy post-processor.
    return (args[0] if args else "") if scoped else "{{trim}}"


@macro("if", min=2, max=2, delay=True)
def if_block(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    condition, content = args
    inverted = bool(re.match(r"\s*!", condition))
    if inverted:
        condition = re.sub(r"^\s*!\s*", "", condition)
    offset = base + m.start
    condition = ev.resolve(condition, offset)
    var = _VAR_COND.fullmatch(condition)
    if var:
        getter = "getvar" if var.group(1) == "." else "getglobalvar"
        condition = ev.resolve("{{" + getter + "::" + var.group(2) + "}}", offset)
    else:
        d = DEFS.get(condition.lower())
        if d is not None and d.min == 0:
            condition = ev.resolve("{{" + condition + "}}", offset)
    falsy = is_falsy(condition)
    if inverted:
        falsy = not falsy
    ev.charge_parse(len(content))
    then_branch, else_branch = split_else(content)
    chosen = else_branch if falsy else then_branch
    if chosen is None:
        return ""
    result = ev.resolve(chosen, offset)
    return result if "#" in m.flags else trim_scoped(result)


@macro("else")
def else_marker(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    return ELSE_MARKER


@macro("reverse", min=1, max=1)
def reverse(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    return args[0][::-1]


@macro("banned", min=1, max=1)
def banned(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    return ""  # banning words is a text-completion request option; the macro prints nothing


@macro("outlet", min=1, max=1)
def outlet(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    return ev.ctx.outlets.get(args[0], "") if args[0] else ""


@macro("random", list=True)
def random_pick(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    items = _list(args)
    if not items:
        return ""
    return items[min(int(_random(ev.ctx) * len(items)), len(items) - 1)]


@macro("pick", list=True)
def stable_pick(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    """core-macros.js `pick`: seeded by getStringHash("chatIdHash-contentHash-globalOffset[-rerollSeed]")
    through seedrandom (`seeded`); the offset counts UTF-16 units of the pre-processed text, as JS does."""
    items = _list(args)
    if not items:
        return ""
    if ev.text_hash is None:
        ev.text_hash = string_hash(ev.raw_text)
    offset = base + m.start
    if ev.astral:
        offset += sum(1 for ch in ev.top_text[:offset] if ord(ch) > 0xFFFF)
    ctx = ev.ctx
    chat_hash = ctx.chat_id_hash if ctx.chat_id_hash is not None else string_hash(ctx.chat_id)
    parts = [str(chat_hash), str(ev.text_hash), str(offset)]
    if ctx.pick_reroll_seed is not None:
        parts.append(js_string(ctx.pick_reroll_seed))
    rng = seedrandom(str(string_hash("-".join(parts))))
    return items[int(rng() * len(items))]


@macro("roll", min=1, max=1)
def roll(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    """droll syntax `[N]dM[+-K]`; digits alone mean 1dM; invalid or over our limits ⇒ ""."""
    dice = parse_dice(args[0]) if args[0] == args[0].strip() else None  # text.dice: the one rule
    if dice is None:
        return ""
    return str(sum(dice.roll(lambda: _random(ev.ctx))) + dice.bonus)
