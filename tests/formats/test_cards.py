"""Card import: corpus facts (shared/corpus/FACTS.md), broken files, PNG chunk writing."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections import Counter
from pathlib import Path

import pytest

from tavern_tui.errors import FormatError
from tavern_tui.formats.cards import ParsedCard, export_card_v2_json, parse_card
from tavern_tui.formats.png import (
    PNG_SIGNATURE,
    encode_chunk,
    encode_text_chunk,
    read_text_chunks,
    walk_chunks,
    write_card_chunks,
)

# Expected values, copied from shared/corpus/FACTS.md ("Key facts" table and per-file facts).
FACTS = {
    "seraphina_chara_ccv3.png": dict(
        name="Seraphina", spec="chara_card_v3", spec_version="3.0", container="png", chunk="ccv3",
        first_mes_len=785, book_entries=4, description_len=2851,
    ),
    "coding_sensei_v2.png": dict(
        name="Coding Sensei", spec="chara_card_v2", spec_version="2.0", container="png", chunk="chara",
        first_mes_len=140, book_entries=None, description_len=120,
    ),
    "capogpt_v2_pure.png": dict(
        name="CapoGPT", spec="chara_card_v2", spec_version="2.0", container="png", chunk="chara",
        first_mes_len=43, book_entries=None, description_len=1803,
    ),
    "shodan_v2_pure.png": dict(
        name="Shodan", spec="chara_card_v2", spec_version="2.0", container="png", chunk="chara",
        first_mes_len=1094, book_entries=None, description_len=2417,
    ),
    "skynet_v1_legacy.png": dict(
        name="Skynet", spec="chara_card_v1", spec_version="", container="png", chunk="chara",
        first_mes_len=30, book_entries=None, description_len=116,
    ),
    "ai_v3_with_book.json": dict(
        name="爱", spec="chara_card_v3", spec_version="3.0", container="json", chunk=None,
        first_mes_len=927, book_entries=27, description_len=0,
    ),
}
V2_FIELDS = (
    "name", "description", "personality", "scenario", "first_mes", "mes_example", "creator_notes",
    "system_prompt", "post_history_instructions", "alternate_greetings", "tags", "creator",
    "character_version", "extensions",
)


def load(corpus_dir: Path, name: str) -> ParsedCard:
    return parse_card((corpus_dir / "cards" / name).read_bytes(), name)


def tiny_png(*extra_chunks: bytes) -> bytes:
    """A valid 1x1 grey PNG with `extra_chunks` inserted between IDAT and IEND."""
    ihdr = encode_chunk("IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    idat = encode_chunk("IDAT", zlib.compress(b"\x00\x00"))
    return PNG_SIGNATURE + ihdr + idat + b"".join(extra_chunks) + encode_chunk("IEND", b"")


def chara_chunk(card: dict | str, keyword: str = "chara") -> bytes:
    text = card if isinstance(card, str) else json.dumps(card)
    return encode_text_chunk(keyword, base64.b64encode(text.encode("utf-8")))


def v2(**data) -> dict:
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Test", **data}}


def raises(data: bytes, file: str = "broken.card") -> FormatError:
    with pytest.raises(FormatError) as info:
        parse_card(data, file)
    assert info.value.file == file
    return info.value


# --- every corpus card ---------------------------------------------------------------


@pytest.mark.parametrize("file", sorted(FACTS))
def test_corpus_card_facts(corpus_dir: Path, file: str) -> None:
    facts = FACTS[file]
    card = load(corpus_dir, file)
    assert card.name == facts["name"]
    assert card.data["name"] == facts["name"]
    assert card.spec == facts["spec"]
    assert card.spec_version == facts["spec_version"]
    assert card.container == facts["container"]
    assert card.chunk == facts["chunk"]
    assert len(card.first_mes) == facts["first_mes_len"]
    assert len(card.description) == facts["description_len"]
    assert card.alternate_greetings == []
    assert card.greetings == [card.first_mes]
    if facts["book_entries"] is None:
        assert card.character_book is None
        assert "character_book" not in card.data
    else:
        assert len(card.character_book["entries"]) == facts["book_entries"]
    for field in V2_FIELDS:
        assert field in card.data, field
    assert card.warnings == ()


@pytest.mark.parametrize("file", sorted(FACTS))
def test_to_dict_from_dict_round_trip(corpus_dir: Path, file: str) -> None:
    card = load(corpus_dir, file)
    stored = json.loads(json.dumps(card.to_dict(), ensure_ascii=False))
    assert ParsedCard.from_dict(stored) == card


@pytest.mark.parametrize("file", sorted(FACTS))
def test_export_v2_reparses_to_equal_data(corpus_dir: Path, file: str) -> None:
    card = load(corpus_dir, file)
    exported = export_card_v2_json(card)
    assert exported["spec"] == "chara_card_v2"
    assert exported["spec_version"] == "2.0"
    again = parse_card(json.dumps(exported, ensure_ascii=False).encode("utf-8"), "export.json")
    assert again.spec == "chara_card_v2"
    assert again.data == card.data
    assert again.character_book == card.character_book


def test_seraphina_ccv3_wins_and_book(corpus_dir: Path) -> None:
    card = load(corpus_dir, "seraphina_chara_ccv3.png")
    assert (card.spec, card.chunk, card.raw["spec"]) == ("chara_card_v3", "ccv3", "chara_card_v3")
    book = card.character_book
    assert book["name"] == "Eldoria"
    assert len(book["entries"]) == 4
    assert not any(e["constant"] for e in book["entries"])
    assert {e["extensions"]["selectiveLogic"] for e in book["entries"]} == {0}
    assert {e["position"] for e in book["entries"]} == {"before_char"}
    assert card.data["creator"] == "OtisAlejandro"
    assert card.data["character_version"] == "1.0.0"
    assert card.data["group_only_greetings"] == []  # V3 field kept


def test_seraphina_chara_chunk_alone_is_v2(corpus_dir: Path) -> None:
    png = (corpus_dir / "cards" / "seraphina_chara_ccv3.png").read_bytes()
    texts, _ = read_text_chunks(png)
    assert [k for k, _ in texts] == ["chara", "ccv3"]
    chara_json = base64.b64decode(texts[0][1]).decode("utf-8")
    card = parse_card(write_card_chunks(png, chara_json, None), "chara-only.png")
    assert (card.name, card.spec, card.spec_version, card.chunk) == ("Seraphina", "chara_card_v2", "2.0", "chara")
    assert len(card.character_book["entries"]) == 4


def test_coding_sensei_tags_and_creator(corpus_dir: Path) -> None:
    card = load(corpus_dir, "coding_sensei_v2.png")
    assert card.data["tags"] == ["coding", "utility", "assistant"]
    assert card.data["creator"] == "RossAscends"
    assert card.data["character_version"] == "v1.010102"
    assert sorted(card.data["extensions"]) == ["depth_prompt", "fav", "talkativeness", "world"]
    # Hybrid export: the V1 mirror fields stay in raw, data is what we use.
    assert card.raw["name"] == "Coding Sensei" and "creatorcomment" in card.raw


def test_capogpt_pure_v2_with_77_idat(corpus_dir: Path) -> None:
    card = load(corpus_dir, "capogpt_v2_pure.png")
    assert card.data["creator"] == "Cow"
    assert sorted(card.raw) == ["data", "spec", "spec_version"]
    chunks = walk_chunks((corpus_dir / "cards" / "capogpt_v2_pure.png").read_bytes())
    types = [c.type for c in chunks]
    assert types.count("IDAT") == 77
    assert types.index("tEXt") < types.index("sRGB") < types.index("IDAT")


def test_shodan_extensions_only_chub(corpus_dir: Path) -> None:
    card = load(corpus_dir, "shodan_v2_pure.png")
    assert list(card.data["extensions"]) == ["chub"]
    assert len(card.mes_example) == 646
    assert card.data["creator"] == "" and card.data["character_version"] == ""


def test_skynet_v1_keeps_metadata(corpus_dir: Path) -> None:
    card = load(corpus_dir, "skynet_v1_legacy.png")
    assert card.spec == "chara_card_v1"
    assert "spec" not in card.raw and "alternate_greetings" not in card.raw
    assert sorted(card.raw) == sorted(
        ["name", "description", "personality", "scenario", "first_mes", "mes_example", "metadata"]
    )
    assert isinstance(card.raw["metadata"], dict)
    assert card.data["metadata"] == card.raw["metadata"]
    assert card.data["alternate_greetings"] == [] and card.data["tags"] == []
    assert card.data["extensions"] == {}
    assert card.data["creator"] == "" and card.system_prompt == "" and card.post_history_instructions == ""


def test_ai_v3_json_book_and_extensions(corpus_dir: Path) -> None:
    card = load(corpus_dir, "ai_v3_with_book.json")
    book = card.character_book
    assert book["name"] == "爱"
    entries = book["entries"]
    assert sorted(e["id"] for e in entries if e["constant"]) == [0, 1, 21, 22, 23, 24, 25, 26]
    assert [e["id"] for e in entries if e["enabled"] is False] == [23]
    assert Counter(e["position"] for e in entries) == {"before_char": 8, "after_char": 19}
    assert Counter(e["extensions"]["position"] for e in entries) == {0: 8, 1: 14, 4: 5}
    assert sorted(card.data["extensions"]) == [
        "depth_prompt", "fav", "regex_scripts", "talkativeness", "tavern_helper", "world",
    ]
    assert card.data["extensions"] == card.raw["data"]["extensions"]
    assert card.data["character_version"] == "1.0"


# --- broken and unusual files ----------------------------------------------------------


def test_empty_file() -> None:
    assert "empty" in raises(b"", "empty.png").reason


def test_not_png_or_json() -> None:
    err = raises(b"GIF89a\x01\x00\x01\x00garbage", "cat.gif")
    assert "not a PNG or JSON card" in err.reason and err.field == ""


def test_broken_json_reports_position() -> None:
    err = raises(b'{"name": "x",\n  "description": }', "card.json")
    assert err.reason.startswith("a JSON file that does not parse:") and "line 2" in err.reason
    assert "cut short" not in err.reason


def test_a_json_card_cut_short_says_so(corpus_dir: Path) -> None:
    # A trial cut ai_v3_with_book.json at 700 bytes: "not a PNG or JSON card" said nothing of why.
    whole = (corpus_dir / "cards" / "ai_v3_with_book.json").read_bytes()
    err = raises(whole[:700], "trunc.json")
    assert err.reason.startswith("a JSON file that")
    assert "cut short" in err.reason
    text = whole.decode("utf-8")
    cut = text[: len(text) // 2].encode("utf-8")  # cut between characters: the JSON ends early
    err = raises(cut, "half.json")
    assert err.reason.startswith("a JSON file that does not parse:") and "cut short" in err.reason


def test_png_without_card_chunk(corpus_dir: Path) -> None:
    png = (corpus_dir / "cards" / "coding_sensei_v2.png").read_bytes()
    stripped = write_card_chunks(png, None, None)
    assert read_text_chunks(stripped)[0] == []
    assert "no character card chunk" in raises(stripped, "plain.png").reason


def test_bad_base64() -> None:
    err = raises(tiny_png(encode_text_chunk("chara", b"!!not*base64!!")), "b64.png")
    assert err.field == "chara" and "base64" in err.reason


def test_base64_of_non_json() -> None:
    err = raises(tiny_png(chara_chunk("this is { not json")), "text.png")
    assert err.field == "chara" and "not JSON" in err.reason and "line 1 column 1" in err.reason


def test_chunk_json_not_object() -> None:
    err = raises(tiny_png(chara_chunk("[1, 2]", "ccv3")), "list.png")
    assert err.field == "ccv3" and "not an object" in err.reason


def test_json_top_level_not_object() -> None:
    err = raises(b'["Seraphina"]', "list.json")
    assert "not an object" in err.reason


def test_v1_without_name() -> None:
    err = raises(json.dumps({"description": "no name"}).encode(), "noname.json")
    assert err.field == "name"


def test_v2_empty_name() -> None:
    err = raises(json.dumps(v2(name="  ")).encode(), "blank.json")
    assert err.field == "data.name" and "empty" in err.reason


def test_v2_data_not_object() -> None:
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "name": "Top", "data": "oops"}
    err = raises(json.dumps(card).encode(), "data.json")
    assert err.field == "data"


def test_unknown_spec() -> None:
    card = {"spec": "chara_card_v9", "data": {"name": "X"}}
    err = raises(json.dumps(card).encode(), "v9.json")
    assert err.field == "spec" and "chara_card_v9" in err.reason


def test_truncated_png(corpus_dir: Path) -> None:
    png = (corpus_dir / "cards" / "shodan_v2_pure.png").read_bytes()
    err = raises(png[: len(png) // 2], "half.png")
    assert err.field.startswith("IDAT chunk #") and "truncated" in err.reason


def test_png_without_iend() -> None:
    png = tiny_png(chara_chunk(v2()))
    err = raises(png[:-12], "noend.png")
    assert err.field == "IEND"


def test_garbled_chunk_type() -> None:
    png = bytearray(tiny_png(chara_chunk(v2())))
    png[12:16] = b"\x00\x01\x02\x03"  # the IHDR type field
    err = raises(bytes(png), "garbled.png")
    assert err.field == "chunk #1" and "invalid chunk type" in err.reason


def test_character_book_null_means_no_book() -> None:
    card = parse_card(json.dumps(v2(character_book=None)).encode(), "null.json")
    assert card.character_book is None and "character_book" not in card.data
    assert card.warnings == ()


# (an entries object map is read: tests/formats/test_card_containers.py)
@pytest.mark.parametrize("book", [[], {"name": "no entries"}, {"entries": "0"}, "book"])
def test_character_book_malformed(book: object) -> None:
    err = raises(json.dumps(v2(character_book=book)).encode(), "book.json")
    assert err.field == "data.character_book"


def test_alternate_greetings_not_a_list() -> None:
    card = parse_card(json.dumps(v2(first_mes="Hello", alternate_greetings="hi")).encode(), "ag.json")
    assert card.alternate_greetings == []
    assert card.greetings == ["Hello"]
    assert any("alternate_greetings" in w for w in card.warnings)


def test_alternate_greetings_non_strings_dropped() -> None:
    card = parse_card(json.dumps(v2(alternate_greetings=["a", 3, None, "b"])).encode(), "ag.json")
    assert card.alternate_greetings == ["a", "b"]
    assert card.greetings == ["", "a", "b"]  # an empty first_mes is not skipped
    assert any("alternate_greetings" in w and "2" in w for w in card.warnings)


def test_tags_not_a_list() -> None:
    card = parse_card(json.dumps(v2(tags="a, b")).encode(), "tags.json")
    assert card.data["tags"] == [] and any("tags" in w for w in card.warnings)


def test_hybrid_data_wins_and_unknown_keys_kept() -> None:
    card = {"name": "Old", "first_mes": "old hi", **v2(name="New", first_mes="new hi", avatar="none",
                                                        extensions={"x_custom": {"a": 1}})}
    parsed = parse_card(json.dumps(card).encode(), "hybrid.json")
    assert (parsed.name, parsed.first_mes) == ("New", "new hi")
    assert parsed.data["avatar"] == "none"
    assert parsed.data["extensions"] == {"x_custom": {"a": 1}}


def test_v1_creatorcomment_and_talkativeness() -> None:
    card = {"name": "Old", "first_mes": "hi", "creatorcomment": "notes", "talkativeness": "0.7"}
    parsed = parse_card(json.dumps(card).encode(), "v1.json")
    assert parsed.spec == "chara_card_v1"
    assert parsed.data["creator_notes"] == "notes"
    assert parsed.data["extensions"] == {"talkativeness": "0.7"}
    assert "creatorcomment" not in parsed.data and "talkativeness" not in parsed.data


def test_v3_future_version_warns() -> None:
    card = {"spec": "chara_card_v3", "spec_version": "4.0", "data": {"name": "Future"}}
    parsed = parse_card(json.dumps(card).encode(), "v4.json")
    assert parsed.spec == "chara_card_v3" and parsed.spec_version == "4.0"
    assert any("4.0" in w for w in parsed.warnings)


def test_json_with_bom() -> None:
    parsed = parse_card(b"\xef\xbb\xbf" + json.dumps(v2(name="Bom")).encode(), "bom.json")
    assert parsed.name == "Bom" and parsed.container == "json" and parsed.chunk is None


def test_keyword_case_insensitive() -> None:
    parsed = parse_card(tiny_png(chara_chunk(v2(name="Caps"), "Chara")), "caps.png")
    assert parsed.name == "Caps" and parsed.chunk == "chara"


def test_broken_ccv3_falls_back_to_chara() -> None:
    png = tiny_png(chara_chunk(v2(name="Fallback")), encode_text_chunk("ccv3", b"%%%"))
    parsed = parse_card(png, "fallback.png")
    assert parsed.name == "Fallback" and parsed.chunk == "chara"
    assert any("ccv3" in w for w in parsed.warnings)


def test_text_crc_mismatch_is_a_warning() -> None:
    chunk = bytearray(chara_chunk(v2(name="Crc")))
    chunk[-1] ^= 0xFF
    parsed = parse_card(tiny_png(bytes(chunk)), "crc.png")
    assert parsed.name == "Crc"
    assert any("CRC" in w for w in parsed.warnings)


# --- writing -------------------------------------------------------------------------


@pytest.mark.parametrize("file", ["seraphina_chara_ccv3.png", "capogpt_v2_pure.png"])
def test_write_card_chunks_round_trip(corpus_dir: Path, file: str) -> None:
    png = (corpus_dir / "cards" / file).read_bytes()
    card = load(corpus_dir, file)
    new_data = {**card.data, "name": "Renamed", "alternate_greetings": ["Second hello"]}
    v2_json = json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": new_data})
    v3_json = json.dumps({"spec": "chara_card_v3", "spec_version": "3.0", "data": new_data})
    written = write_card_chunks(png, v2_json, v3_json)

    again = parse_card(written, "written.png")
    assert (again.spec, again.chunk, again.warnings) == ("chara_card_v3", "ccv3", ())
    assert again.data == new_data
    assert again.greetings == [card.first_mes, "Second hello"]

    before, after = walk_chunks(png), walk_chunks(written)
    assert all(c.crc_ok for c in after)
    assert [c.type for c in after[-3:]] == ["tEXt", "tEXt", "IEND"]
    texts, _ = read_text_chunks(written)
    assert [k for k, _ in texts] == ["chara", "ccv3"]
    # Image chunks are copied untouched, in order.
    assert [(c.type, c.data) for c in after if c.type != "tEXt"] == [
        (c.type, c.data) for c in before if c.type != "tEXt"
    ]


def test_write_removes_any_case_card_chunks() -> None:
    png = tiny_png(chara_chunk(v2(name="A"), "CHARA"), encode_text_chunk("Comment", b"keep me"))
    written = write_card_chunks(png, json.dumps(v2(name="B")), None)
    texts, _ = read_text_chunks(written)
    assert [k for k, _ in texts] == ["Comment", "chara"]
    assert parse_card(written, "w.png").name == "B"
