"""Damaged or hostile CHARX files give a one-line FormatError naming the file, never a traceback.

Reproduction: 82 of 300 fuzzed CHARX files (bad zip, 100,000-deep card.json, lone surrogates,
zlib errors) printed a raw traceback at import.
"""

from __future__ import annotations

import io
import json
import random
import zipfile

import pytest

from tavern_tui.errors import FormatError
from tavern_tui.formats.cards import parse_card

CARD = {"spec": "chara_card_v3", "spec_version": "3.0", "data": {"name": "Zip", "description": "d" * 300}}


def _charx(card_json: bytes, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        archive.writestr("card.json", card_json)
    return out.getvalue()


def _flip(data: bytes, offset: int) -> bytes:
    return data[:offset] + bytes([data[offset] ^ 0xFF]) + data[offset + 1:]


GOOD = _charx(json.dumps(CARD).encode())
_BODY = GOOD.index(b"card.json") + len("card.json")  # the compressed member data follows its local header name


@pytest.mark.parametrize(("data", "reason"), [
    (b"PK\x03\x04" + b"\x00" * 40, "not a readable CHARX (ZIP) archive: File is not a zip file"),
    (_charx(b"[" * 100_000 + b"]" * 100_000), "card.json: nested more than 100 levels deep (line 1)"),
    (_charx(b'{"spec": "chara_card_v2", "data": {"name": "\\ud800"}}'),
     "card.json.data.name: holds a lone UTF-16 surrogate"),
    (_flip(GOOD, _BODY + 3), "card.json cannot be read from the archive"),
    (_flip(_charx(json.dumps(CARD).encode(), zipfile.ZIP_STORED), _BODY + 5),
     "card.json cannot be read from the archive: Bad CRC-32 for file 'card.json'"),
], ids=["bad-zip", "deep", "surrogate", "deflate", "crc"])
def test_damaged_charx_is_a_one_line_format_error(data: bytes, reason: str) -> None:
    with pytest.raises(FormatError) as caught:
        parse_card(data, "bad.charx")
    message = str(caught.value)
    assert "bad.charx" in message and reason in message and "\n" not in message


def test_three_hundred_mutated_charx_files_parse_or_raise_format_error() -> None:
    rnd = random.Random(300)
    outcomes = {"parsed": 0, "refused": 0}
    for _ in range(300):
        data = bytearray(GOOD)
        for _ in range(rnd.randint(1, 8)):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        try:
            parse_card(bytes(data), "fuzz.charx")
            outcomes["parsed"] += 1
        except FormatError as exc:
            assert "fuzz.charx" in str(exc) and "\n" not in str(exc)
            outcomes["refused"] += 1
    assert outcomes["parsed"] + outcomes["refused"] == 300 and outcomes["refused"] > 0
