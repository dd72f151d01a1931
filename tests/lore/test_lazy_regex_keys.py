"""Regex keys are compiled when first searched, not when a book is planned (the cold path of a
big book), and nothing else changes: which keys are regexes, the errors a person is shown, the
decisions (against `ReferenceIndex`). Also the plan build's garbage-collector pause."""

from __future__ import annotations

import gc
import random

import pytest
import regex

from tavern_tui.lore.collector import gc_paused
from tavern_tui.lore.fastindex import FastIndex
from tavern_tui.lore.jsregex import (
    JSRegexError,
    JSRegexTooCostly,
    compile_js_regex,
    compile_translation,
    translate_js_regex,
)
from tavern_tui.lore.matching import (
    CompiledKey,
    ReferenceIndex,
    invalid_regex_keys,
    parse_regex_key,
    regex_key_error,
)
from tavern_tui.lore.settings import WorldInfoSettings
from tests.lore._util import book, context, entry, run

# Tokens of JS pattern syntax, valid and not, for random patterns.
_TOKENS = ["a", "b", "é", "İ", "\\b", "\\B", "\\d", "\\W", "\\s", "[a-z]", "[^\\W]", "[]", "[^]", "[\\d-z]",
           ".", "^", "$", "|", "(", "(?:", "(?=", "(?!", "(?<=", "(?<n>", ")", ")", "*", "+", "?", "*?", "{2}",
           "{1,3}", "{2,}", "{3,1}", "\\1", "\\k<n>", "{", "}", "]", "\\u0041", "\\x41", "\\ud83d", "\\c",
           "\\p{L}", "-", "\\", "\\0", "\\/", "\\n", "\x01"]


def _outcome(pattern: str, flags: str) -> str:
    """What eager compiling says: "ok", "refused" or "invalid"."""
    try:
        compile_js_regex(pattern, flags)
    except JSRegexTooCostly:
        return "refused"
    except JSRegexError:
        return "invalid"
    return "ok"


def test_plain_syntax_translations_always_compile_and_validity_is_unchanged() -> None:
    rng = random.Random(20261207)
    plain = 0
    for _ in range(4000):
        pattern = "".join(rng.choice(_TOKENS) for _ in range(rng.randint(1, 8)))
        flags = rng.choice(["", "i", "u", "iu", "m", "s", "y", "gi"])
        expected = _outcome(pattern, flags)
        parsed = parse_regex_key(f"/{pattern}/{flags}") if "/" not in pattern.replace("\\/", "") else None
        if "/" not in pattern.replace("\\/", ""):
            assert (parsed is None) == (expected == "invalid"), (pattern, flags)
        try:
            translation = translate_js_regex(pattern, flags)
        except JSRegexError:
            continue
        if translation.plain_syntax:
            plain += 1
            compiled = compile_translation(translation)  # never raises for plain syntax
            assert compiled.flags == translation.flags
            assert compiled.pattern == translation.text
    assert plain > 1000  # the common shapes take the lazy path


@pytest.mark.parametrize("key", ["/(/", "/a)/", "/*a/", "/a(?<n$>b)/", "/\\p{Nope}/u"])
def test_an_invalid_regex_key_is_known_when_parsed_and_reported_as_before(key: str) -> None:
    assert parse_regex_key(key) is None
    assert regex_key_error(key) is not None
    parsed = book(entry(1, [key], comment="Broken"))
    assert invalid_regex_keys(parsed) == [
        f"entry 1 (Broken) key[0] {key!r}: not a valid regex ({regex_key_error(key)}); matched as plain text, "
        "as SillyTavern does"]


def test_a_regex_key_with_a_required_literal_is_compiled_only_once_its_literal_is_in_the_text() -> None:
    key = "/\\bquonzarith(?:s|'s)?\\b/i"  # (a key no other test uses: parsed keys are cached)
    other = "/(?<x>qu)\\k<x>ill/"  # named groups and backreferences: compiled when parsed, as before
    keys = [CompiledKey(0, key, True, False), CompiledKey(1, "dragon", False, True), CompiledKey(2, other, True, False)]
    index = FastIndex(keys)
    parsed = parse_regex_key(key)
    assert parsed is not None and not parsed.is_compiled
    assert parse_regex_key(other) is not None and parse_regex_key(other).is_compiled  # type: ignore[union-attr]
    assert index.hits("a dragon sleeps under the hill").matched == {1}
    assert not parsed.is_compiled
    assert index.hits("the Quonzarith's hoard").matched == {0}
    assert parsed.is_compiled
    assert parsed.compiled.flags == parsed.py_flags


def test_decisions_equal_the_reference_on_a_small_book_of_regex_keys() -> None:
    keys = ["/\\bkarvel(?:s|'s)?\\b/i", "/\\b(?:Morwen|Tharis)\\b/i", "/\\bVal[a-zäöüß]{2,5}\\b/",
            "/\\b[A-Z]{5,}\\b/", "/Morwen.*Tharis/i", "/^\\x01[^\\n]*Elbri/", "/(a)\\1h/", "/(/", "AC/DC",
            "/a{99999999}/", "/dra(?=gon)/y", "/\\d{4}年/", "/[ァ-ヴ]{3,}/"]
    entries = [entry(i, [k], content=f"lore {i} mentions Karvel") for i, k in enumerate(keys)]
    entries += [entry(100 + i, ["plain", k], keysecondary=[keys[(i + 3) % len(keys)]], selective=True)
                for i, k in enumerate(keys)]
    ctx = context("Karvel's Tower stood there.", "Morwen met Tharis; aah! AC/DC played / (",
                  "Valdris said KINGDOM twice in 1999年 under ガンダム", input="Elbri plain dragon")
    settings = WorldInfoSettings(depth=4, recursive=True, max_recursion_steps=3)
    fast = run(book(*entries), ctx, settings, index_factory=FastIndex)
    reference = run(book(*entries), ctx, settings, index_factory=ReferenceIndex)
    decisions = [(d.uid, d.fired, d.reason, d.matched_key, d.matched_in) for d in fast.decisions]
    assert decisions == [(d.uid, d.fired, d.reason, d.matched_key, d.matched_in) for d in reference.decisions]
    assert {a.uid for a in fast.activated} == {a.uid for a in reference.activated}
    assert {0, 1, 2, 3, 4, 5, 6, 8, 11, 12}.issubset({a.uid for a in fast.activated})


def test_gc_paused_turns_the_collector_off_inside_and_restores_it() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()


def test_the_py_flags_of_a_parsed_key_are_the_compiled_flags() -> None:
    for key in ("/x/", "/x/i", "/x/iu", "/x/ms", "/x/y"):
        parsed = parse_regex_key(key)
        assert parsed is not None
        assert parsed.py_flags == regex.compile(parsed.pattern, regex.IGNORECASE if "i" in key[3:] else 0).flags
