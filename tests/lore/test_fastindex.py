"""FastIndex gives ReferenceIndex's answer (the contract), on edge cases, seeded random keys and
texts, and whole activations.

Expected values come from the rules in matching.py's docstring (SillyTavern 1.18 `matchKeys`,
format-digest §b.5.2) and performance-anchors §1.1/§5; every case is also checked against the
reference.
"""

from __future__ import annotations

import random
import time
from functools import partial

import pytest
import regex

from tavern_tui.lore.activation import activate
from tavern_tui.lore.context import ActivationContext, ScanMessage, SourcedBook
from tavern_tui.lore.fastindex import FastIndex
from tavern_tui.lore.matching import (
    CompiledKey,
    IndexCache,
    KeyHits,
    ReferenceIndex,
    parse_regex_key,
)
from tavern_tui.lore.model import SelectiveLogic, WorldBook, WorldInfoEntry
from tavern_tui.lore.regex_plan import (
    ATOM,
    FOLDED_LITERAL_STOP,
    FOLDS_ONTO_ASCII,
    LINE,
    PIECE,
    TEXT,
    analyse_regex,
)
from tavern_tui.lore.result import ActivationResult
from tavern_tui.lore.settings import WorldInfoSettings


def both(keys: list[CompiledKey], text: str, asked: set[int] | None = None, **options: float) -> KeyHits:
    """Both indexes' answer, asserted equal."""
    fast = FastIndex(keys, **options).hits(text, asked)
    reference = ReferenceIndex(keys, **options).hits(text, asked)
    assert fast == reference, (keys, text, asked)
    return fast


def hit(key: str, text: str, *, case: bool = False, whole: bool = True) -> bool:
    """Whether one key matches, by both indexes (asserted equal)."""
    return 0 in both([CompiledKey(0, key, case, whole)], text).matched


# -- plain keys --------------------------------------------------------------------------------

def test_nested_keys_all_match() -> None:
    # Overlapping Aho-Corasick: "Jon" inside "Jon Snow" is not lost (performance-anchors §5, pitfall 4).
    keys = [CompiledKey(0, "Jon", False, True), CompiledKey(1, "Jon Snow", False, True),
            CompiledKey(2, "Snow", False, True), CompiledKey(3, "on Sno", False, True)]
    assert both(keys, "\x01Alice: Jon Snow rides north").matched == {0, 1, 2, 3}
    # A key with a space is a plain substring test; "Snow" alone needs a whole word.
    assert both(keys, "\x01Alice: Jon Snowden").matched == {0, 1, 3}


def test_overlapping_keys_with_whole_words_off_and_on() -> None:
    keys = [CompiledKey(i, k, False, False) for i, k in enumerate(["drag", "ragon", "dragon", "agon"])]
    assert both(keys, "a dragon").matched == {0, 1, 2, 3}
    whole = [CompiledKey(i, k, False, True) for i, k in enumerate(["drag", "ragon", "dragon", "agon"])]
    assert both(whole, "a dragon").matched == {2}


@pytest.mark.parametrize(("key", "text", "expected"), [
    ("dragon", "dragon", True),  # the whole text
    ("dragon", "dragon here", True),  # ^ at the very start
    ("dragon", "here dragon", True),  # $ at the very end
    ("dragon", "\x01dragon", True),
    ("dragon", "\x01a\n\x01dragon\n\x01b", True),
    ("dragon", "dragons", False),
    ("dragon", "\x01Alice: dragon_fly", False),  # _ is a word character
    ("dragon", "1dragon", False),
    ("ai", "maine is a state, ain't it?", False),  # format-digest §b.5.2
    ("ai", "i asked the ai.", True),
    ("#hello", "say #hello to everyone", True),
    ("ain't", "\x01Bob: ain't so", True),
    ("魔法", "我会魔法了", True),  # every non-ASCII character is a JS \W boundary
    ("straße", "die straße ist lang", True),
    ("stra", "die straße ist lang", True),  # ß is \W for JS
    ("über", "das überall", False),
    ("über", "das über!", True),
    ("straße", "DIE STRASSE", False),  # str.lower does not fold ß to ss, nor JS toLowerCase
    ("İstanbul", "in İstanbul.", True),  # both sides lowered alike (İ -> i + U+0307)
    ("istanbul", "in İSTANBUL", False),  # "i̇stanbul" does not contain "istanbul"
    ("ΟΔΟΣ", "η οδος", True),  # final sigma, as JS toLowerCase
    ("οδος", "\x01ΟΔΟΣ\x01", True),  # final sigma before \x01: the split pieces lower alike
    ("οδοσ", "\x01ΟΔΟΣ\x01", False),
    ("red dragon", "a red dragonfly", True),  # whitespace in the key: plain substring
    ("dragon fire", "dragon\n\x01fire", False),  # does not span two messages
])
def test_whole_word_rules(key: str, text: str, expected: bool) -> None:
    assert hit(key, text) is expected


def test_case_sensitive_keys() -> None:
    assert hit("Dragon", "a Dragon", case=True)
    assert not hit("Dragon", "a dragon", case=True)
    assert hit("Dragon", "a dragon", case=False)
    assert hit("DRAGON", "a Dragon")
    keys = [CompiledKey(0, "Dragon", True, True), CompiledKey(1, "Dragon", False, True),
            CompiledKey(2, "dragon", True, True)]
    assert both(keys, "\x01The Dragon").matched == {0, 1}


@pytest.mark.parametrize(("key", "text"), [
    (" ", "a b"), (" ", "ab"), ("\t", "a\tb"), ("", "abc"), ("", ""), ("", "!"), ("", "a!"), ("", "!!"),
    ("\x01", "\x01a"), ("a\x01b", "a\x01b"), ("a\nb", "x a\nb"), ("dragon\n", "dragon\n\x01x"),
    ("\x01dragon", "\n\x01dragon"), ("魔法\u3000使い", "魔法\u3000使い"), ("\ufeffa", "\ufeffa"), ("/(/", "a /(/ b"),
    ("AC/DC", "I like AC/DC."), ("//", "a // b"), ("/x/y/", "/x/y/"),
])
@pytest.mark.parametrize("whole", [True, False])
def test_odd_keys_behave_as_in_the_reference(key: str, text: str, whole: bool) -> None:
    both([CompiledKey(0, key, False, whole)], text)
    both([CompiledKey(0, key, True, whole)], text)


@pytest.mark.parametrize("whole", [True, False])
def test_keys_longer_than_any_real_one_behave_as_in_the_reference(whole: bool) -> None:
    # A hostile card put "_.set(" x 5,000 in every key: tested apart from the automaton, same answers.
    from tavern_tui.lore.fastindex import LONG_NEEDLE

    long_key = "_.set(" * 5000
    assert len(long_key) > LONG_NEEDLE
    assert hit(long_key, "x " + long_key + " y", whole=whole)
    assert hit(long_key.upper(), "x " + long_key + " y", whole=whole)  # folded, as a short key is
    assert not hit(long_key, "x " + long_key[:-1], whole=whole)
    assert hit(long_key, "a" + long_key, whole=whole) is not whole
    keys = [CompiledKey(0, long_key, False, whole), CompiledKey(1, "hello", False, whole)]
    assert both(keys, "\x01hello " + long_key).matched == {0, 1}


def test_only_asked_keys_are_reported_and_unknown_ids_are_ignored() -> None:
    keys = [CompiledKey(0, "dragon", False, True), CompiledKey(1, "/fi(re)/", True, False),
            CompiledKey(2, "", False, False), CompiledKey(3, "absent", False, True)]
    text = "\x01Alice: Dragon fire"
    assert both(keys, text).matched == {0, 1, 2}
    assert both(keys, text, {1}).matched == {1}
    assert both(keys, text, {0, 3, 99}).matched == {0}
    assert both(keys, text, set()).matched == frozenset()


def test_duplicate_key_ids_are_refused() -> None:
    with pytest.raises(ValueError):
        FastIndex([CompiledKey(0, "a", False, True), CompiledKey(0, "b", False, True)])


# -- regex keys --------------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "text", "expected"), [
    ("/drag(on)?/i", "a DRAGON", True),
    ("/Dragon/", "a dragon", False),  # no i: case matters, whatever the key's case setting
    ("/drag/", "dragons", True),  # whole words do not apply to regex keys
    ("/\\bking(dom)?s?\\b/i", "\x01Alice: the Kingdoms fell", True),
    ("/\\bking(dom)?s?\\b/i", "\x01Alice: kingfisher", False),
    ("/(?:red|blue) dragon/", "a blue dragon", True),
    ("/(?:red|blue) dragon/", "a green dragon", False),
    ("/^\\x01Alice:/", "\x01Alice: hi", True),
    ("/^\\x01Alice:/", "\x01Bob: x\n\x01Alice: hi", False),  # ^ without m: the very start only
    ("/^\\x01Alice:/m", "\x01Bob: x\n\x01Alice: hi", True),
    ("/^Alice:/m", "\x01Bob: x\n\x01Alice: hi", False),  # the line starts with \x01
    ("/a$/", "ba\n", False),  # JS $ is the very end
    ("/a$/m", "\x01ba\n\x01c", True),
    ("/dragon\\s+\\x01fire/", "dragon\n\x01fire", True),  # a regex can span messages
    ("/dragon[\\s\\S]*fire/", "\x01dragon x\n\x01y fire", True),
    ("/dragon.*fire/", "\x01dragon x\n\x01y fire", False),  # . does not cross \n
    ("/dragon.fire/", "\x01dragon\x01fire", True),  # . crosses \x01
    ("/x\\x01y/", "x\x01y", True),
    ("/\\x01dragon/", "\n\x01dragon", True),
    ("/[^a]dragon/", "dragon", False),
    ("/[^a]dragon/", "\x01dragon", True),  # [^a] takes the \x01
    ("/[^a]dragon/", "\n\x01dragon", True),
    ("/a/y", "ab", True),  # sticky: at position 0
    ("/a/y", "ba", False),
    ("/魔法/", "我会魔法了", True),
    ("/straße/i", "STRASSE", False),  # no full case folding
    ("/straße/i", "stra\U0001df95e", True),  # regex's Unicode tables fold U+1DF95 onto ß
    ("/über/i", "ÜBER", True),
    ("/\\bKÖNIG\\b/i", "der könig", True),
    ("/\\bkönigin\\b/i", "die KÖNIGIN.", True),
    ("/İSTANBUL/i", "in istanbul", True),  # regex folds İ onto i
    ("/istanbul/i", "in İstanbul", True),  # regex folds i~İ although str.lower does not (jsregex limits)
    ("/ISTANBUL/i", "ıstanbul", True),  # and I~ı
    ("/\\bistanbul\\b/i", "in İstanbul", False),  # as in JS: İ is no word character, so no \b before it
    ("/\\bISTANBUL\\b/i", "ıstanbul", False),
    ("/SOS/i", "ſoſ", True),  # and s~ſ
    ("/(?<=sir )knight/i", "Sir Knight", True),
    ("/(?<!sir )knight/i", "Sir Knight", False),
    ("/(a)\\1b/", "aab", True),
    ("/\\b[A-Z]{5,}\\b/", "the DRAGONS came", True),
    ("/\\b[A-Z]{5,}\\b/", "theDRAGONS", False),  # the relaxed prefilter matches, the key does not
    ("/(?!\\bx)x/", "ax", True),  # \b inside a negative lookahead: no relaxed prefilter
    ("/(?!\\bx)x/", " x", False),
])
def test_regex_keys(key: str, text: str, expected: bool) -> None:
    assert parse_regex_key(key) is not None
    assert hit(key, text) is expected


@pytest.mark.parametrize(("key", "scope", "literals"), [
    ("/\\bking\\b/i", ATOM, {"king"}),
    ("/(?:red|blue) dragon/", ATOM, {" dragon"}),
    ("/\\b(?:Valdor|Karis)\\b/i", ATOM, {"valdor", "karis"}),  # one of the alternatives
    ("/a.b/", LINE, None),  # "." may consume \x01, not \n
    ("/^a/m", LINE, None),
    ("/dragon\\s+fire/", PIECE, {"dragon"}),  # \s may consume \n, not \x01
    ("/a$/", TEXT, None),
    ("/[\\s\\S]dragon/", TEXT, {"dragon"}),
    ("/dragon/y", TEXT, {"dragon"}),
    ("/straße/i", ATOM, {"stra"}),  # ß is not a safe folded literal character
    ("/König/i", ATOM, {"könig"}),
    ("/İstanbul/i", ATOM, {"istanbul"}),  # İ is looked up as i
    ("/dr?agon/", ATOM, {"agon"}),  # never a literal under "?"
    ("/(?:dragon)?x/", ATOM, None),
    ("/(?:dragon|x)/", ATOM, None),  # one alternative without a literal: none at all
    ("/ab/", ATOM, None),  # too short to be worth a prefilter
    ("/魔法(?:使い)?/", ATOM, {"魔法"}),  # two CJK characters are selective enough
])
def test_regex_analysis(key: str, scope: str, literals: set[str] | None) -> None:
    plan = analyse_regex(parse_regex_key(key))  # type: ignore[arg-type]
    assert plan.scope == scope
    assert plan.required == (None if literals is None else frozenset(literals))


def test_the_relaxed_prefilter_drops_boundaries_only_where_that_widens_the_pattern() -> None:
    assert analyse_regex(parse_regex_key("/\\b[A-Z]{7,}\\b/")).relaxed == "(?:)[A-Z]{7,}(?:)"  # type: ignore[arg-type]
    assert analyse_regex(parse_regex_key("/(?!\\bx)x/")).relaxed is None  # type: ignore[arg-type]
    assert analyse_regex(parse_regex_key("/king/")).relaxed is None  # type: ignore[arg-type]


def test_folded_literals_are_safe_for_every_character_they_may_hold() -> None:
    """For every character a folded (`i`) literal may hold (ASCII, Latin-1/Extended-A letters
    but ß), every character `regex` IGNORECASE matches against it lower-cases to the same
    character once `FOLDS_ONTO_ASCII` has mapped İ ı ſ: what makes looking the lowered literal
    up in the lowered text a safe prefilter. Brute force over all code points."""
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    fix = str.maketrans(FOLDS_ONTO_ASCII)
    allowed = [chr(c) for c in [*range(0x80), *range(0xC0, 0x180)] if not FOLDED_LITERAL_STOP.match(chr(c))]
    assert "ß" not in allowed and "ö" in allowed and "İ" in allowed
    wrong = set()
    for char in allowed:
        for found in regex.findall(regex.escape(char), everything, flags=regex.IGNORECASE):
            if found.translate(fix).lower() != char.translate(fix).lower():
                wrong.add((char, found))
    assert wrong == set()
    # ... and ß is left out for a reason (regex's Unicode tables fold U+1DF95 onto it):
    assert any(f.lower() != "ß" for f in regex.findall("ß", everything, flags=regex.IGNORECASE))
    # \x01 and \n have no case variants, so IGNORECASE never lets a class reach them.
    for control in "\x01\n":
        assert regex.match("(?i)[\x00\x02-\t\x0b-\U0010ffff]", control) is None


def test_a_pathological_regex_times_out_in_both() -> None:
    slow = "a" * 40 + "b"
    for key in ("/(a|aa)+$/", "/(a|aa)+[bc]x/"):  # whole-text scope and per-unit scope
        keys = [CompiledKey(0, key, True, False), CompiledKey(1, "a", False, False)]
        index = FastIndex(keys, regex_timeout=0.01)
        started = time.monotonic()
        hits = both(keys, f"\x01{slow}\n\x01{slow}", regex_timeout=0.01)
        assert hits.timed_out == {0} and hits.matched == {1}
        assert index.hits(f"\x01{slow}").timed_out == {0}
        assert index.hits(f"\x01{slow}").timed_out == {0}  # a timeout is never cached
        assert time.monotonic() - started < 2


def test_a_key_already_found_in_a_remembered_message_is_not_searched_again() -> None:
    """The one documented difference (fastindex docstring): the reference searches the whole
    text and may time out before it reaches the message that matches; FastIndex remembers that
    message's result and decides. Never the other way round."""
    keys = [CompiledKey(0, "/(a|aa)+[bc]x/", True, False)]
    index = FastIndex(keys, regex_timeout=0.01)
    assert index.hits("\x01abx").matched == {0}
    slow_first = "\x01" + "a" * 40 + "b\n\x01abx"
    assert index.hits(slow_first) == KeyHits(frozenset({0}))
    assert ReferenceIndex(keys, regex_timeout=0.01).hits(slow_first).timed_out == {0}


def test_timeout_is_configurable_through_the_factory() -> None:
    assert partial(FastIndex, regex_timeout=0.5)([]).regex_timeout == 0.5


def test_caches_do_not_change_answers() -> None:
    keys = [CompiledKey(0, "dragon", False, True), CompiledKey(1, "/\\bfire\\b/i", True, False),
            CompiledKey(2, "/dragon.*fire/", True, False), CompiledKey(3, "/^\\x01A/", True, False)]
    tiny = FastIndex(keys, cache_chars=0)  # evicts everything after every call
    index = FastIndex(keys)
    texts = ["\x01A: dragon fire", "\x01B: none", "\x01B: none\n\x01A: dragon fire", "\x01A: dragon fire"]
    for text in texts * 2:
        expected = ReferenceIndex(keys).hits(text)
        assert index.hits(text) == expected
        assert tiny.hits(text) == expected
    index.clear_cache()
    assert index.hits(texts[0]) == ReferenceIndex(keys).hits(texts[0])


# -- seeded random keys and texts --------------------------------------------------------------

EN = ["dragon", "Dragon", "Jon", "Jon Snow", "snow", "king", "kingdom", "the", "ain't", "ai", "#hello", "hello",
      "fire", "red dragon", "AI", "sword", "_x", "x1", "Kingdoms"]
DE = ["Straße", "STRASSE", "straße", "über", "Über", "überall", "Öl", "ß", "Fuß", "İstanbul", "istanbul", "ıi",
      "Feuer", "Drache", "ΟΔΟΣ", "οδος", "Σ", "ſ", "K"]
CJK = ["魔法", "我会魔法了", "東京", "ドラゴン", "火", "了", "我", "龍", "魔法使い"]
GLUE = [" ", " ", " ", ", ", ". ", "!", "?", "'", "-", "_", "\n", "\n\x01", "\x01", "\t", "\u3000", "\ufeff", "—",
        "#", "/", ""]
ATOMS = ["dragon", "king", "Jon", "snow", "魔法", "straße", "über", "fire", "the", r"\b", r"\s+", r"\w+", r"\d", ".",
         ".*", r"[\s\S]", r"\x01", "^", "$", "(?:red|blue)", "(?:dragon|drake)", "s?", "(dom)?", "[a-z]+", "[^a]",
         r"\W", "(?=on)", "(?<=a)", "(?!x)", "İ", "ı", "ſ", "\\n", "(a|b)+", "x*", r"\B", "[^\\n]"]
FLAGS = ["", "", "i", "i", "g", "m", "s", "y", "u", "gi", "im", "is"]
SEPARATORS = [" ", r"\s+", r"\W", ".?", "", r"\s*", ".*", r"[\s\S]*?", r"\x01", "\\n"]


def _text(rng: random.Random, vocab: list[str]) -> str:
    return "".join(rng.choice(vocab) + rng.choice(GLUE) for _ in range(rng.randint(0, 20)))


def _regex(rng: random.Random, vocab: list[str]) -> str:
    if rng.random() < 0.3:  # anything goes
        body = "".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 4)))
    else:  # words from the text, joined and decorated like real lorebook regexes
        words = [rng.choice(vocab) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            words[0] = "(?:" + "|".join(rng.sample(vocab, 2)) + ")"
        body = rng.choice(SEPARATORS).join(words)
        if rng.random() < 0.4:
            body = rf"\b{body}\b"
        if rng.random() < 0.2:
            body = rng.choice(["^", r"\x01", r"(?<=\s)", "^.*"]) + body
        if rng.random() < 0.2:
            body += rng.choice(["$", "s?", "(?:s|es)?", "(?!x)", ".*$"])
    escaped = body.replace("/", "\\/")  # an unescaped inner "/" would make it plain text
    return f"/{escaped}/{rng.choice(FLAGS)}"


def _keys(rng: random.Random, vocab: list[str], text: str) -> list[CompiledKey]:
    keys = []
    for key_id in range(rng.randint(1, 30)):
        roll = rng.random()
        if roll < 0.3:
            key = rng.choice(vocab)
        elif roll < 0.55 and text:  # a slice of the text: matches at odd boundaries
            start = rng.randrange(len(text))
            key = text[start:start + rng.randint(1, 12)]
        elif roll < 0.8:
            key = _regex(rng, vocab)
        elif roll < 0.9:
            key = rng.choice(vocab) + rng.choice([" ", "-", "'", ""]) + rng.choice(vocab)
        else:
            key = rng.choice(["", " ", "\x01", "a\x01b", "\n", "\x01dragon", "dragon\n", "/(/", "AC/DC", "//"])
        keys.append(CompiledKey(key_id, key, rng.random() < 0.3, rng.random() < 0.7))
    return keys


@pytest.mark.parametrize("seed", range(6))
def test_random_keys_and_texts_agree_with_the_reference(seed: int) -> None:
    """50 cases per seed (300 in all): one FastIndex per case asked about a growing buffer, as an
    activation does, so the caches are exercised; every answer must equal the reference's."""
    rng = random.Random(1000 + seed)
    for _ in range(50):
        vocab = rng.choice([EN, DE, CJK, EN + DE + CJK])
        text = "\x01" + _text(rng, vocab)
        keys = _keys(rng, vocab, text)
        fast, reference = FastIndex(keys), ReferenceIndex(keys)
        for step in range(4):
            asked = None if step % 2 == 0 else set(rng.sample(range(len(keys)), rng.randint(0, len(keys))))
            assert fast.hits(text, asked) == reference.hits(text, asked), (keys, text, asked)
            if step == 3:  # one key at a time, as the activation locates a key
                for key in keys:
                    assert fast.hits(text, (key.key_id,)) == reference.hits(text, (key.key_id,)), (key, text)
            text = rng.choice([text + "\n\x01" + _text(rng, vocab), "\x01" + _text(rng, vocab) + "\n" + text])


# -- whole activations ---------------------------------------------------------------------------

def _entry(rng: random.Random, uid: int, vocab: list[str]) -> WorldInfoEntry:
    def key() -> str:
        return _regex(rng, vocab) if rng.random() < 0.2 else rng.choice(vocab + ["", "  ", "{{char}}"])

    return WorldInfoEntry(
        uid=uid, key=[key() for _ in range(rng.randint(0, 3))], keysecondary=[key() for _ in range(rng.randint(0, 2))],
        content=_text(rng, vocab)[:80].replace("\x01", " "), constant=rng.random() < 0.1, disable=rng.random() < 0.05,
        selective_logic=SelectiveLogic(rng.randint(0, 3)), order=rng.randint(0, 200),
        probability=rng.choice([100, 100, 50]), group=rng.choice(["", "", "g", "g,h"]),
        prevent_recursion=rng.random() < 0.2, exclude_recursion=rng.random() < 0.2,
        delay_until_recursion=rng.choice([0, 0, 0, 1]), scan_depth=rng.choice([None, None, 0, 1, 5]),
        case_sensitive=rng.choice([None, True, False]), match_whole_words=rng.choice([None, True, False]),
        match_scenario=rng.random() < 0.2, use_group_scoring=rng.choice([None, True]),
    )


def _decisions(result: ActivationResult) -> list[tuple]:
    return [(d.book, d.uid, d.fired, d.reason, d.matched_key, d.matched_in, d.from_entry, d.timed_out_keys)
            for d in result.decisions]


def test_activations_decide_the_same_with_either_index() -> None:
    """Random books and chats: every entry gets the same decision (fired, reason, where its key
    was found), step after step, with FastIndex reused across steps through an IndexCache."""
    rng = random.Random(20240518)
    for _ in range(40):
        vocab = rng.choice([EN, DE, CJK, EN + DE + CJK])
        books = [SourcedBook(WorldBook(f"b{n}", [_entry(rng, uid, vocab) for uid in range(rng.randint(1, 12))]),
                             rng.choice(["chat", "global", "character"])) for n in range(rng.randint(1, 2))]
        settings = WorldInfoSettings(depth=rng.randint(1, 4), budget=rng.choice([5, 25, 100]), max_context=2000,
                                     recursive=rng.random() < 0.8, min_activations=rng.choice([0, 0, 2]),
                                     max_recursion_steps=rng.choice([0, 3]), use_group_scoring=rng.random() < 0.3,
                                     case_sensitive=rng.random() < 0.2, match_whole_words=rng.random() < 0.7)
        history = [ScanMessage(rng.choice(["User", "Alice"]), _text(rng, vocab), i) for i in range(rng.randint(0, 6))]
        cached = IndexCache(FastIndex)
        for _step in range(3):
            ctx = ActivationContext(messages=list(history), input=_text(rng, vocab) or None, user_name="User",
                                    char_name="Alice", scenario=_text(rng, vocab))
            seed = rng.random()
            results = [activate(books, ctx, settings, rng=partial(_roll, random.Random(seed)), index_factory=factory)
                       for factory in (ReferenceIndex, cached, FastIndex)]
            assert _decisions(results[1]) == _decisions(results[0])
            assert _decisions(results[2]) == _decisions(results[0])
            assert [a.uid for a in results[1].activated] == [a.uid for a in results[0].activated]
            history.append(ScanMessage("User", ctx.input or "", len(history)))


def _roll(source: random.Random) -> float:
    return source.random() * 100


def test_a_timed_out_key_is_explained_with_either_index() -> None:
    evil, slow = "/(a|aa)+$/", "a" * 40 + "b"
    book = WorldBook("book", [WorldInfoEntry(uid=1, key=[evil]),
                              WorldInfoEntry(uid=2, key=[evil, "aaa"], match_whole_words=False)])
    ctx = ActivationContext(messages=[ScanMessage("Alice", slow, 1)], char_name="Alice", user_name="User")
    for factory in (partial(ReferenceIndex, regex_timeout=0.01), partial(FastIndex, regex_timeout=0.01)):
        result = activate([book], ctx, WorldInfoSettings(), index_factory=factory)
        assert result.decision("book", 1).reason.value == "regex_timeout"
        assert result.decision("book", 1).timed_out_keys == (evil,)
        assert result.decision("book", 2).fired
