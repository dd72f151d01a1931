"""A regex key too costly to compile is refused at import (book and card alike) and never matches.

`regex` unrolls a counted repeat, so `/a{3000000}/` took 18 s and 867 MB every step and
`/a{99999999}/` ended in MemoryError; both are now refused before anything is compiled.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tavern_tui.formats.cards import parse_card
from tavern_tui.formats.worldinfo import parse_world_book
from tavern_tui.lore.fastindex import FastIndex
from tavern_tui.lore.jsregex import JSRegexError, JSRegexTooCostly, compile_js_regex
from tavern_tui.lore.matching import invalid_regex_keys, parse_regex_key, refused_regex_key

from ._util import book, context, entry, fired, run

BOMB = "/a{99999999}/"


@pytest.mark.parametrize(("pattern", "why"), [
    ("a{99999999}", "counted repeat {99999999} is above 1000"),
    ("a{2,3000000}", "counted repeat {3000000} is above 1000"),
    ("(?:a{1000}){11}", "pattern too large to compile (over 10000 units)"),
    ("((a{100}){10}){11}", "pattern too large to compile (over 10000 units)"),
    ("x" * 1001, "pattern is 1001 characters long (at most 1000)"),
], ids=["huge-repeat", "huge-range", "nested", "nested-3", "long"])
def test_costly_patterns_are_refused_before_compiling(pattern: str, why: str) -> None:
    with pytest.raises(JSRegexTooCostly) as caught:
        compile_js_regex(pattern, "")
    assert str(caught.value) == why
    assert isinstance(caught.value, JSRegexError)


@pytest.mark.parametrize(("pattern", "text"), [
    ("a{1000}", "b" + "a" * 1000), ("(a{100}){100}", "a" * 10_000), (r"(?:\w+\s){0,20}dragon", "a red dragon"),
    ("x" * 1000, "y" + "x" * 1000),
], ids=["a1000", "nested", "words", "long"])
def test_patterns_within_the_limits_still_compile(pattern: str, text: str) -> None:
    compiled, sticky = compile_js_regex(pattern, "")
    assert sticky is False and compiled.search(text) is not None and compiled.search(text[:-1] + "yy") is None


def test_a_refused_key_is_a_regex_that_never_matches() -> None:
    parsed = parse_regex_key(BOMB)
    assert parsed is not None and parsed.refused == "counted repeat {99999999} is above 1000"
    assert refused_regex_key(BOMB) == "counted repeat {99999999} is above 1000"
    assert refused_regex_key("/a{3}/") is None and refused_regex_key("plain") is None
    # Neither as a regex nor as its own spelling: the entry's other keys still fire.
    history = context("a" * 2000 + " " + BOMB + " dragon")
    result = run(book(entry(1, [BOMB]), entry(2, [BOMB, "dragon"])), history)
    assert fired(result) == {2}
    result = run(book(entry(1, [BOMB]), entry(2, [BOMB, "dragon"])), history, index_factory=FastIndex)
    assert fired(result) == {2}
    assert "'/a{99999999}/' was refused as a regex (counted repeat {99999999} is above 1000), so it never matches" in (
        result.decision("book", 1).detail)


def test_world_book_import_warns_naming_entry_field_and_key() -> None:
    raw = {"entries": {"0": {"uid": 7, "key": ["dragon", BOMB], "keysecondary": ["/(/"], "comment": "Bomb",
                             "content": "x"}}}
    parsed = parse_world_book(json.dumps(raw).encode(), "bomb.json")
    assert invalid_regex_keys(parsed) == [
        "entry 7 (Bomb) key[1] '/a{99999999}/': regex refused (counted repeat {99999999} is above 1000); "
        "this key never matches, the entry's other keys still do",
        "entry 7 (Bomb) keysecondary[0] '/(/': not a valid regex (cannot compile '(': missing ) at position 1); "
        "matched as plain text, as SillyTavern does",
    ]


def test_card_import_checks_its_book_keys_too() -> None:
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": "Bomber", "character_book": {"entries": [
            {"id": 3, "keys": [BOMB], "content": "boom", "enabled": True, "insertion_order": 1},
            {"id": 4, "keys": ["/" + "y" * 1200 + "/"], "content": "long", "enabled": True, "insertion_order": 2},
        ]}}}
    parsed = parse_card(json.dumps(card).encode(), "bomber.json")
    assert parsed.warnings == (
        "character_book entry 3 key[0] '/a{99999999}/': regex refused (counted repeat {99999999} is above 1000); "
        "this key never matches, the entry's other keys still do",
        f"character_book entry 4 key[0] {'/' + 'y' * 79!r}… (1202 characters): regex refused (pattern is 1200 "
        "characters long (at most 1000)); this key never matches, the entry's other keys still do",
    )


def test_import_and_steps_with_the_bomb_stay_small_and_quick() -> None:
    # Before: MemoryError (or minutes) at import and on every step. Bound: 1 GiB of address space.
    script = textwrap.dedent(f"""
        import json, resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        sys.path.insert(0, "tests/lore")
        from tavern_tui.formats.worldinfo import parse_world_book
        from tavern_tui.lore.fastindex import FastIndex
        from tavern_tui.lore.matching import invalid_regex_keys
        from _util import context, fired, run
        keys = [{BOMB!r}, "/a{{3000000}}/", "/(?:b{{1000}}){{1000}}/"]
        raw = {{"entries": {{str(i): {{"uid": i, "key": [k], "content": "x"}} for i, k in enumerate(keys)}}}}
        parsed = parse_world_book(json.dumps(raw).encode(), "bomb.json")
        assert len(invalid_regex_keys(parsed)) == 3
        for _ in range(3):
            assert fired(run(parsed, context("a" * 5000), index_factory=FastIndex)) == set()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
