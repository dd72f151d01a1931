"""World-book parsing, made faster, still gives what it should: the `wi_activation` fixtures
parse back to the books they were written from, field by field and type by type (from an ST
export, the stored form and lorebook_v3); each bad value gives the FormatError it gave before;
and `loads_bounded` gives the same value or error as a plain token scan of every bound."""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import re
from typing import Any

import pytest

from benchmarks.wi_activation import make_fixture
from tavern_tui.engine.events import canonical_json
from tavern_tui.errors import FormatError
from tavern_tui.formats.jsontypes import MAX_DEPTH, MAX_NUMBER, MAX_STRING, loads_bounded
from tavern_tui.formats.worldinfo import parse_world_book, to_character_book, to_st_json
from tavern_tui.lore.model import WorldBook


@functools.cache
def _fixture_texts(kind: str) -> tuple[WorldBook, dict[str, str]]:
    """The 5,000-entry book and its three files: ST export, stored form (`canonical_json`), lorebook_v3."""
    book, _ = make_fixture(kind)
    return book, {"st": json.dumps(to_st_json(book)), "stored": canonical_json(to_st_json(book)),
                  "v3": json.dumps({"spec": "lorebook_v3", "data": to_character_book(book)})}


# --- whole books ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["en", "de", "cjk"])
@pytest.mark.parametrize("form", ["st", "stored", "v3"])
def test_fixture_book_parses_field_by_field(kind: str, form: str) -> None:
    """The parsed book equals the fixture it was written from, field by field and type by type;
    from lorebook_v3, as ST's `convertCharacterBook` reads it (addMemo = !!comment,
    displayIndex = the entry's index)."""
    source, texts = _fixture_texts(kind)
    book = parse_world_book(texts[form].encode("utf-8"), f"{kind}.json")
    assert len(book.entries) == len(source.entries)
    for index, (want, got) in enumerate(zip(source.entries, book.entries)):
        if form == "v3":
            want = dataclasses.replace(want, add_memo=bool(want.comment), display_index=index)
        for field in dataclasses.fields(want):
            expected, actual = getattr(want, field.name), getattr(got, field.name)
            assert (type(actual), actual) == (type(expected), expected), (index, field.name)


def test_an_entry_with_an_empty_key_keeps_it_as_an_unknown_field() -> None:
    # ST keeps unknown entry fields; an empty name is one too (it once raised KeyError).
    book = parse_world_book(json.dumps({"entries": {"0": {"uid": 0, "key": ["k"], "": 1}}}).encode(), "b.json")
    assert book.entries[0].extra == {"": 1} and book.entries[0].key == ["k"]


# --- bad values -----------------------------------------------------------------------------------

# (input, field, reason), each as the parser gave it before the speed-up.
ERRORS: list[tuple[Any, str, str]] = [
    ({'entries': {'0': {'uid': 0, 'key': 5}}},
     'entries["0"].key', 'must be a list of keys or a comma-separated string, not a number'),
    ({'entries': {'0': {'uid': 0, 'key': ['a', 1]}}},
     'entries["0"].key', 'key 1 is a number, not a string'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'keysecondary': {}}}},
     'entries["0"].keysecondary', 'must be a list of keys or a comma-separated string, not a object'),
    ({'entries': [{'keys': 5, 'uid': 1, 'key': None}]},
     'entries[0].keys', 'must be a list of keys or a comma-separated string, not a number'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'comment': 5}}},
     'entries["0"].comment', 'must be a string, not a number'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'content': []}}},
     'entries["0"].content', 'must be a string, not a list'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'outletName': True}}},
     'entries["0"].outletName', 'must be a string, not a boolean'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'group': 1.5}}},
     'entries["0"].group', 'must be a string, not a number'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'automationId': None, 'content': None, 'comment': 0}}},
     'entries["0"].comment', 'must be a string, not a number'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'constant': 'maybe'}}},
     'entries["0"].constant', "must be true or false, not 'maybe'"),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'selective': []}}},
     'entries["0"].selective', 'must be true or false, not []'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'enabled': 'x', 'disable': None}}},
     'entries["0"].enabled', "must be true or false, not 'x'"),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'useProbability': 'yes'}}},
     'entries["0"].useProbability', "must be true or false, not 'yes'"),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'probability': 'abc'}}},
     'entries["0"].probability', "must be a number, not 'abc'"),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'groupWeight': [1]}}},
     'entries["0"].groupWeight', 'must be a number, not [1]'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'order': 1.5}}},
     'entries["0"].order', 'must be a whole number, not 1.5'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'depth': 'x'}}},
     'entries["0"].depth', "must be a number, not 'x'"),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'scanDepth': True}}},
     'entries["0"].scanDepth', 'must be a number, not True'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'displayIndex': '1.5'}}},
     'entries["0"].displayIndex', "must be a whole number, not '1.5'"),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'sticky': {}}}},
     'entries["0"].sticky', 'must be a number, not {}'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'delayUntilRecursion': -1}}},
     'entries["0"].delayUntilRecursion', 'must be 0 or a positive recursion level, not -1'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'delayUntilRecursion': '1.5'}}},
     'entries["0"].delayUntilRecursion', "must be a whole number, not '1.5'"),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'selectiveLogic': 4}}},
     'entries["0"].selectiveLogic', 'must be 0-3, not 4'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'selectiveLogic': 'x'}}},
     'entries["0"].selectiveLogic', "must be a number, not 'x'"),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'position': 8}}},
     'entries["0"].position', 'must be 0-7, not 8'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'position': 'middle'}}},
     'entries["0"].position', "must be a number, not 'middle'"),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'role': 3}}},
     'entries["0"].role', 'must be 0-2, not 3'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'role': 'narrator'}}},
     'entries["0"].role', "must be a number, not 'narrator'"),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'triggers': [1]}}},
     'entries["0"].triggers', 'must be a list of generation types (strings)'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'triggers': 'normal'}}},
     'entries["0"].triggers', 'must be a list of generation types (strings)'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'characterFilter': 5}}},
     'entries["0"].characterFilter', 'must be an object, not a number'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'characterFilter': {'names': 'x'}}}},
     'entries["0"].characterFilter', 'names and tags must be lists'),
    ({'entries': {'0': {'uid': 0, 'key': ['k'], 'characterFilter': {'isExclude': 'maybe'}}}},
     'entries["0"].characterFilter.isExclude', "must be true or false, not 'maybe'"),
    ({'entries': {'0': {'uid': True, 'key': ['k']}}},
     'entries["0"].uid', 'uid must be a whole number or text, not True'),
    ({'entries': {'0': {'uid': [], 'key': ['k']}}},
     'entries["0"].uid', 'uid must be a whole number or text, not []'),
    ({'entries': {'0': {'uid': 1.5, 'key': ['k']}}},
     'entries["0"].uid', 'uid must be a whole number or text, not 1.5'),
    ({'entries': {'0': {'uid': 3}, '1': {'uid': 3}}},
     'entries["1"].uid', 'duplicate uid 3: entries["0"] has the same uid'),
    ({'entries': [{'key': ['a']}, {'uid': 0}]},
     'entries[1].uid', 'duplicate uid 0: entries[0] has the same uid'),
    ({'spec': 'lorebook_v3', 'data': {'entries': [{'id': 1, 'keys': ['k'], 'extensions': {'position': 9}}]}},
     'data.entries[0].extensions.position', 'must be 0-7, not 9'),
    ({'spec': 'lorebook_v3', 'data': {'entries': [{'id': 1, 'keys': ['k'], 'insertion_order': 'x'}]}},
     'data.entries[0].insertion_order', "must be a number, not 'x'"),
    ({'spec': 'lorebook_v3', 'data': {'entries': [{'id': [], 'keys': ['k']}]}},
     'data.entries[0].id', 'uid must be a whole number or text, not []'),
    ({'spec': 'lorebook_v3', 'data': {'entries': [{'id': 1, 'keys': 5}]}},
     'data.entries[0].keys', 'must be a list of keys or a comma-separated string, not a number'),
    ({'spec': 'lorebook_v3', 'data': {'entries': [{'id': 1, 'keys': ['k'], 'extensions': []}]}},
     'data.entries[0].extensions', 'extensions is a list, not an object'),
    ({'kind': 'memory', 'entries': [{'keywords': ['a'], 'weight': 'x'}]},
     'entries[0].weight', "must be a number, not 'x'"),
    ({'lorebookVersion': 5, 'entries': [{'keys': ['a'], 'contextConfig': {'budgetPriority': 'x'}}]},
     'entries[0].contextConfig.budgetPriority', "must be a number, not 'x'"),
    ({'type': 'risu', 'data': [{'key': 'a', 'activationPercent': 'x'}]},
     'data[0].activationPercent', "must be a number, not 'x'"),
    ({'entries': {}, 'scan_depth': 'x'},
     'scan_depth', "must be a number, not 'x'"),
    ({'entries': {}, 'token_budget': 1.5},
     'token_budget', 'must be a whole number, not 1.5'),
    ({'entries': {}, 'recursive_scanning': 'maybe'},
     'recursive_scanning', "must be true or false, not 'maybe'"),
    ({'entries': {}, 'name': 5},
     'name', 'must be a string, not a number'),
    ('{"entries": {"0": {"uid": 1, "probability": NaN}}}',
     'entries["0"].probability', 'must be a number, not nan'),
    ('{"entries": {"0": {"uid": 1, "order": 1e400}}}',
     'entries["0"].order', 'must be a number, not inf'),
    ('{"entries": {"0": {"uid": 1, "order": ' + '1' * 41 + '}}}',
     '', 'a number of 41 characters (more than 40) is not a value tavern-tui reads'),
    ('{"entries": {"0": {"content": "\\ud800"}}}',
     'entries.0.content', 'holds a lone UTF-16 surrogate \\ud800 at character 0 (half of an emoji; not a character), '
     'so it cannot be stored'),
    ('{"entries": ' + '[' * 100 + ']' * 100 + '}',
     '', 'nested more than 100 levels deep (line 1)'),
    ('{"entries": {"0": {"key": ["a"], }}}',
     '', 'not JSON: Expecting property name enclosed in double quotes: line 1 column 34'),
    ('',
     '', 'file is empty'),
    ('[]',
     '', 'top level is a list, not an object'),
    ('{"name": "x"}',
     'entries', 'no entries: not a world book (World Info needs an `entries` object)'),
]


@pytest.mark.parametrize(("given", "field", "reason"), ERRORS)
def test_bad_value_fails_as_before(given: Any, field: str, reason: str) -> None:
    data = (given if isinstance(given, str) else json.dumps(given)).encode("utf-8")
    with pytest.raises(FormatError) as info:
        parse_world_book(data, "b.json")
    assert (info.value.field, info.value.reason) == (field, reason)
    assert str(info.value) == (f"b.json: {field}: {reason}" if field else f"b.json: {reason}")


# --- loads_bounded against a plain token scan ---------------------------------------------------------

_TOKENS = re.compile(r'"(?:[^"\\]++|\\.)*+"|[\[\]{}]')


def _scanned(text: str, file: str, where: str) -> Any:
    """`loads_bounded` as it was for a text with no surrogate: every string and bracket token
    checked in order, then a parse that checks each number's length."""
    depth = 0
    for match in _TOKENS.finditer(text):
        start, size = match.start(), match.end() - match.start()
        line = text.count("\n", 0, start) + 1
        if text[start] == '"':
            if size > MAX_STRING:
                raise FormatError(file, f"a string of {size:,} characters (more than {MAX_STRING:,}) on line {line}",
                                  where)
        elif text[start] in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise FormatError(file, f"nested more than {MAX_DEPTH} levels deep (line {line})", where)
        else:
            depth -= 1

    def number(convert: type) -> Any:
        def parse(literal: str) -> Any:
            if len(literal) > MAX_NUMBER:
                raise FormatError(file, f"a number of {len(literal)} characters (more than {MAX_NUMBER}) is not a "
                                        "value tavern-tui reads", where)
            return convert(literal)
        return parse
    return json.loads(text, parse_int=number(int), parse_float=number(float))


def _outcome(read: Any, text: str) -> tuple[Any, ...]:
    try:
        value = read(text, "j.json", "line 2")
    except FormatError as exc:
        return ("FormatError", str(exc), exc.field)
    except json.JSONDecodeError as exc:
        return ("JSONDecodeError", exc.msg, exc.pos)
    except Exception as exc:  # whatever else the scan let through must come through the same
        return (type(exc).__name__, str(exc))
    return ("value", repr(value), json.dumps(value, default=repr))


_PIECES = ["a", "é", "語", "[", "]", "{", "}", "\\\"", "\\\\", "\\n", "\\u00e9", "\\/", "0" * 13, "1" * 41, " ", ","]


def _value(rng: random.Random, depth: int) -> str:
    """A random JSON value (often near the nesting bound, with long numbers and duplicate keys)."""
    roll = rng.random()
    if roll < (0.6 if depth < 3 else 0.2):
        inner = [_value(rng, depth + 1) for _ in range(rng.choice([1, 1, 2, 3]))]
        if rng.random() < 0.5:
            return "[" + ", ".join(inner) + "]"
        keys = [rng.choice(['"k"', '"a[b"', '"{"', '"1"', '"\\""']) for _ in inner]
        return "{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, inner)) + "}"
    if roll < 0.55:
        return '"' + "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 6))) + '"'
    if roll < 0.8:
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 44))).lstrip("0") or "0"
        frac = "." + "7" * rng.randint(1, 20) if rng.random() < 0.3 else ""
        exp = "e" + rng.choice(["", "+", "-"]) + "1" * rng.randint(1, 14) if rng.random() < 0.2 else ""
        return rng.choice(["", "-"]) + digits + frac + exp
    return rng.choice(["true", "false", "null", "NaN", "-Infinity"])


def _texts() -> list[str]:
    rng = random.Random(20240617)
    texts = []
    for _ in range(1500):
        wrap = rng.choice([0, 0, 60, 97, 98, 99, 100])
        text = "[" * wrap + _value(rng, 0) + "]" * wrap
        if rng.random() < 0.3:  # broken on purpose: a character dropped or added
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice(["", "[", "]", "{", '"', "\\", ",", ":", "1" * 41]) + text[at + 1:]
        texts.append(text)
    nest = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    spread = "1" * 13 + "." + "1" * 13 + "e+" + "1" * 11  # 40 characters, no run of 14 digits
    half = "b" * (MAX_STRING // 2)
    return texts + [
        nest, "[" + nest + "]", '["' + "[" * 200 + '", ' + nest + "]", '["\\"[[[", ' + nest + "]",
        '["\\\\", ' + "[" + nest + "]]", '{"a": ' + "[" + nest + "]" + ', "a": 1}',
        "1" * MAX_NUMBER, "1" * (MAX_NUMBER + 1), "-" + "1" * MAX_NUMBER, "1." + "1" * 38, "1." + "1" * 39,
        "1" * 36 + "e100", "1" * 37 + "e100", spread, "-" + spread,
        '["' + "7" * 50 + '", 12]', '{"id": 1700000000000}', "\ufeff{}", "",
        '"' + "a" * (MAX_STRING - 2) + '"', '["' + "a" * MAX_STRING + '"]', f'["{half}", "{half}", {nest}]',
    ]


def test_loads_bounded_matches_a_token_scan() -> None:
    """The same value, or the same error with the same wording, field and line, for random
    texts around every bound (nesting, number length, string length), valid or not."""
    for text in _texts():
        assert _outcome(loads_bounded, text) == _outcome(_scanned, text), text[:200]
