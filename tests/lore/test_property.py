"""Random books and chats (EN, DE, CJK) against invariants, with a fixed seed."""

from __future__ import annotations

import json
import random

from tavern_tui.lore.activation import activate
from tavern_tui.lore.context import ActivationContext, ScanMessage, SourcedBook
from tavern_tui.lore.matching import CompiledKey, ReferenceIndex
from tavern_tui.lore.model import Position, SelectiveLogic, WorldBook, WorldInfoEntry
from tavern_tui.lore.settings import WorldInfoSettings

WORDS = ["dragon", "Drache", "Straße", "über", "Öl", "魔法", "東京", "ドラゴン", "castle", "Ain't", "AI", "ß",
         "fire", "Feuer", "火", "red dragon", "/drag(on)?/i", "/\\x01User:/", "", "  "]
FILLER = ["the", "a", "und", "der", "我", "了", "!", ",", "?", "—"]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS + FILLER * 2) for _ in range(rng.randint(0, 12)))


def _entry(rng: random.Random, uid: int) -> WorldInfoEntry:
    return WorldInfoEntry(
        uid=uid, key=rng.sample(WORDS, rng.randint(0, 3)), keysecondary=rng.sample(WORDS, rng.randint(0, 2)),
        content=_text(rng), constant=rng.random() < 0.1, disable=rng.random() < 0.1,
        selective_logic=SelectiveLogic(rng.randint(0, 3)), order=rng.randint(0, 200),
        position=Position(rng.randint(0, 7)), probability=rng.choice([100, 100, 50, 0]),
        group=rng.choice(["", "", "g", "h", "g,h"]), group_override=rng.random() < 0.2,
        prevent_recursion=rng.random() < 0.2, exclude_recursion=rng.random() < 0.2,
        delay_until_recursion=rng.choice([0, 0, 0, 1, 2]), scan_depth=rng.choice([None, None, 0, 1, 5]),
        case_sensitive=rng.choice([None, True, False]), match_whole_words=rng.choice([None, True, False]),
        ignore_budget=rng.random() < 0.1, sticky=rng.choice([None, None, 2]), cooldown=rng.choice([None, 3]),
        match_scenario=rng.random() < 0.2, outlet_name=rng.choice(["", "o"]),
        use_group_scoring=rng.choice([None, True]),
    )


def _rolls(seed: float):
    source = random.Random(seed)
    return lambda: source.random() * 100


def test_random_activations_hold_their_invariants() -> None:
    rng = random.Random(20240518)
    for _ in range(150):
        books = [SourcedBook(WorldBook(f"b{n}", [_entry(rng, uid) for uid in range(rng.randint(0, 8))],
                                       scan_depth=rng.choice([None, 3])),
                             rng.choice(["chat", "persona", "global", "character"]))
                 for n in range(rng.randint(1, 3))]
        ctx = ActivationContext(
            messages=[ScanMessage(rng.choice(["User", "Alice"]), _text(rng), i) for i in range(rng.randint(0, 6))],
            input=rng.choice([None, _text(rng)]), user_name="User", char_name="Alice", scenario=_text(rng))
        settings = WorldInfoSettings(depth=rng.randint(0, 4), budget=rng.choice([1, 5, 25]), max_context=2000,
                                     recursive=rng.random() < 0.8, min_activations=rng.choice([0, 0, 2]),
                                     use_group_scoring=rng.random() < 0.3, max_recursion_steps=rng.choice([0, 0, 3]))
        seed = rng.random()
        result = activate(books, ctx, settings, rng=_rolls(seed))
        again = activate(books, ctx, settings, rng=_rolls(seed))
        entries = [(s.book.name, e) for s in books for e in s.book.entries]
        # Every entry has exactly one decision.
        assert sorted((d.book, d.uid) for d in result.decisions) == sorted((b, e.uid) for b, e in entries)
        # fired <=> activated, and the flag agrees with the reason.
        assert {(d.book, d.uid) for d in result.decisions if d.fired} == {(a.book, a.uid) for a in result.activated}
        assert all(d.fired == d.reason.fired for d in result.decisions)
        by_key = {(b, e.uid): e for b, e in entries}
        for a in result.activated:
            e = by_key[(a.book, a.uid)]
            assert not e.disable and e.probability != 0
        # Deterministic for a given random source, and serialisable.
        assert result.to_json() == again.to_json()
        json.dumps(result.to_json())


def test_reference_index_agrees_with_a_direct_reading_of_the_rules() -> None:
    """Whole-word hits by scanning every occurrence and checking JS `\\W` on both sides."""
    rng = random.Random(7)
    plain = [w for w in WORDS if w.strip() and not w.startswith("/")]

    def expected(key: str, text: str, case: bool, whole: bool) -> bool:
        needle, hay = (key, text) if case else (key.lower(), text.lower())
        if not whole or any(c.isspace() for c in needle):
            return needle in hay
        start = hay.find(needle)
        while start != -1:
            before = hay[start - 1] if start else " "
            after = hay[start + len(needle)] if start + len(needle) < len(hay) else " "
            if not (before.isascii() and (before.isalnum() or before == "_")) and \
                    not (after.isascii() and (after.isalnum() or after == "_")):
                return True
            start = hay.find(needle, start + 1)
        return False

    for _ in range(300):
        text = "\x01" + _text(rng)
        keys = [CompiledKey(i, w, rng.random() < 0.3, rng.random() < 0.7) for i, w in enumerate(plain)]
        hits = ReferenceIndex(keys).hits(text).matched
        for key in keys:
            assert (key.key_id in hits) == expected(key.text, text, key.case_sensitive, key.whole_words), (key, text)
