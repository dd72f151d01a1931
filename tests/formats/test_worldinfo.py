"""World-book import/export: corpus facts (shared/corpus/FACTS.md), ST 1.18 rules (format-digest §b),
foreign formats, round trips and broken files."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest

from tavern_tui.errors import FormatError
from tavern_tui.formats.cards import parse_card
from tavern_tui.formats.worldinfo import (
    from_character_book,
    parse_world_book,
    to_character_book,
    to_st_json,
)
from tavern_tui.lore.model import (
    CharacterFilter,
    Position,
    Role,
    SelectiveLogic,
    WorldBook,
)

BOOKS = ("eldoria_st_staging.json", "eldoria_st_release_oldformat.json", "honkai_chub_st_hybrid.json",
         "hogwarts_agnai_memory.json")
CARDS = ("ai_v3_with_book.json", "seraphina_chara_ccv3.png")

# Every 1.18 field of newWorldInfoEntryDefinition (digest §b.2); characterFilter/displayIndex are optional.
ST_118_FIELDS = {
    "uid", "key", "keysecondary", "comment", "content", "constant", "vectorized", "selective", "selectiveLogic",
    "addMemo", "order", "position", "disable", "ignoreBudget", "excludeRecursion", "preventRecursion",
    "delayUntilRecursion", "matchPersonaDescription", "matchCharacterDescription", "matchCharacterPersonality",
    "matchCharacterDepthPrompt", "matchScenario", "matchCreatorNotes", "probability", "useProbability", "depth",
    "outletName", "group", "groupOverride", "groupWeight", "scanDepth", "caseSensitive", "matchWholeWords",
    "useGroupScoring", "automationId", "role", "sticky", "cooldown", "delay", "triggers",
}
# Defaults from the digest §b.2 table, for fields the old-format file lacks.
DIGEST_DEFAULTS = dict(
    vectorized=False, selective_logic=SelectiveLogic.AND_ANY, add_memo=False, ignore_budget=False,
    exclude_recursion=False, prevent_recursion=False, delay_until_recursion=0, match_persona_description=False,
    match_character_description=False, match_character_personality=False, match_character_depth_prompt=False,
    match_scenario=False, match_creator_notes=False, probability=100, use_probability=True, depth=4,
    outlet_name="", group="", group_override=False, group_weight=100, scan_depth=None, case_sensitive=None,
    match_whole_words=None, use_group_scoring=None, automation_id="", role=Role.SYSTEM, sticky=None,
    cooldown=None, delay=None, character_filter=None, triggers=[],
)


def load_book(corpus_dir: Path, name: str) -> WorldBook:
    return parse_world_book((corpus_dir / "worldbooks" / name).read_bytes(), name)


def card_book(corpus_dir: Path, name: str) -> WorldBook:
    card = parse_card((corpus_dir / "cards" / name).read_bytes(), name)
    return from_character_book(card.character_book, name, card.name)


def parse(obj: dict | str, file: str = "test_book.json") -> WorldBook:
    text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return parse_world_book(text.encode("utf-8"), file)


def raises(obj: dict | str | bytes, file: str = "broken.json") -> FormatError:
    data = obj if isinstance(obj, bytes) else (obj if isinstance(obj, str) else json.dumps(obj)).encode("utf-8")
    with pytest.raises(FormatError) as info:
        parse_world_book(data, file)
    assert info.value.file == file
    return info.value


def reparse_st(book: WorldBook) -> WorldBook:
    return parse(json.loads(json.dumps(to_st_json(book), ensure_ascii=False)), "exported.json")


# --- corpus: SillyTavern World Info -----------------------------------------------------------------------


def test_eldoria_staging(corpus_dir: Path) -> None:
    book = load_book(corpus_dir, "eldoria_st_staging.json")
    assert (book.name, book.source_format) == ("eldoria_st_staging", "st")  # no name in the file → stem
    assert [e.uid for e in book.entries] == [0, 1, 2, 3]
    assert [e.comment for e in book.entries] == ["eldoria", "shadowfang", "glade", "power"]
    assert (book.scan_depth, book.token_budget, book.recursive_scanning) == (None, None, None)
    for e in book.entries:
        assert (e.constant, e.selective, e.depth, e.order, e.position) == (
            False, True, 4, 100, Position.BEFORE_CHAR
        )
        assert e.selective_logic == SelectiveLogic.AND_ANY  # FACTS: no selectiveLogic field → default
        assert e.role == Role.SYSTEM  # FACTS: role null → system (digest §b.2)
        assert e.delay_until_recursion == 0  # FACTS: delayUntilRecursion false
        assert (e.sticky, e.cooldown, e.delay) == (0, 0, 0)
        assert (e.scan_depth, e.case_sensitive, e.match_whole_words) == (None, None, None)  # tri-state nulls
        assert (e.probability, e.use_probability, e.group, e.vectorized) == (100, True, "", False)
        assert e.extra == {}
    assert sum(len(e.key) for e in book.entries) == 15  # FACTS: total primary keys


def test_eldoria_old_format_gets_118_defaults(corpus_dir: Path) -> None:
    book = load_book(corpus_dir, "eldoria_st_release_oldformat.json")
    assert len(book.entries) == 4
    assert [e.uid for e in book.entries] == [0, 1, 2, 3]
    for e in book.entries:
        assert e.comment == ""
        assert e.selective is False  # explicit in the file: must not become the default true
        assert (e.order, e.position, e.constant, e.disable) == (100, Position.BEFORE_CHAR, False, False)
        assert {name: getattr(e, name) for name in DIGEST_DEFAULTS} == DIGEST_DEFAULTS
        assert e.display_index is None and e.extra == {}
    assert sum(len(e.key) for e in book.entries) == 15


def test_honkai_chub_hybrid(corpus_dir: Path) -> None:
    raw = json.loads((corpus_dir / "worldbooks" / "honkai_chub_st_hybrid.json").read_text(encoding="utf-8"))
    book = load_book(corpus_dir, "honkai_chub_st_hybrid.json")
    assert (book.name, book.source_format, len(book.entries)) == ("Honkai Impact RPG", "st+v2", 34)
    assert (book.scan_depth, book.token_budget, book.recursive_scanning) == (50, 500, False)
    assert book.description == raw["description"]
    assert book.extra == {"is_creation": False, "extensions": {}}
    by_key = dict(zip(raw["entries"], book.entries, strict=True))  # entries keep file order
    assert list(by_key) == [str(n) for n in range(1, 35)]
    assert [e.uid for e in book.entries] == list(range(34))  # uid wins over the dict key
    assert [e.uid for e in book.entries if e.constant] == [13] and by_key["14"].constant
    assert [e.uid for e in book.entries if e.disable] == [15] and by_key["16"].disable
    assert {e.selective_logic for e in book.entries} == {SelectiveLogic.AND_ANY}
    assert {e.position for e in book.entries} == {Position.BEFORE_CHAR}
    for e in book.entries:
        v2 = {"keys", "secondary_keys", "id", "enabled", "insertion_order", "priority", "case_sensitive", "name",
              "extensions"}
        assert v2 <= e.extra.keys()  # V2 fields survive for export
        assert (e.extra["keys"], e.extra["id"], e.extra["enabled"]) == (e.key, e.uid, not e.disable)
        assert e.case_sensitive is None  # the V2 `case_sensitive` does not override the (absent) ST field
        assert e.character_filter is None  # characterFilter: null


def test_hogwarts_agnai_memory(corpus_dir: Path) -> None:
    raw = json.loads((corpus_dir / "worldbooks" / "hogwarts_agnai_memory.json").read_text(encoding="utf-8"))
    book = load_book(corpus_dir, "hogwarts_agnai_memory.json")
    assert (book.name, book.source_format, len(book.entries)) == ("Hogwarts Legacy Lore", "agnai", 4)
    assert (book.scan_depth, book.token_budget, book.recursive_scanning) == (50, 500, False)
    assert [e.uid for e in book.entries] == [0, 1, 2, 3]  # convertAgnaiMemoryBook: uid = index
    assert not any(e.constant for e in book.entries)
    for e, src in zip(book.entries, raw["entries"], strict=True):
        assert e.key == src["keywords"] and e.content == src["entry"]
        assert (e.comment, e.order, e.disable, e.selective) == (src["name"], src["weight"], False, False)
        # The file's entries say position 1 (FACTS), but ST 1.18 convertAgnaiMemoryBook
        # (world-info.js, digest §b.1) always writes position 0; we follow ST and keep theirs in extra.
        assert e.position == Position.BEFORE_CHAR
        assert e.extra["agnai"]["position"] == 1
    assert book.extra == {"agnai": {"kind": "memory", "is_creation": False, "extensions": {}}}


# --- corpus: embedded card books (digest §b.7 convertCharacterBook) -------------------------------------


def test_ai_v3_card_book(corpus_dir: Path) -> None:
    book = card_book(corpus_dir, "ai_v3_with_book.json")
    assert (book.name, book.source_format, len(book.entries)) == ("爱", "card", 27)
    assert [e.uid for e in book.entries] == list(range(27))
    assert [e.uid for e in book.entries if e.constant] == [0, 1, 21, 22, 23, 24, 25, 26]
    assert [e.uid for e in book.entries if e.disable] == [23]
    assert Counter(e.position for e in book.entries) == {
        Position.BEFORE_CHAR: 8, Position.AFTER_CHAR: 14, Position.AT_DEPTH: 5,
    }
    assert Counter(e.selective for e in book.entries) == {False: 8, True: 19}
    assert {e.selective_logic for e in book.entries} == {SelectiveLogic.AND_ANY}
    assert all(e.keysecondary == [] for e in book.entries)
    exported = to_character_book(book)
    assert Counter(e["position"] for e in exported["entries"]) == {"before_char": 8, "after_char": 19}
    assert Counter(e["extensions"]["position"] for e in exported["entries"]) == {0: 8, 1: 14, 4: 5}
    assert {e["use_regex"] for e in exported["entries"]} == {True}
    assert [e["id"] for e in exported["entries"] if not e["enabled"]] == [23]


def test_seraphina_card_book(corpus_dir: Path) -> None:
    book = card_book(corpus_dir, "seraphina_chara_ccv3.png")
    assert (book.name, len(book.entries)) == ("Eldoria", 4)
    assert {e.position for e in book.entries} == {Position.BEFORE_CHAR}
    assert not any(e.constant for e in book.entries)
    assert {e.selective_logic for e in book.entries} == {SelectiveLogic.AND_ANY}
    assert all(e.selective for e in book.entries)
    # Same lore as the ST World Info file; the card book carries the 1.18 fields in extensions.
    staging = load_book(corpus_dir, "eldoria_st_staging.json")
    assert [(e.uid, e.key, e.comment, e.content) for e in book.entries] == [
        (e.uid, e.key, e.comment, e.content) for e in staging.entries
    ]


# --- round trips --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BOOKS)
def test_st_json_round_trip_corpus_books(corpus_dir: Path, name: str) -> None:
    book = load_book(corpus_dir, name)
    exported = to_st_json(book)
    for uid, entry in exported["entries"].items():
        assert ST_118_FIELDS <= entry.keys()
        assert uid == str(entry["uid"])
    again = reparse_st(book)
    assert dataclasses.replace(again, source_format=book.source_format) == book
    assert again.source_format == ("st+v2" if book.source_format == "st+v2" else "st")


@pytest.mark.parametrize("name", CARDS)
def test_card_books_round_trip(corpus_dir: Path, name: str) -> None:
    book = card_book(corpus_dir, name)
    again = reparse_st(book)
    assert dataclasses.replace(again, source_format="card") == book
    v2 = json.loads(json.dumps(to_character_book(book), ensure_ascii=False))
    assert from_character_book(v2, name, "ignored") == book


def test_honkai_export_keeps_v2_fields(corpus_dir: Path) -> None:
    exported = to_st_json(load_book(corpus_dir, "honkai_chub_st_hybrid.json"))
    assert list(exported["entries"]) == [str(n) for n in range(34)]  # keyed by uid, as ST writes
    entry = exported["entries"]["13"]
    assert (entry["constant"], entry["keys"], entry["id"], entry["insertion_order"]) == (
        True, entry["key"], 13, 100
    )
    assert (exported["name"], exported["scan_depth"], exported["token_budget"]) == ("Honkai Impact RPG", 50, 500)


def test_to_character_book_shape(corpus_dir: Path) -> None:
    book = load_book(corpus_dir, "eldoria_st_staging.json")
    v2 = to_character_book(book)
    assert (v2["name"], v2["extensions"]) == ("eldoria_st_staging", {})
    entry = v2["entries"][0]
    assert {"id", "keys", "secondary_keys", "comment", "content", "constant", "selective", "insertion_order",
            "enabled", "position", "use_regex", "extensions"} <= entry.keys()
    assert (entry["id"], entry["position"], entry["enabled"], entry["use_regex"]) == (0, "before_char", True, True)
    ext = entry["extensions"]
    assert (ext["position"], ext["depth"], ext["useProbability"], ext["selectiveLogic"]) == (0, 4, True, 0)
    assert "use_probability" not in ext and "selective_logic" not in ext  # the two camelCase exceptions
    again = from_character_book(v2, "x.png", "Seraphina")
    assert [(e.key, e.content, e.position, e.depth) for e in again.entries] == [
        (e.key, e.content, e.position, e.depth) for e in book.entries
    ]


def test_card_round_trip_keeps_unknown_fields() -> None:
    cb = {
        "name": "Relics", "extensions": {"chub": {"id": 7}}, "priority_mode": "x",
        "entries": [
            {"id": "relic-1", "keys": ["relic"], "content": "c", "enabled": True, "insertion_order": 5,
             "position": "after_char", "use_regex": False, "priority": 3, "name": "n", "case_sensitive": True,
             "extensions": {"depth": 2, "custom": {"a": 1}}},
        ],
    }
    book = from_character_book(cb, "c.png", "Zed")
    entry = book.entries[0]
    assert (entry.uid, entry.position, entry.depth, entry.order) == ("relic-1", Position.AFTER_CHAR, 2, 5)
    assert entry.extra == {"priority": 3, "name": "n", "case_sensitive": True, "use_regex": False,
                           "extensions": {"custom": {"a": 1}}}
    assert book.extra == {"extensions": {"chub": {"id": 7}}, "priority_mode": "x"}
    exported = to_character_book(book)
    assert exported["entries"][0]["use_regex"] is False
    assert exported["entries"][0]["extensions"]["custom"] == {"a": 1}
    assert from_character_book(exported, "c.png", "Zed") == book
    assert dataclasses.replace(reparse_st(book), source_format="card") == book


# --- convertCharacterBook details ---------------------------------------------------------------------------


def test_character_book_st_rules() -> None:
    cb = {"entries": [
        {"keys": ["a"], "content": "x", "enabled": True},  # no id → index; no position → after_char (1)
        {"id": 7, "keys": "b, c ", "content": "y", "position": "before_char", "comment": "memo"},  # enabled absent
        {"keys": [], "content": "z", "enabled": True, "constant": True,
         "extensions": {"position": 4, "delay_until_recursion": True, "role": None, "useProbability": False,
                        "selectiveLogic": 3, "match_whole_words": None, "display_index": 9}},
    ]}
    book = from_character_book(cb, "card.png", "Zed")
    assert book.name == "Zed's Lorebook"  # ST importEmbeddedWorldInfo
    first, second, third = book.entries
    assert [e.uid for e in book.entries] == [0, 7, 2]
    assert (first.position, first.selective, first.add_memo, first.display_index) == (
        Position.AFTER_CHAR, False, False, 0
    )
    assert second.key == ["b", "c"] and second.position == Position.BEFORE_CHAR and second.add_memo
    assert second.disable is True  # `disable: !entry.enabled` with enabled absent
    assert (third.position, third.delay_until_recursion, third.role) == (Position.AT_DEPTH, 1, Role.SYSTEM)
    assert (third.use_probability, third.selective_logic) == (False, SelectiveLogic.AND_ALL)
    assert (third.match_whole_words, third.display_index, third.constant) == (None, 9, True)


# --- foreign formats (inline) -------------------------------------------------------------------------------


def test_novelai_lorebook() -> None:
    book = parse({
        "lorebookVersion": 5, "settings": {"order": []}, "categories": [],
        "entries": [
            {"text": "A dragon.", "displayName": "Dragon", "keys": ["dragon", "wyrm"], "enabled": True,
             "id": "u-1", "forceActivation": False,
             "contextConfig": {"prefix": "", "suffix": "\n", "budgetPriority": 400, "insertionPosition": -1}},
            {"text": "A knight.", "displayName": "  ", "keys": ["knight"], "enabled": False},
        ],
    }, "dragons.lorebook")
    assert (book.name, book.source_format) == ("dragons", "novelai")
    dragon, knight = book.entries
    assert [e.uid for e in book.entries] == [0, 1]
    assert (dragon.key, dragon.content, dragon.comment, dragon.order) == (
        ["dragon", "wyrm"], "A dragon.", "Dragon", 400
    )
    assert (dragon.disable, dragon.add_memo, dragon.selective, dragon.position) == (
        False, True, False, Position.BEFORE_CHAR
    )
    assert knight.order == 0  # budgetPriority ?? 0
    assert (knight.disable, knight.add_memo) == (True, False)
    assert dragon.extra["novelai"]["contextConfig"]["insertionPosition"] == -1
    assert book.extra["novelai"]["lorebookVersion"] == 5
    assert dataclasses.replace(reparse_st(book), source_format="novelai") == book


def test_risu_lorebook() -> None:
    book = parse({"type": "risu", "ver": 1, "data": [
        {"key": "sword, blade ", "secondkey": "", "comment": "Sword", "content": "A sword.", "mode": "normal",
         "insertorder": 200, "alwaysActive": False, "selective": False, "activationPercent": 50},
        {"key": "castle", "secondkey": "king,queen", "comment": "", "content": "Castle.", "insertorder": 100,
         "alwaysActive": True, "selective": True},
        {"key": "gate", "content": "Gate.", "activationPercent": 0},
    ]}, "risu.json")
    sword, castle, gate = book.entries
    assert book.source_format == "risu"
    assert (sword.key, sword.keysecondary, sword.order, sword.probability) == (["sword", "blade"], [], 200, 50)
    assert (castle.keysecondary, castle.constant, castle.selective, castle.probability) == (
        ["king", "queen"], True, True, 100
    )
    assert {e.position for e in book.entries} == {Position.BEFORE_CHAR}
    assert all(e.add_memo and not e.disable for e in book.entries)
    assert (sword.use_probability, castle.use_probability) == (True, True)
    assert gate.use_probability is False  # JS `activationPercent ?? true` with 0 → falsy
    assert sword.extra == {"risu": {"mode": "normal"}}
    assert book.extra == {"risu": {"type": "risu", "ver": 1}}


def test_lorebook_v3_standalone() -> None:
    book = parse({"spec": "lorebook_v3", "data": {
        "name": "Relics", "description": "Old things.", "scan_depth": 3, "token_budget": 200,
        "recursive_scanning": True, "extensions": {},
        "entries": [{"id": "relic-1", "keys": ["/rel+ic/i"], "content": "c", "enabled": True, "insertion_order": 5,
                     "use_regex": True, "constant": False, "comment": "r", "position": "before_char",
                     "extensions": {}}],
    }}, "relics.json")
    assert (book.name, book.source_format, book.description) == ("Relics", "lorebook_v3", "Old things.")
    assert (book.scan_depth, book.token_budget, book.recursive_scanning) == (3, 200, True)
    assert book.extra == {}
    (entry,) = book.entries
    assert (entry.uid, entry.key, entry.order, entry.position) == (
        "relic-1", ["/rel+ic/i"], 5, Position.BEFORE_CHAR
    )


def test_agnai_keys_and_content_fallbacks() -> None:
    book = parse({"kind": "memory", "entries": [{"keys": ["k"], "content": "v", "name": "n", "weight": 3,
                                                 "enabled": True}]})
    (entry,) = book.entries
    assert (entry.key, entry.content, entry.comment, entry.order, entry.add_memo) == (["k"], "v", "n", 3, True)
    assert book.name == "test_book"


def test_bare_v2_character_book_file() -> None:
    book = parse({"name": "Bare", "entries": [{"keys": ["x"], "content": "y", "enabled": True,
                                               "insertion_order": 9, "extensions": {"position": 4}}]})
    assert (book.name, book.source_format) == ("Bare", "card")
    assert (book.entries[0].order, book.entries[0].position) == (9, Position.AT_DEPTH)


# --- ST coercion rules --------------------------------------------------------------------------------------


def test_st_value_coercion() -> None:
    book = parse("\ufeff" + json.dumps({"entries": {
        "0": {"uid": 0, "key": "alpha, beta ,", "content": "x", "order": "50", "position": "4", "depth": "2",
              "probability": "25.5", "delayUntilRecursion": True, "role": None, "caseSensitive": None,
              "sticky": "3", "scanDepth": "", "characterFilter": {"isExclude": True, "names": ["bob.png"]},
              "triggers": ["normal"], "custom": {"x": 1}},
        "5": {"content": "no uid: the key is used", "delayUntilRecursion": 2, "role": "assistant",
              "selectiveLogic": 2, "matchWholeWords": False},
    }}))
    a, b = book.entries
    assert (a.key, a.order, a.position, a.depth, a.probability) == (
        ["alpha", "beta"], 50, Position.AT_DEPTH, 2, 25.5
    )
    assert (a.delay_until_recursion, a.role, a.case_sensitive, a.sticky, a.scan_depth) == (
        1, Role.SYSTEM, None, 3, None
    )
    assert a.character_filter == CharacterFilter(is_exclude=True, names=["bob.png"], tags=[])
    assert (a.triggers, a.extra) == (["normal"], {"custom": {"x": 1}})
    assert (b.uid, b.delay_until_recursion, b.role, b.selective_logic) == (
        5, 2, Role.ASSISTANT, SelectiveLogic.NOT_ANY
    )
    assert b.match_whole_words is False and b.key == []
    assert reparse_st(book) == book


def test_st_dict_key_is_the_uid_when_uid_is_missing() -> None:
    book = parse({"entries": {"0": {"key": ["a"]}, "7": {"key": ["b"]}, "x-1": {"key": ["c"]}}})
    assert [e.uid for e in book.entries] == [0, 7, "x-1"]


def test_st_list_entries_use_uid_or_index() -> None:
    book = parse({"entries": [{"uid": 10, "key": ["a"]}, {"key": ["b"]}]})
    assert [e.uid for e in book.entries] == [10, 1]
    assert book.source_format == "st"


def test_empty_book_and_name_from_file() -> None:
    book = parse({"entries": {}, "originalData": {"entries": []}}, "dir/My Lore.json")
    assert (book.name, book.entries, book.extra) == ("My Lore", [], {"originalData": {"entries": []}})


# --- errors -------------------------------------------------------------------------------------------------


def test_error_not_json() -> None:
    err = raises('{"entries": {\n  "0": {"key": [}\n}')
    assert err.field == "" and "not JSON" in err.reason and "line 2 column" in err.reason


@pytest.mark.parametrize(("data", "reason"), [
    (b"", "file is empty"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[1, 2]", "top level is a list, not an object"),
])
def test_error_whole_file(data: bytes, reason: str) -> None:
    err = raises(data)
    assert reason in err.reason and err.field == ""


def test_error_card_and_preset_files(corpus_dir: Path) -> None:
    card = raises((corpus_dir / "cards" / "ai_v3_with_book.json").read_bytes(), "ai.json")
    assert card.reason == "this is a character card file, not a world book"
    preset = raises((corpus_dir / "presets" / "st_openai_default_staging.json").read_bytes(), "p.json")
    assert preset.reason == "this is a chat-completion preset file, not a world book"
    png = raises((corpus_dir / "cards" / "seraphina_chara_ccv3.png").read_bytes(), "s.png")
    assert "PNG" in png.reason and "not a world book" in png.reason


def test_error_no_entries_and_bad_container() -> None:
    err = raises({"name": "x"})
    assert (err.field, "no entries" in err.reason) == ("entries", True)
    err = raises({"entries": "nope"})
    assert err.field == "entries" and "string, not an object or a list" in err.reason
    err = raises({"kind": "memory", "name": "x"})
    assert err.field == "entries"


@pytest.mark.parametrize(("entries", "field", "reason"), [
    ({"0": {"key": ["a"]}, "3": [1]}, 'entries["3"]', "entry is a list, not an object"),
    ({"3": {"key": {"a": 1}}}, 'entries["3"].key', "must be a list of keys or a comma-separated string"),
    ({"3": {"key": ["a", 5]}}, 'entries["3"].key', "key 1 is a number, not a string"),
    ([{"key": ["a"]}, {"key": ["b"]}, {"key": ["c"], "content": 12}], "entries[2].content", "must be a string"),
    ({"1": {"position": "top"}}, 'entries["1"].position', "must be a number"),
    ({"1": {"position": 9}}, 'entries["1"].position', "must be 0-7"),
    ({"1": {"order": "first"}}, 'entries["1"].order', "must be a number"),
    ({"1": {"probability": [50]}}, 'entries["1"].probability', "must be a number"),
    ({"1": {"depth": "deep"}}, 'entries["1"].depth', "must be a number"),
    ({"1": {"selectiveLogic": 4}}, 'entries["1"].selectiveLogic', "must be 0-3"),
    ({"1": {"role": 7}}, 'entries["1"].role', "must be 0-2"),
    ({"1": {"constant": "maybe"}}, 'entries["1"].constant', "must be true or false"),
])
def test_error_bad_entry(entries: object, field: str, reason: str) -> None:
    err = raises({"entries": entries})
    assert err.field == field
    assert reason in err.reason


def test_error_duplicate_uid_names_both() -> None:
    err = raises({"entries": {"a": {"uid": 5, "key": ["x"]}, "b": {"uid": "5", "key": ["y"]}}})
    assert err.field == 'entries["b"].uid'
    assert "duplicate uid 5" in err.reason and 'entries["a"]' in err.reason


def test_error_uses_source_field_names() -> None:
    assert raises({"type": "risu", "data": [{"key": 5}]}).field == "data[0].key"
    agnai = {"kind": "memory", "entries": [{"keywords": ["a"]}, {"keywords": 3}]}
    assert raises(agnai).field == "entries[1].keywords"
    novel = {"lorebookVersion": 5, "entries": [{"keys": [], "contextConfig": {"budgetPriority": "hi"}}]}
    assert raises(novel).field == "entries[0].contextConfig.budgetPriority"
    assert raises({"spec": "lorebook_v3", "data": []}).field == "data"
    err = raises({"spec": "lorebook_v3", "data": {"entries": [{"keys": [], "extensions": {"probability": "x"}}]}})
    assert err.field == "data.entries[0].extensions.probability"


def test_error_card_book() -> None:
    with pytest.raises(FormatError) as info:
        from_character_book({"entries": [{"keys": ["a"], "content": "x", "id": 1}, {"keys": ["b"], "id": 1}]},
                            "card.png", "Zed")
    assert (info.value.file, info.value.field) == ("card.png", "character_book.entries[1].id")
    with pytest.raises(FormatError) as info:
        from_character_book({"entries": [{"keys": "a", "extensions": []}]}, "card.png", "Zed")
    assert info.value.field == "character_book.entries[0].extensions"


def test_dict_entries_are_read_in_javascript_key_order() -> None:
    # SillyTavern iterates `entries` as a JS object: array-index keys ascending, then the others
    # in file order; ties in `order` are broken by that sequence (world-info.js getSortedEntries).
    from tavern_tui.formats.worldinfo import parse_world_book

    raw = {"entries": {"10": {"uid": 10, "key": ["a"]}, "b": {"uid": 20, "key": ["b"]}, "2": {"uid": 2, "key": ["c"]},
                       "a": {"uid": 30, "key": ["d"]}, "01": {"uid": 1, "key": ["e"]}}}
    book = parse_world_book(json.dumps(raw).encode(), "order.json")
    assert [e.uid for e in book.entries] == [2, 10, 20, 30, 1]
