"""`{{pick}}` seeded exactly as SillyTavern seeds it (core-macros.js `pick`, utils.js `getStringHash`,
the seedrandom package's ARC4 generator).

Every expected value below was computed by running that JavaScript (utils.js's getStringHash as
written there, and seedrandom 3.0.5 from npm) under Node, not by our code.
"""

from __future__ import annotations

import pytest

from tavern_tui.assembly.macros import MacroContext, substitute
from tavern_tui.assembly.macros.seeded import seedrandom, string_hash

CHAT = "Seraphina - 2024-11-12@10h20m30s"


@pytest.mark.parametrize(("text", "expected"), [
    ("", 3338908027751811), ("a", 7929297801672961), ("hello world", 3259054761512980),
    (CHAT, 121706744676716), ("héllo 🐉", 6528569269730877),  # an astral character is two UTF-16 units
])
def test_string_hash_is_st_get_string_hash(text: str, expected: int) -> None:
    assert string_hash(text) == expected


@pytest.mark.parametrize(("seed", "expected"), [
    ("hello", (0.5463663768140734, 0.4397379377059223, 0.554769432473455)),
    ("12345", (0.20703519639616447, 0.6602710883040208, 0.500949276170095)),
    ("", (0.23144008215179881, 0.27404636548159655, 0.7901279251811976)),
])
def test_seedrandom_matches_the_js_package(seed: str, expected: tuple[float, ...]) -> None:
    rng = seedrandom(seed)
    assert tuple(rng() for _ in expected) == expected


def pick(text: str, **fields: object) -> str:
    return substitute(text, MacroContext(chat_id=CHAT, **fields))  # type: ignore[arg-type]


def test_pick_uses_chat_content_and_offset() -> None:
    text = "Hair: {{pick::blonde::brown::red::black::blue}} Eyes: {{pick::green::grey::amber}}"
    assert pick(text) == "Hair: blonde Eyes: amber"


def test_pick_offsets_differ_per_position() -> None:
    one = "{{pick::1::2::3::4::5::6::7::8::9}}"
    assert pick(" ".join([one] * 3)) == "3 4 1"


def test_pick_offset_counts_utf16_units() -> None:
    assert pick("🐉 {{pick::1::2::3::4::5::6::7::8::9}}") == "🐉 2"


def test_pick_takes_st_cached_chat_id_hash_and_reroll_seed() -> None:
    text = "{{pick::a::b::c::d::e::f}}"
    assert substitute(text, MacroContext(chat_id="ignored", chat_id_hash=12345)) == "f"
    assert pick(text, pick_reroll_seed="abc") == "f"


def test_pick_legacy_comma_list() -> None:
    assert pick("{{pick:x,y,z,w}}") == "z"
