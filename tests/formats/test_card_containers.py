"""Cards beyond tEXt (issue 24 item 3), from files built here by hand: a card only in a `zTXt` or
a (compressed or plain) `iTXt` chunk (PNG spec 11.3.4.4 / 11.3.4.5), CHARX archives (Character
Card V3 "CHARX": `card.json` + assets, the main image the `icon` asset named `main` under an
`embeded://` URI) plain and behind a JPEG prefix, and a `character_book` whose `entries` is an
object map (read as a list in JavaScript's key order, every field kept)."""

from __future__ import annotations

import base64
import io
import json
import struct
import zipfile
import zlib
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.errors import FormatError
from tavern_tui.formats.cards import parse_card
from tavern_tui.formats.png import PNG_SIGNATURE, walk_chunks
from tavern_tui.service import Tavern

CARD = {"spec": "chara_card_v3", "spec_version": "3.0", "data": {
    "name": "Wren", "description": "Wren maps the caves under Old Hollow.", "personality": "Curious.",
    "scenario": "A lantern-lit tunnel.", "first_mes": "Mind the drop.", "mes_example": "",
    "creator_notes": "", "system_prompt": "", "post_history_instructions": "", "alternate_greetings": [],
    "tags": ["caves"], "creator": "test", "character_version": "1", "extensions": {"talkativeness": "0.5"},
    "group_only_greetings": [],
    "character_book": {"name": "Hollow", "extensions": {}, "entries": [
        {"keys": ["drop"], "content": "The drop is forty feet.", "extensions": {}, "enabled": True,
         "insertion_order": 10, "use_regex": False, "id": 0, "comment": "Drop"}]},
    "assets": [{"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main", "ext": "png"}],
}}


def chunk(ctype: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + ctype + data + struct.pack(">I", zlib.crc32(ctype + data))


def png_with(corpus_dir: Path, *extra: bytes) -> bytes:
    """A corpus card's PNG with its card text chunks removed and `extra` chunks put before IEND."""
    original = (corpus_dir / "cards" / "seraphina_chara_ccv3.png").read_bytes()
    kept = [original[c.start:c.end] for c in walk_chunks(original)
            if c.type not in ("tEXt", "zTXt", "iTXt", "IEND")]
    return PNG_SIGNATURE + b"".join(kept) + b"".join(extra) + chunk(b"IEND", b"")


def encoded(card: dict) -> bytes:
    return base64.b64encode(json.dumps(card).encode("utf-8"))


def test_a_card_only_in_ztxt_is_read(corpus_dir: Path) -> None:
    data = png_with(corpus_dir, chunk(b"zTXt", b"chara\x00\x00" + zlib.compress(encoded(CARD))))
    card = parse_card(data, "wren.png")
    assert card.name == "Wren" and card.data["description"] == CARD["data"]["description"]
    assert card.chunk == "chara" and card.container == "png"


@pytest.mark.parametrize("compressed", [True, False])
def test_a_card_only_in_itxt_is_read(corpus_dir: Path, compressed: bool) -> None:
    text = zlib.compress(encoded(CARD)) if compressed else encoded(CARD)
    flag = b"\x01\x00" if compressed else b"\x00\x00"
    data = png_with(corpus_dir, chunk(b"iTXt", b"ccv3\x00" + flag + b"en\x00ccv3\x00" + text))
    card = parse_card(data, "wren.png")
    assert card.name == "Wren" and card.chunk == "ccv3"
    assert card.data["character_book"]["entries"][0]["content"] == "The drop is forty feet."


def test_a_broken_compressed_card_chunk_names_the_chunk(corpus_dir: Path) -> None:
    data = png_with(corpus_dir, chunk(b"zTXt", b"chara\x00\x00not zlib at all"))
    with pytest.raises(FormatError) as info:
        parse_card(data, "bad.png")
    assert "zTXt chunk" in str(info.value) and "does not inflate" in str(info.value)


def charx(image: bytes, card: dict = CARD, *, prefix: bytes = b"") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("card.json", json.dumps(card))
        archive.writestr("assets/icon/images/main.png", image)
        archive.writestr("assets/other/notes.txt", "unused")
    return prefix + buffer.getvalue()


# The smallest JPEG-looking prefix: SOI, a JFIF APP0 segment, EOI (what a viewer shows is not our concern).
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"


@pytest.mark.parametrize("prefix", [b"", JPEG], ids=["plain", "jpeg-prefixed"])
def test_charx_imports_with_its_book_and_main_image(db_url: str, corpus_dir: Path, tmp_path: Path,
                                                    prefix: bytes) -> None:
    image = (corpus_dir / "cards" / "seraphina_chara_ccv3.png").read_bytes()
    path = tmp_path / "wren.charx"
    path.write_bytes(charx(image, prefix=prefix))
    service = Tavern(Settings(db_url=db_url))
    [result] = service.imports.import_paths([path])
    assert result.ok and result.name == "Wren", result.error
    view = service.library.character(result.id)
    assert view.book_entries == 1
    picture, kind = service.library.character_image(result.id)
    assert (picture, kind) == (image, "png")
    # The embedded book reaches world info like any card's.
    pid = service.playthroughs.new_playthrough(result.id, user_name="Ann").id
    fired = service.steps.world_info_preview(pid, "Is there a drop ahead?")
    assert [(e.book, e.content) for e in fired.activated] == [("Hollow", "The drop is forty feet.")]
    service.close()


def test_charx_without_card_json_is_refused_naming_it(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("character.json", "{}")
    with pytest.raises(FormatError) as info:
        parse_card(buffer.getvalue(), "x.charx")
    assert info.value.field == "card.json" and "x.charx" in str(info.value)


def test_object_map_entries_become_a_list_in_key_order_with_every_field() -> None:
    entries = {
        "10": {"keys": ["ten"], "content": "Ten.", "insertion_order": 1, "custom_field": {"a": 1}, "id": 10},
        "2": {"keys": ["two"], "content": "Two.", "insertion_order": 2, "id": 2, "extensions": {"position": 1}},
        "note": {"keys": ["n"], "content": "Named key.", "id": 99},
        "0": {"keys": ["zero"], "content": "Zero.", "id": 0},
    }
    card = {"spec": "chara_card_v2", "spec_version": "2.0",
            "data": {**CARD["data"], "character_book": {"name": "Map", "extensions": {}, "entries": entries}}}
    parsed = parse_card(json.dumps(card).encode("utf-8"), "map.json")
    # JavaScript enumerates integer keys ascending, then the rest in insertion order.
    assert parsed.data["character_book"]["entries"] == [entries["0"], entries["2"], entries["10"], entries["note"]]
    assert parsed.data["character_book"]["name"] == "Map"
    assert any("object" in w for w in parsed.warnings)
