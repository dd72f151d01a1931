"""Warm steps: FastIndex and the activation reuse what earlier steps and loops learnt (message
units, the last loop's buffer, pieces, per-entry facts) and must still decide exactly as the
reference matcher does.

Rule: SillyTavern 1.18 `WorldInfoBuffer` joins the newest `depth` messages as
`"\\x01" + messages.join("\\n\\x01")` and `matchKeys` tests each key on that whole text
(format-digest §b.5.1, §b.5.2). A key can therefore meet text from two messages: a multi-word
key is a substring test (so "blue sky" does not match "blue\\n\\x01sky"), a whole-word key sees
the "\\n"/"\\x01" join as a boundary, and a regex may anchor on or consume the joins. Every case
here is checked against `ReferenceIndex`, which does exactly that, step after step.
"""

from __future__ import annotations

import random
from functools import partial

import pytest

from tavern_tui.lore import fastindex
from tavern_tui.lore.activation import activate, prime
from tavern_tui.lore.buffer import MATCHER
from tavern_tui.lore.context import ActivationContext, ScanMessage
from tavern_tui.lore.fastindex import FastIndex
from tavern_tui.lore.matching import (
    CompiledKey,
    IndexCache,
    ReferenceIndex,
    parse_regex_key,
)
from tavern_tui.lore.model import SelectiveLogic, WorldBook, WorldInfoEntry
from tavern_tui.lore.prepare import build_plan
from tavern_tui.lore.regex_plan import ATOM, LINE, PIECE, TEXT, analyse_regex
from tavern_tui.lore.result import ActivationResult
from tavern_tui.lore.settings import WorldInfoSettings

# Keys that meet the joins between messages, one per kind of reach (scope in brackets).
STRADDLING = [
    "blue sky",  # multi-word: a substring test, never across "\n\x01"
    "sky", "blue",  # whole words: the join is a boundary on both sides
    "blue\n\x01sky",  # a plain key holding the join: tested on the whole text
    "\x01sky",
    "/blue\\s+sky/",  # \s takes "\n", not "\x01" [piece]
    "/blue[\\s\\S]{1,3}sky/i",  # takes the whole join [text]
    "/blue\\n\\x01sky/",  # [text]
    "/^\\x01User:/",  # the newest message only [text]
    "/\\x01User: sky/",  # a message start [line]
    "/(?<=\\x01)sky/",  # [line]
    "/[^\\x01]+sky/",  # [piece]
    "/sky[^\\n]*blue/",  # [line]
    "/\\bsky\\b/i", "/\\bblue\\b.*\\bsky\\b/",  # [atom], [line]
    "/blue$/m", "/^sky/m",  # line anchors under m: lookarounds at "\\n" [line]
    "/\\x01$/", "/(?:^|\\x01)sky\\b/",  # [text]
]
WORDS = ["blue", "sky", "Blue", "SKY", "king", "dragon", "skyline", "bluesky", "the", "a", "User:", "魔法", "Straße"]


def _message(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(0, 6))]
    if rng.random() < 0.3:
        words.append("blue")  # ends in "blue": the next message may start with "sky"
    if rng.random() < 0.3:
        words.insert(0, "sky")
    return rng.choice([" ", "  ", ", ", "\n"]).join(words)


def _buffers(window: list[str], recursion: list[str]) -> list[str]:
    """The scan loops' buffers for one step, as buffer.py builds them: the window, then each
    loop's recursion text appended ("\\n\\x01" + contents joined by "\\n")."""
    texts = [MATCHER + "\n\x01".join(window)]
    for text in recursion:
        texts.append(texts[-1] + "\n\x01" + text)
    return texts


@pytest.fixture(params=["composed", "long only"])
def composing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compose every text from the last one it extends (as scan buffers of 2,000+ characters
    are), or only long ones (the default, so short test texts take the plain path)."""
    if request.param == "composed":
        monkeypatch.setattr(fastindex, "_LONG_TEXT", 0)


@pytest.mark.parametrize("seed", range(8))
def test_sliding_window_buffers_agree_with_the_reference(seed: int, composing: None) -> None:
    """One FastIndex over a whole chat: each step the window moves by one message (so all but
    one message are remembered), and each step's later loops extend the buffer with recursion
    text (so their buffers are composed from the last loop's). Every answer equals the
    reference's, also for keys that can only match across two messages."""
    rng = random.Random(seed)
    keys = [CompiledKey(i, text, rng.random() < 0.3, rng.random() < 0.8) for i, text in enumerate(STRADDLING)]
    keys += [CompiledKey(len(keys) + i, word, False, True) for i, word in enumerate(WORDS)]
    fast, reference = FastIndex(keys), ReferenceIndex(keys)
    chat = [_message(rng) for _ in range(30)]
    depth = rng.randint(1, 5)
    for step in range(len(chat) - depth):
        window = [f"User: {m}" for m in reversed(chat[step:step + depth])]  # newest first
        recursion = ["\n".join(_message(rng) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(0, 2))]
        for text in _buffers(window, recursion):
            asked = None if rng.random() < 0.7 else set(rng.sample(range(len(keys)), 5))
            assert fast.hits(text, asked) == reference.hits(text, asked), (step, text, asked)


def test_a_two_word_key_does_not_match_across_two_messages() -> None:
    keys = [CompiledKey(0, "blue sky", False, True), CompiledKey(1, "sky", False, True),
            CompiledKey(2, "/blue\\s+sky/", True, False), CompiledKey(3, "/blue[\\s\\S]+sky/", True, False)]
    fast, reference = FastIndex(keys), ReferenceIndex(keys)
    apart = "\x01I see the blue\n\x01sky is grey"
    together = "\x01I see the blue sky\n\x01is grey"
    for text in (apart, together, apart):  # the second `apart` comes from the cache
        assert fast.hits(text) == reference.hits(text)
    assert fast.hits(apart).matched == {1, 3}  # \s does not take the \x01 of the join
    assert fast.hits(together).matched == {0, 1, 2, 3}


def _piecewise(index: ReferenceIndex, texts: list[str], keys: set[int]) -> dict[int, int]:
    """What activation.py did before `first_hits`: ask each piece for the keys not yet placed."""
    remaining, placed = set(keys), {}
    for position, text in enumerate(texts):
        hit = index.hits(text, remaining).matched & remaining
        placed.update(dict.fromkeys(hit, position))
        remaining -= hit
    return placed


def test_composed_texts_keep_piece_and_line_scopes_exact(composing: None) -> None:
    """A recursion text joins contents with "\n" only: a PIECE-scope key can match across two
    contents, and a content's lines are lines of the buffer without a "\x01" before them."""
    keys = [CompiledKey(0, "/blue\\s+sky/", True, False), CompiledKey(1, "/(?<=\\x01)sky two/", True, False),
            CompiledKey(2, "/\\bsky\\b/", True, False), CompiledKey(3, "two", False, True)]
    fast, reference = FastIndex(keys), ReferenceIndex(keys)
    first = "\x01User: nothing here"
    second = first + "\n\x01the blue\nsky one\nsky two"
    third = second + "\n\x01sky two"
    for text in (first, second, third):
        assert fast.hits(text) == reference.hits(text), text
    assert fast.hits(second).matched == {0, 2, 3} and fast.hits(third).matched == {0, 1, 2, 3}
    # Located piece by piece: "\x01sky two" (a content) holds key 1 on its own, the buffer does not.
    pieces = ["\x01User: nothing here", "\x01the blue", "\x01sky one", "\x01sky two"]
    expected = _piecewise(reference, pieces, {0, 1, 2, 3})
    assert expected == {1: 3, 2: 2, 3: 3}
    assert fast.first_hits(pieces, {0, 1, 2, 3}, first, 1) == expected
    assert fast.first_hits(pieces + ["\x01sky two"], {1, 3}, second, 4) == {1: 3, 3: 3}


@pytest.mark.parametrize("seed", range(6))
def test_first_hits_places_keys_as_asking_piece_by_piece(seed: int) -> None:
    """`first_hits` with and without the last loop's buffer as `base` (whose pieces it may skip
    for keys that buffer does not hold) places every key in the same piece as the reference."""
    rng = random.Random(100 + seed)
    keys = [CompiledKey(i, text, rng.random() < 0.3, rng.random() < 0.8) for i, text in enumerate(STRADDLING + WORDS)]
    fast, reference = FastIndex(keys), ReferenceIndex(keys)
    for _ in range(15):
        # The last loop's buffer: messages, then earlier recursion texts (contents joined by "\n").
        messages = [f"User: {_message(rng).replace(chr(10), ' ')}" for _ in range(rng.randint(1, 5))]
        earlier = [[_message(rng).replace("\n", " ") for _ in range(rng.randint(1, 4))]
                   for _ in range(rng.randint(0, 2))]
        base = MATCHER + "\n\x01".join(messages + ["\n".join(contents) for contents in earlier])
        fast.hits(base)  # the last loop scanned it, as activation does before locating keys
        new = [_message(rng).replace("\n", " ") for _ in range(rng.randint(1, 6))]
        old_pieces = [MATCHER + m for m in messages] + [MATCHER + c for contents in earlier for c in contents]
        pieces = old_pieces + [MATCHER + c for c in new]
        wanted = set(rng.sample(range(len(keys)), rng.randint(1, len(keys))))
        expected = _piecewise(reference, pieces, wanted)
        assert fast.first_hits(iter(pieces), wanted) == expected
        assert fast.first_hits(pieces, wanted, base, len(old_pieces)) == expected


@pytest.mark.parametrize("relax_after", [0, 10**9])
def test_a_regex_key_decides_alike_with_or_without_its_relaxed_pattern(monkeypatch: pytest.MonkeyPatch,
                                                                       relax_after: int) -> None:
    """The relaxed pattern (no `\\b`) is compiled only after a key's own searches covered
    `RELAX_AFTER` characters; answers do not depend on it. With it, the key's search starts at
    the relaxed match and must still see the text before it ("xking": no word boundary)."""
    monkeypatch.setattr(fastindex, "RELAX_AFTER", relax_after)
    keys = [CompiledKey(0, "/\\bking\\b/", True, False), CompiledKey(1, "/\\b[A-Z]{3,}\\b/", True, False),
            CompiledKey(2, "/\\bsky(?:s|'s)?\\b/i", True, False)]
    fast, reference = FastIndex(keys), ReferenceIndex(keys)
    texts = ["\x01xking", "\x01xking king", "\x01kingdom\n\x01a king", "\x01aBCD ABC", "\x01SKY's", "\x01skyline",
             "\x01the xking\n\x01and the king"]
    for text in texts * 2:
        assert fast.hits(text) == reference.hits(text), text
    assert fast.hits("\x01xking").matched == frozenset()
    assert bool(fast._relaxed) is (relax_after == 0)


def test_literal_prefilter_takes_the_longest_part_long_enough() -> None:
    # Under `i`, ß splits "fußlä" into "fu" (too short: ASCII needs 3) and "lä" (non-ASCII: 2 do).
    plan = analyse_regex(parse_regex_key("/\\bfußlä(?:s|'s)?\\b/i"))  # type: ignore[arg-type]
    assert plan.required == frozenset({"lä"})
    keys = [CompiledKey(0, "/\\bfußlä(?:s|'s)?\\b/i", True, False)]
    for text in ("\x01FUSSLÄ", "\x01Fußlä's", "\x01fußläs", "\x01FUẞLÄ", "\x01fußla", "\x01lä"):
        assert FastIndex(keys).hits(text) == ReferenceIndex(keys).hits(text), text


@pytest.mark.parametrize(("key", "scope"), [
    ("/blue\\s+sky/", PIECE), ("/blue[\\s\\S]{1,3}sky/", TEXT), ("/^\\x01User:/", TEXT),
    ("/\\x01User: sky/", LINE), ("/(?<=\\x01)sky/", LINE), ("/[^\\x01]+sky/", PIECE),
    ("/sky[^\\n]*blue/", LINE), ("/\\bsky\\b/i", ATOM), ("/blue$/m", LINE),  # $ under m: a lookahead at "\\n"
])
def test_straddling_regexes_get_a_scope_that_holds_their_matches(key: str, scope: str) -> None:
    assert analyse_regex(parse_regex_key(key)).scope == scope  # type: ignore[arg-type]


# -- the caches ----------------------------------------------------------------------------------

def _counting_scans(index: FastIndex) -> list[str]:
    """Record every string the automata scan (what is new to the index)."""
    seen: list[str] = []
    for automaton in (index._folded, index._exact):
        inner = automaton.scan

        def scan(text: str, keys: set[int], lits: set[int], inner=inner) -> None:
            seen.append(text)
            inner(text, keys, lits)

        automaton.scan = scan  # type: ignore[method-assign]
    return seen


def test_the_next_step_scans_only_the_new_message() -> None:
    keys = [CompiledKey(0, "blue sky", False, True), CompiledKey(1, "sky", False, True),
            CompiledKey(2, "/\\bsky\\b/i", True, False)]
    index = FastIndex(keys)
    scanned = _counting_scans(index)
    chat = [f"User: message {n} blue sky" for n in range(12)]
    index.hits(MATCHER + "\n\x01".join(reversed(chat[:10])))
    scanned.clear()
    second = MATCHER + "\n\x01".join(reversed(chat[1:11]))  # the window moved by one message
    assert index.hits(second) == ReferenceIndex(keys).hits(second)
    assert {text.lower() for text in scanned} == {chat[10].lower()}  # (folded and exact automata)


def test_a_loop_buffer_is_composed_from_the_last_loops() -> None:
    keys = [CompiledKey(0, "dragon", False, True), CompiledKey(1, "/\\bfire\\b/", True, False),
            CompiledKey(2, "/^\\x01A/", True, False), CompiledKey(3, "/dragon\\n\\x01fire/", True, False)]
    index, reference = FastIndex(keys), ReferenceIndex(keys)
    first = MATCHER + "\n\x01".join(["A: a dragon", "B: " + "x" * fastindex._LONG_TEXT])
    second = first + "\n\x01" + "fire\nthe dragon"
    assert index.hits(first) == reference.hits(first)
    scanned = _counting_scans(index)
    assert index.hits(second) == reference.hits(second)
    assert index._texts[second].base is index._texts[first]
    assert set(scanned) <= {"fire", "the dragon"}  # only the rest is new


def test_the_caches_stay_bounded_and_answers_do_not_change() -> None:
    keys = [CompiledKey(0, "dragon", False, True), CompiledKey(1, "/\\bfire\\b/i", True, False)]
    small = FastIndex(keys, cache_chars=2_000)
    reference = ReferenceIndex(keys)
    rng = random.Random(5)
    for step in range(60):
        text = MATCHER + "\n\x01".join(f"m{step - n} " + rng.choice(["dragon", "fire", "Fire!", "none"]) * 40
                                       for n in range(8))
        assert small.hits(text) == reference.hits(text)
        assert small._cached_chars <= 2_000
    big = FastIndex(keys)
    for step in range(20):
        big.hits(MATCHER + "x" * fastindex._LONG_TEXT + str(step))
    long_kept = [text for text in big._texts if len(text) >= fastindex._LONG_TEXT]
    assert len(long_kept) <= fastindex._LONG_KEPT  # old scan buffers do not pile up


def _recursive_book() -> WorldBook:
    return WorldBook("book", [
        WorldInfoEntry(uid=0, key=["dragon"], content="The dragon guards the Ember Gate."),
        WorldInfoEntry(uid=1, key=["ember gate"], content="Beyond the gate lies the ash road.\nIt ends at Hollow."),
        WorldInfoEntry(uid=2, key=["hollow"], content="Hollow is a dead town.", prevent_recursion=True),
        WorldInfoEntry(uid=3, key=["/\\bash\\b/i"], content=""),
    ])


def test_priming_scans_each_content_ahead_so_a_step_scans_only_the_chat() -> None:
    """`prime` works out every entry content's key facts before the steps (the app's warm-up);
    a step that then activates those entries by recursion scans only its own message."""
    book = _recursive_book()
    settings = WorldInfoSettings(recursive=True, max_recursion_steps=0)
    ctx = ActivationContext(messages=[ScanMessage("User", "a dragon!", 1)], char_name="Alice", user_name="User")
    cached = IndexCache(FastIndex)
    plan = build_plan([book], ctx, settings, cached)
    [index] = plan.indexes.values()
    assert isinstance(index, FastIndex)
    scanned = _counting_scans(index)
    # uid 2 prevents recursion (its content never enters a buffer); uid 3 has none.
    assert prime([book], ctx, settings, index_factory=cached) == 2
    primed = {text.lower() for text in scanned}
    assert primed == {"the dragon guards the ember gate.", "beyond the gate lies the ash road.", "it ends at hollow."}
    scanned.clear()
    result = activate([book], ctx, settings, index_factory=cached)
    assert [a.uid for a in result.activated] == [0, 1, 2, 3]  # dragon -> gate -> hollow, ash (regex)
    assert {text.lower() for text in scanned} <= {"user: a dragon!", ""}  # the contents were known
    assert _decisions(result) == _decisions(activate([book], ctx, settings, index_factory=ReferenceIndex))


def test_prime_does_nothing_without_recursion_or_an_index_that_primes() -> None:
    book = _recursive_book()
    ctx = ActivationContext(messages=[ScanMessage("User", "a dragon!", 1)], char_name="Alice", user_name="User")
    cached = IndexCache(FastIndex)
    assert prime([book], ctx, WorldInfoSettings(recursive=False), index_factory=cached) == 0
    assert prime([book], ctx, WorldInfoSettings(recursive=True, max_recursion_steps=1), index_factory=cached) == 0
    assert prime([book], ctx, WorldInfoSettings(recursive=True), index_factory=IndexCache(ReferenceIndex)) == 0


def test_priming_stops_at_half_the_cache() -> None:
    index = FastIndex([CompiledKey(0, "dragon", False, True)], cache_chars=2_000)
    texts = [f"content {n} " + "x" * 200 for n in range(20)]
    done = index.prime(texts)
    assert 0 < done < len(texts) and index._cached_chars <= 1_000 + 300 + 100  # the last one may cross it
    assert index.hits(MATCHER + texts[0]) == ReferenceIndex([CompiledKey(0, "dragon", False, True)]).hits(
        MATCHER + texts[0])


PRIMED_KEYS = STRADDLING + WORDS + [
    "/\\b[A-Z]{3,}\\b/",  # no literal: a candidate in every unit; relaxed without \\b
    "/[0-9]{2}/", "/sky(?=line)/i", "/\\bdrag(?:on|ons)\\b/i", "/(?<!blue )sky/",  # literal, lookarounds
]


@pytest.mark.parametrize("seed", range(4))
def test_primed_units_answer_as_the_reference(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`prime` decides the ATOM-scope regex keys of every primed unit in bulk and records only
    the matches; every later question (whole buffers, composed loop buffers, pieces) is still
    answered exactly as the reference answers it."""
    monkeypatch.setattr(fastindex, "RELAX_AFTER", seed * 40)  # relaxed patterns early or late
    rng = random.Random(seed)
    keys = [CompiledKey(n, text, rng.random() < 0.3, rng.random() < 0.7) for n, text in enumerate(PRIMED_KEYS)]
    index, reference = FastIndex(keys), ReferenceIndex(keys)
    contents = [_message(rng) + rng.choice(["", " SKY", " 42", " skyline"]) for _ in range(40)]
    assert index.prime(contents) == len(contents)
    assert all(index._units[atom].primed for text in contents for atom in fastindex._atoms(text))
    for _ in range(30):
        pieces = rng.sample(contents, rng.randint(1, 6))
        buffer = MATCHER + "\n\x01".join(pieces)
        assert index.hits(buffer) == reference.hits(buffer)
        texts = [MATCHER + piece for piece in pieces]
        wanted = set(rng.sample(range(len(keys)), 8))
        assert index.first_hits(texts, wanted) == _piecewise(reference, texts, wanted)


def test_a_key_that_times_out_while_priming_is_left_to_the_steps() -> None:
    slow = CompiledKey(0, "/(a|aa)+c/", True, False)  # exponential backtracking on a...a without c
    plain = CompiledKey(1, "/\\bac\\b/", True, False)
    index = FastIndex([slow, plain], regex_timeout=0.01)
    contents = ["a" * 35 + "!c", "ac", "a short aac"]
    index.prime(contents)
    assert index._prime_skipped == frozenset({0})  # (every unit joined: the first takes it over)
    index.regex_timeout = 5.0  # the steps' searches decide it (here quickly: short texts)
    reference = ReferenceIndex([slow, plain])
    for text in ("ac", "a short aac"):
        assert index.hits(MATCHER + text) == reference.hits(MATCHER + text)
    assert index.hits(MATCHER + "a short aac").matched == frozenset({0})
    assert index.hits(MATCHER + "ac").matched == frozenset({0, 1})


def test_changed_match_settings_get_their_own_index() -> None:
    """Case and whole-word settings change the compiled keys, so the cached index (and its
    remembered units) is never reused for them; the plan is rebuilt too."""
    book = WorldBook("book", [WorldInfoEntry(uid=1, key=["Dragon"]), WorldInfoEntry(uid=2, key=["sky"])])
    ctx = ActivationContext(messages=[ScanMessage("Alice", "a dragon in the skyline", 1)], char_name="Alice",
                            user_name="User")
    cached = IndexCache(FastIndex)
    loose = WorldInfoSettings(case_sensitive=False, match_whole_words=True)
    strict = WorldInfoSettings(case_sensitive=True, match_whole_words=False)
    plans = []
    for settings in (loose, strict, loose):
        result = activate([book], ctx, settings, index_factory=cached)
        expected = activate([book], ctx, settings, index_factory=ReferenceIndex)
        assert [a.uid for a in result.activated] == [a.uid for a in expected.activated]
        plans.append(build_plan([book], ctx, settings, cached))
    assert plans[0] is plans[2] and plans[0] is not plans[1]
    assert len(cached._cache) == 2 and len({id(index) for index in cached._cache.values()}) == 2
    assert {a.uid for a in activate([book], ctx, loose, index_factory=cached).activated} == {1}
    assert {a.uid for a in activate([book], ctx, strict, index_factory=cached).activated} == {2}


# -- whole activations, step after step ------------------------------------------------------

def _entry(rng: random.Random, uid: int) -> WorldInfoEntry:
    keys = STRADDLING + WORDS
    return WorldInfoEntry(
        uid=uid, key=rng.sample(keys, rng.randint(1, 3)), keysecondary=rng.sample(WORDS, rng.randint(0, 2)),
        selective_logic=SelectiveLogic(rng.randint(0, 3)), content=_message(rng).replace("\n", " "),
        order=rng.randint(0, 100), constant=rng.random() < 0.05, probability=rng.choice([100, 100, 100, 60]),
        prevent_recursion=rng.random() < 0.1, group=rng.choice(["", "", "", "g"]),
        case_sensitive=rng.choice([None, True]), match_whole_words=rng.choice([None, False]),
        sticky=rng.choice([None, None, 2]), cooldown=rng.choice([None, None, 2]),
    )


def _decisions(result: ActivationResult) -> list[tuple]:
    return [(d.book, d.uid, d.fired, d.reason, d.step, d.matched_key, d.matched_in, d.from_entry, d.detail)
            for d in result.decisions]


@pytest.mark.parametrize("seed", range(6))
def test_warm_steps_decide_as_the_reference_while_the_window_slides(seed: int, composing: None) -> None:
    """A chat grows by one message per step; FastIndex is reused across steps (IndexCache) and
    the plan is cached, so every step after the first is warm. Each step decides every entry as
    the reference does (reason, loop, key, where it was found, the detail sentence), and so do
    the no-match groups, the budget count and the timed state."""
    rng = random.Random(seed)
    book = WorldBook("book", [_entry(rng, uid) for uid in range(40)])
    settings = WorldInfoSettings(depth=rng.randint(2, 5), budget=rng.choice([5, 25, 100]), max_context=2000,
                                 max_recursion_steps=3, recursive=True, match_whole_words=True)
    cached = IndexCache(FastIndex)
    chat: list[ScanMessage] = []
    fast_state = reference_state = None
    for step in range(12):
        text = _message(rng)
        kwargs = {"messages": list(chat), "input": text, "user_name": "User", "char_name": "Alice"}
        if step == 0 and seed % 2:  # as the app's warm-up does: priming changes no decision
            assert prime([book], ActivationContext(**kwargs), settings, index_factory=cached) > 0
        seed_roll = rng.random()
        fast = activate([book], ActivationContext(**kwargs, **({"timed_state": fast_state} if fast_state else {})),
                        settings, rng=partial(_roll, random.Random(seed_roll)), index_factory=cached)
        ref = activate([book], ActivationContext(**kwargs, **({"timed_state": reference_state}
                                                                if reference_state else {})),
                       settings, rng=partial(_roll, random.Random(seed_roll)), index_factory=ReferenceIndex)
        assert _decisions(fast) == _decisions(ref), step
        assert fast.no_match_uids() == ref.no_match_uids()
        assert [d.uid for d in fast.notable] == [d.uid for d in ref.notable]
        assert fast.activated == ref.activated and fast.buckets == ref.buckets
        assert (fast.tokens_used, fast.overflowed, fast.steps) == (ref.tokens_used, ref.overflowed, ref.steps)
        assert fast.new_timed_state.to_json() == ref.new_timed_state.to_json()
        fast_state, reference_state = fast.new_timed_state, ref.new_timed_state
        chat.append(ScanMessage("User", text, len(chat) + 1))
        chat.append(ScanMessage("Alice", _message(rng), len(chat) + 1))


def _roll(source: random.Random) -> float:
    return source.random() * 100


def test_a_custom_token_counter_is_used_for_the_budget() -> None:
    """The default estimate is summed from cached UTF-8 sizes; any other counter still gets the
    whole text, as SillyTavern's tokenizers do."""
    book = WorldBook("book", [WorldInfoEntry(uid=n, key=["sky"], content="ä" * 10, order=100 - n) for n in range(5)])
    ctx = ActivationContext(messages=[ScanMessage("Alice", "the sky", 1)], char_name="Alice", user_name="User")
    counted: list[str] = []

    def chars(text: str) -> int:
        counted.append(text)
        return len(text)

    settings = WorldInfoSettings(budget=1, max_context=3000)  # 30 tokens
    by_chars = activate([book], ctx, settings, index_factory=FastIndex, token_counter=chars)
    assert [a.uid for a in by_chars.activated] == [0, 1] and by_chars.overflowed  # 11 + 11 < 30 <= 33
    assert "ä" * 10 + "\n" + "ä" * 10 + "\n" in counted
    by_bytes = activate([book], ctx, settings, index_factory=FastIndex)
    assert by_bytes.tokens_used == -(-len(("ä" * 10 + "\n").encode()) * len(by_bytes.activated) // 4)
