"""`regex_fastplan.fast_tree` builds `re._parser`'s tree, so `analyse_regex` plans are unchanged.

Checked on generated JS patterns under several flag sets, on every regex key the B1 benchmark's
`_regex_key` makes, and on the corpus books' regex keys: wherever `fast_tree` answers, its tree
is `re._parser.parse`'s, and `_analyse` gives the plan it gives with the fast path switched off.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import pytest

from benchmarks.wi_activation import _language, _regex_key
from tavern_tui.formats.worldinfo import parse_world_book
from tavern_tui.lore import regex_plan
from tavern_tui.lore.jsregex import JSRegexError, translate_js_regex
from tavern_tui.lore.matching import parse_regex_key
from tavern_tui.lore.regex_fastplan import fast_tree

CORPUS = Path(os.environ.get("TAVERN_TEST_CORPUS", Path(__file__).resolve().parents[3] / "shared" / "corpus"))
FLAG_SETS = ("", "i", "iu", "u", "m", "s", "y", "gi")
_PIECES = ["a", "b", "Z", "7", "_", "'", "-", " ", ".", "ä", "ß", "İ", "ſ", "王", "城", "\\x01", "\\n", "\\u00e4",
           "[a-z]", "[^\\n]", "[abc]", "[a]", "[^a]", "[aa]", "[a-a]", "[\\x01]", "[^\\x01\\n]", "[a-zäöüß]",
           "[一-龥]", "[ -~]", "\\d", "\\w", "\\s", "\\D", "\\b", "\\B", "^", "$", "\\.", "\\(", "\\\\", "{", "}"]
_QUANTIFIERS = ["", "", "", "?", "*", "+", "{2}", "{2,}", "{1,3}", "??", "+?", "{3,1}"]


def _norm(tree: object) -> object:
    if isinstance(tree, (list, regex_plan._sre_parse.SubPattern)):
        return [_norm(item) for item in tree]
    if isinstance(tree, tuple):
        return tuple(_norm(item) for item in tree)
    return tree


def _random_js(rng: random.Random, depth: int = 0) -> str:
    out = []
    for _ in range(rng.randint(0, 6)):
        roll = rng.random()
        if roll < 0.15 and depth < 2:
            branches = [_random_js(rng, depth + 1) for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.3:  # branches sharing a prefix, or single characters
                prefix = rng.choice(["ab", "a", "[a-z]", "\\d"])
                branches = [prefix + b for b in branches]
            opener = rng.choice(["(?:", "(?:", "(?:", "(", "(?=", "(?!"])
            out.append(opener + "|".join(branches) + ")")
        else:
            out.append(rng.choice(_PIECES) * rng.choice([1, 1, 1, 3]))
        out.append(rng.choice(_QUANTIFIERS))
    if rng.random() < 0.1:
        out.append("|" + _random_js(rng, depth + 1))
    return "".join(out)


def _benchmark_keys() -> list[str]:
    keys = []
    for kind in ("en", "de", "cjk"):
        rng = random.Random(f"fastplan-{kind}")
        lang = _language(kind, rng)
        names = [lang.name() for _ in range(200)]
        keys += [_regex_key(rng, kind, names) for _ in range(1500)]
    return keys


def _corpus_keys() -> list[str]:
    """The corpus books' regex keys, and each plain key as a whole-word regex, alone and in pairs."""
    keys: list[str] = []
    for path in sorted((CORPUS / "worldbooks").glob("*.json")):
        book = parse_world_book(path.read_bytes(), path.name)
        plain = []
        for entry in book.entries:
            for key in (k.strip() for k in (*entry.key, *entry.keysecondary) if k.strip()):
                (keys if key.startswith("/") else plain).append(key)
        escaped = [re.sub(r"[.*+?^${}()|[\]\\/]", lambda m: "\\" + m.group(), k) for k in plain]
        keys += [f"/\\b{k}\\b/{flags}" for k in escaped for flags in ("", "i", "iu")]
        keys += [f"/(?:{a}|{b})s?/i" for a, b in zip(escaped, escaped[1:])]
    return keys


def _check(pattern: str, flags: int, sticky: bool, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Assert the fast and the reference tree and plan agree; whether the fast path answered."""
    stripped = pattern
    for spelled in regex_plan._BOUNDARIES:
        stripped = stripped.replace(spelled, "(?:)")
    tree = fast_tree(stripped)
    if tree is not None:
        assert _norm(tree) == _norm(list(regex_plan._sre_parse.parse(stripped))), stripped
    args = (pattern, bool(flags & regex_plan._IGNORECASE), bool(flags & regex_plan._FULLCASE), sticky)
    fast = regex_plan._analyse.__wrapped__(*args)
    with monkeypatch.context() as patch:
        patch.setattr(regex_plan, "fast_tree", lambda _pattern: None)
        reference = regex_plan._analyse.__wrapped__(*args)
    assert fast == reference, pattern
    return tree is not None


def test_generated_patterns_plan_as_the_parser_does(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    answered = total = 0
    for _ in range(5000):
        source = _random_js(rng)
        for flags in rng.sample(FLAG_SETS, 2):
            try:
                translation = translate_js_regex(source, flags)
            except JSRegexError:
                continue
            total += 1
            answered += _check(translation.text, translation.flags, translation.sticky, monkeypatch)
    assert total > 5000 and answered > total // 5  # the fast path is really exercised


@pytest.mark.parametrize("keys", [_benchmark_keys, _corpus_keys], ids=["benchmark", "corpus"])
def test_real_keys_plan_as_the_parser_does(keys, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = [rx for rx in map(parse_regex_key, keys()) if rx is not None]
    assert parsed
    answered = sum(_check(rx.pattern, rx.py_flags, rx.sticky, monkeypatch) for rx in parsed)
    assert answered > 0


def test_fast_tree_declines_what_it_does_not_read() -> None:
    for pattern in ("(a)", "(?=a)", "a(?i:b)", "\\w", ".", "a{", "a**", "(?:)?", "\\A?", "[b-a]", "\\U00110000",
                    "a)", "(?:a", "[a-]", "a{5,2}"):
        assert fast_tree(pattern) is None, pattern
    assert fast_tree("ab") == [(regex_plan._sre.LITERAL, 97), (regex_plan._sre.LITERAL, 98)]
