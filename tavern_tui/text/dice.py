"""Provides dice notation as SillyTavern's `{{roll}}` macro takes it (droll syntax).

Rule source: SillyTavern `{{roll:formula}}` hands the formula to droll, which accepts
`[N]dM[+-K]` (N dice of M sides, optional constant); a formula of digits alone means `1dM`
(ST's macro adds the "1d"). Limits (ours): at most 100 dice of at most 1,000 sides, so an
untrusted formula never costs much. Used by the macro engine and the `roll_dice` tool.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

DICE = re.compile(r"([1-9][0-9]*)?[dD]([1-9][0-9]*)([+-][0-9]{1,15})?")
"""droll's notation: optional count, `d`, sides, optional signed constant."""

MAX_DICE, MAX_SIDES = 100, 1000


@dataclass(frozen=True, slots=True)
class Dice:
    """A parsed formula: `count` dice of `sides` sides plus `bonus` (may be negative)."""

    count: int
    sides: int
    bonus: int

    def roll(self, rand: Callable[[], float] = random.random) -> list[int]:
        """One roll per die, each 1..sides (`rand` gives floats in [0, 1))."""
        return [min(int(rand() * self.sides), self.sides - 1) + 1 for _ in range(self.count)]


def parse_dice(formula: str) -> Dice | None:
    """The dice of `formula` (surrounding spaces ignored), or None when it is not droll notation
    or over the limits."""
    formula = formula.strip()
    if formula.isascii() and formula.isdigit():
        formula = "1d" + formula
    match = DICE.fullmatch(formula)
    if not match:
        return None
    count, faces, bonus = match.groups()
    if len(count or "") > 3 or len(faces) > 4:
        return None
    dice = Dice(int(count or 1), int(faces), int(bonus or 0))
    if dice.count > MAX_DICE or dice.sides > MAX_SIDES:
        return None
    return dice
