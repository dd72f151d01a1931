"""Key matching with SillyTavern's (JavaScript's) semantics: regex keys, whole words, case."""

from __future__ import annotations

import time
from functools import partial

import pytest

from tavern_tui.lore.jsregex import JSRegexError, compile_js_regex, js_trim
from tavern_tui.lore.matching import (
    CompiledKey,
    IndexCache,
    ReferenceIndex,
    parse_regex_key,
)


def hit(key: str, text: str, *, case: bool = False, whole: bool = True) -> bool:
    index = ReferenceIndex([CompiledKey(0, key, case, whole)])
    return 0 in index.hits(text).matched


def js(pattern: str, flags: str, text: str) -> bool:
    """`new RegExp(pattern, flags).test(text)` as translated."""
    compiled, sticky = compile_js_regex(pattern, flags)
    return (compiled.match if sticky else compiled.search)(text) is not None


# -- parseRegexFromString --------------------------------------------------------------------

@pytest.mark.parametrize(("key", "source", "flags"), [
    ("/dragon(s)?/i", "dragon(s)?", "i"),
    ("/a/gimsuy", "a", "gimsuy"),
    ("/a\\/b/", "a/b", ""),
    ("/x/y/", None, None),  # unescaped inner slash: plain text
    ("/a/x", None, None),  # x is not a flag
    ("/a/gg", None, None),  # duplicate flag: RegExp throws
    ("/(/", None, None),  # invalid pattern
    ("AC/DC", None, None),
    ("//", None, None),  # empty body
    ("/a/\n", None, None),  # JS `$` is the very end
])
def test_parse_regex_key(key: str, source: str | None, flags: str | None) -> None:
    parsed = parse_regex_key(key)
    if source is None:
        assert parsed is None
    else:
        assert parsed is not None and (parsed.source, parsed.flags) == (source, flags)


def test_invalid_regex_key_is_matched_as_plain_text() -> None:
    assert hit("/(/", "a /(/ b")
    assert not hit("/(/", "a ( b")


def test_regex_keys_ignore_case_and_whole_word_settings() -> None:
    assert not hit("/Dragon/", "dragon", case=False)
    assert hit("/drag/", "dragons", whole=True)


# -- JS regex translation ----------------------------------------------------------------------

@pytest.mark.parametrize(("pattern", "flags", "text", "expected"), [
    (r"\w", "", "é", False),  # \w is ASCII in JS
    (r"\W", "", "é", True),
    (r"\d", "", "٣", False),  # Arabic-Indic digit: not \d in JS
    (r"caf\w\b", "", "café", False),
    (r"café\b", "", "café!", False),  # \b is ASCII: no boundary between é and !
    (r"\s", "", "\ufeff", True),  # JS whitespace includes BOM
    (r"\s", "", "\x1c", False),  # Python's \s includes it, JS's does not
    (".", "", "\r", False),
    (".", "", "\u2028", False),
    (".", "s", "\n", True),
    ("^a$", "", "a\n", False),
    ("^b", "", "a\nb", False),
    ("^b", "m", "a\rb", True),  # m: every JS line terminator
    ("a$", "m", "a\u2029b", True),
    ("[^]", "", "\n", True),
    ("[]", "", "anything", False),
    (r"[\w-z]", "", "-", True),  # Annex B: literal dash next to a class escape
    (r"[\W]", "", "é", True),
    (r"[^\W]", "", "é", False),
    (r"[^\W]", "", "x", True),
    (r"[\s\S]+x", "", "a\nx", True),
    ("a{", "", "a{", True),  # lone brace is literal without u
    ("x{,3}", "", "x{,3}", True),  # not a quantifier in JS
    (r"\u00e9", "", "é", True),
    (r"\uD83D\uDE00", "", "😀", True),
    (r"\u{1F600}", "u", "😀", True),
    (r"(?<x>a)\k<x>", "", "aa", True),
    (r"(a)\1", "", "aa", True),
    (r"\x01Alice:", "", "\x01Alice: hi", True),
    (r"\q", "", "q", True),  # identity escape without u
    ("a", "y", "ba", False),  # sticky: test at position 0
    ("a", "y", "ab", True),
    ("a", "g", "ba", True),
    ("DRAGON", "i", "dragon", True),
    ("ÜBER", "i", "über", True),
])
def test_js_regex_semantics(pattern: str, flags: str, text: str, expected: bool) -> None:
    assert js(pattern, flags, text) is expected


@pytest.mark.parametrize("flags", ["", "i", "u", "iu", "m"])
def test_word_boundaries_follow_ecmascript_word_characters(flags: str) -> None:
    """ECMAScript IsWordChar: `[A-Za-z0-9_]`, plus U+017F and U+212A when both `u` and `i` are
    set (WordCharacters, extraWordChars). Checked for every code point on both sides of a
    boundary: a lone character (start and end of input), after a word and after a non-word."""
    word = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
    if "u" in flags and "i" in flags:
        word |= {"\u017f", "\u212a"}
    b = compile_js_regex(r"\b", flags)[0]
    nb = compile_js_regex(r"\B", flags)[0]
    wrong = []
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        c = chr(code)
        is_word = c in word
        if ((b.match(c) is not None) is not is_word or (nb.match(c) is not None) is is_word
                or (b.match("_" + c, 1) is not None) is is_word or (b.match("." + c, 1) is not None) is not is_word
                or (b.match(c, 1) is not None) is not is_word):
            wrong.append(hex(code))
    assert wrong == []
    assert b.search("") is None and nb.search("") is not None  # no boundary in the empty input


@pytest.mark.parametrize(("pattern", "flags"), [
    ("a**", ""), ("a*+", ""), (r"\q", "u"), ("a{", "u"), ("(?i:a)", ""), ("[b-a]", ""), ("a", "ii"),
])
def test_js_regex_errors(pattern: str, flags: str) -> None:
    with pytest.raises(JSRegexError):
        compile_js_regex(pattern, flags)


# -- plain keys ------------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "text", "expected"), [
    ("ai", "maine is a state, ain't it?", False),
    ("ai", "i asked the ai.", True),
    ("魔法", "我会魔法了", True),
    ("#hello", "say #hello to everyone", True),
    ("straße", "die straße ist lang", True),
    ("stra", "die straße ist lang", True),  # ß is \W for JS: "stra" ends at a boundary
    ("über", "das überall", False),  # ü is \W, but "überall" continues with word chars
    ("über", "das über!", True),
    ("red dragon", "a red dragonfly", True),  # key with a space: plain substring
    ("drag", "dragon", False),
])
def test_whole_word_matching_uses_ascii_boundaries(key: str, text: str, expected: bool) -> None:
    assert hit(key, text) is expected


def test_whole_words_off_is_a_substring_test() -> None:
    assert hit("drag", "dragon", whole=False)


def test_case_folding_is_lowercase_on_both_sides() -> None:
    assert hit("DRAGON", "a Dragon")
    assert not hit("DRAGON", "a Dragon", case=True)
    assert hit("Dragon", "a Dragon", case=True)
    assert hit("ΟΔΟΣ", "η οδος")  # final sigma: "ΟΔΟΣ".lower() ends in ς, as JS toLowerCase


def test_js_trim_strips_bom_but_not_information_separators() -> None:
    assert js_trim("\ufeff key \u3000") == "key"
    assert js_trim("\x1ckey") == "\x1ckey"


# -- the index --------------------------------------------------------------------------------

def test_reference_index_reports_every_matching_key_and_honours_the_restriction() -> None:
    keys = [CompiledKey(0, "dragon", False, True), CompiledKey(1, "/fi(re)/", True, False),
            CompiledKey(2, "absent", False, True)]
    index = ReferenceIndex(keys)
    assert index.hits("\x01Alice: Dragon fire").matched == {0, 1}
    assert index.hits("\x01Alice: Dragon fire", (1,)).matched == {1}


def test_duplicate_key_ids_are_refused() -> None:
    with pytest.raises(ValueError):
        ReferenceIndex([CompiledKey(0, "a", False, True), CompiledKey(0, "b", False, True)])


def test_pathological_regex_times_out_instead_of_hanging() -> None:
    index = ReferenceIndex([CompiledKey(0, "/(a|aa)+$/", True, False), CompiledKey(1, "a", False, False)],
                           regex_timeout=0.01)
    started = time.monotonic()
    hits = index.hits("a" * 60 + "b")
    assert time.monotonic() - started < 2
    assert hits.timed_out == {0} and hits.matched == {1}


def test_index_cache_reuses_an_index_for_the_same_keys() -> None:
    built = []

    def factory(keys):
        built.append(keys)
        return ReferenceIndex(keys)

    cache = IndexCache(factory, size=2)
    keys = [CompiledKey(0, "a", False, True)]
    assert cache(keys) is cache(list(keys))
    assert len(built) == 1
    cache([CompiledKey(0, "b", False, True)])
    cache([CompiledKey(0, "c", False, True)])
    cache(keys)
    assert len(built) == 4


def test_timeout_is_configurable_through_the_factory() -> None:
    factory = partial(ReferenceIndex, regex_timeout=0.5)
    assert factory([]).regex_timeout == 0.5
