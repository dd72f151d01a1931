"""Walks PNG chunks with the stdlib, reads tEXt chunks and rewrites the card chunks.

A PNG is the 8-byte signature followed by chunks of `length(4, big-endian) | type(4) |
data(length) | CRC-32(4, over type + data)`, ending with IEND (PNG spec, section 5).
Character cards live in `tEXt` chunks whose data is `keyword NUL text` (Latin-1).
SillyTavern reads and writes only `tEXt` (src/character-card-parser.js uses
png-chunks-extract + png-chunk-text); we go beyond it (issue 24) and also read a card stored in
`zTXt` (`keyword NUL method(0) zlib-data`, PNG spec 11.3.4.4) or `iTXt` (`keyword NUL flag method
language NUL translated-keyword NUL text`, UTF-8, zlib-compressed when flag is 1; 11.3.4.5).
Writing stays `tEXt` only, as SillyTavern writes.
"""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass

from tavern_tui.errors import FormatError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CARD_KEYWORDS = ("chara", "ccv3")

_MAX_CHUNK_LENGTH = 0x7FFFFFFF  # PNG spec 5.3: lengths above 2^31-1 are invalid


@dataclass(frozen=True)
class Chunk:
    """One PNG chunk as found in the file.

    Attributes:
        number: 1-based position in the file (the signature is not counted).
        type: four-letter chunk type, e.g. "IHDR", "tEXt", "IDAT".
        data: the chunk payload (without length, type and CRC).
        start: byte offset of the length field.
        end: byte offset just after the CRC.
        crc_ok: whether the stored CRC-32 matches type + data.
    """

    number: int
    type: str
    data: bytes
    start: int
    end: int
    crc_ok: bool

    @property
    def label(self) -> str:
        """Name used in error messages and warnings, e.g. "tEXt chunk #3"."""
        return f"{self.type} chunk #{self.number}"


def is_png(data: bytes) -> bool:
    """True when `data` starts with the 8-byte PNG signature."""
    return data[:8] == PNG_SIGNATURE


def walk_chunks(png: bytes, file: str = "<png>") -> list[Chunk]:
    """Return every chunk from the signature up to and including IEND, in file order.

    Bytes after IEND are not returned (png-chunks-extract also stops at IEND).
    CRCs are checked and reported in `Chunk.crc_ok`, never raised: the caller decides.

    Raises:
        FormatError(file, reason, field): bad signature (field ""); a chunk header or
            body that runs past the end of the file, a length above 2^31-1, a type that
            is not four ASCII letters (field names the chunk, e.g. "IDAT chunk #4");
            no IEND before the end of the file (field "IEND").
    """
    if not is_png(png):
        raise FormatError(file, "not a PNG file (bad signature)")
    chunks: list[Chunk] = []
    pos = len(PNG_SIGNATURE)
    size = len(png)
    while True:
        number = len(chunks) + 1
        if pos == size:
            raise FormatError(file, "file ends without an IEND chunk (truncated?)", "IEND")
        if pos + 8 > size:
            raise FormatError(file, f"chunk header truncated at byte {pos}", f"chunk #{number}")
        length, raw_type = struct.unpack_from(">I4s", png, pos)
        if not (raw_type.isascii() and raw_type.isalpha()):
            raise FormatError(
                file, f"invalid chunk type {raw_type!r} at byte {pos} (garbled file)", f"chunk #{number}"
            )
        ctype = raw_type.decode("ascii")
        label = f"{ctype} chunk #{number}"
        if length > _MAX_CHUNK_LENGTH:
            raise FormatError(file, f"chunk length {length} is out of range (garbled file)", label)
        end = pos + 12 + length
        if end > size:
            raise FormatError(
                file, f"chunk needs {length} data bytes but the file ends at byte {size} (truncated)", label
            )
        data = png[pos + 8 : pos + 8 + length]
        (stored_crc,) = struct.unpack_from(">I", png, pos + 8 + length)
        crc_ok = zlib.crc32(raw_type + data) == stored_crc
        chunks.append(Chunk(number, ctype, data, pos, end, crc_ok))
        pos = end
        if ctype == "IEND":
            return chunks


def split_text_chunk(data: bytes) -> tuple[str, bytes]:
    """Split tEXt chunk data into (keyword, text bytes).

    The keyword is Latin-1 (PNG spec 11.3.4.3). Like png-chunk-text's decode(), data
    without a NUL separator is all keyword and the text is empty.
    """
    keyword, _sep, text = data.partition(b"\x00")
    return keyword.decode("latin-1"), text


def read_text_chunks(png: bytes, file: str = "<png>") -> tuple[list[tuple[str, bytes]], list[str]]:
    """Return `([(keyword, text_bytes), ...], warnings)` for every tEXt chunk and every zTXt/iTXt
    chunk with a card keyword (chara, ccv3; inflated), in file order.

    Keywords are returned as stored; compare them with `.lower()` as SillyTavern does
    (src/character-card-parser.js read(): `chunk.keyword.toLowerCase() === 'ccv3'`).
    The chunk may sit anywhere (before IDAT, after IDAT, before sRGB...).

    Warnings (plain sentences) are returned, not raised, for: a tEXt chunk whose CRC
    does not match (its content is still returned; ST's reader would refuse the whole
    file, but the text is usually intact), a tEXt chunk without a keyword separator,
    and bytes after IEND.

    Raises:
        FormatError: as `walk_chunks` (bad signature, truncated or garbled chunks).
    """
    chunks = walk_chunks(png, file)
    texts: list[tuple[str, bytes]] = []
    warnings: list[str] = []
    for chunk in chunks:
        if chunk.type in ("zTXt", "iTXt"):
            found = _compressed_text(chunk, file)
            if found is not None:
                if not chunk.crc_ok:
                    warnings.append(f"{chunk.label}: CRC mismatch; the text was read anyway")
                texts.append(found)
            continue
        if chunk.type != "tEXt":
            continue
        if not chunk.crc_ok:
            warnings.append(f"{chunk.label}: CRC mismatch; the text was read anyway")
        if b"\x00" not in chunk.data:
            warnings.append(f"{chunk.label}: no keyword separator; read as a keyword with empty text")
        texts.append(split_text_chunk(chunk.data))
    trailing = len(png) - chunks[-1].end
    if trailing:
        warnings.append(f"{trailing} bytes after IEND were ignored")
    return texts, warnings


MAX_TEXT_BYTES = 64 * 1024 * 1024
"""Largest inflated zTXt/iTXt text read (a card with a big book is a few MB; a zlib bomb is not)."""


def _inflate(data: bytes, file: str, label: str) -> bytes:
    """zlib-inflate at most `MAX_TEXT_BYTES`. Raises FormatError naming the chunk."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, MAX_TEXT_BYTES)
    except zlib.error as exc:
        raise FormatError(file, f"compressed text does not inflate ({exc})", label) from exc
    if inflater.unconsumed_tail:
        raise FormatError(file, f"compressed text inflates past {MAX_TEXT_BYTES} bytes", label)
    return out


def _compressed_text(chunk: Chunk, file: str) -> tuple[str, bytes] | None:
    """(keyword, text bytes) of a zTXt or iTXt chunk; None for a keyword that is not a card's
    (their text is not inflated at all). iTXt text is UTF-8, returned as its bytes.

    Raises:
        FormatError: a card chunk with an unknown compression method or data that does not inflate.
    """
    keyword, sep, rest = chunk.data.partition(b"\x00")
    name = keyword.decode("latin-1")
    if not sep or name.lower() not in CARD_KEYWORDS:
        return None
    if chunk.type == "zTXt":
        if rest[:1] != b"\x00":
            raise FormatError(file, f"unknown compression method {rest[:1]!r}", chunk.label)
        return name, _inflate(rest[1:], file, chunk.label)
    flag, method, tail = rest[:1], rest[1:2], rest[2:]
    _language, _, tail = tail.partition(b"\x00")
    _translated, _, text = tail.partition(b"\x00")
    if flag == b"\x01":
        if method != b"\x00":
            raise FormatError(file, f"unknown compression method {method!r}", chunk.label)
        text = _inflate(text, file, chunk.label)
    return name, text


def encode_chunk(ctype: str, data: bytes) -> bytes:
    """Serialise one chunk: length, type, data and its CRC-32 (PNG spec 5.3)."""
    raw_type = ctype.encode("ascii")
    if len(raw_type) != 4:
        raise ValueError(f"chunk type must be 4 ASCII letters, got {ctype!r}")
    return struct.pack(">I", len(data)) + raw_type + data + struct.pack(">I", zlib.crc32(raw_type + data))


def encode_text_chunk(keyword: str, text: bytes) -> bytes:
    """Serialise a tEXt chunk `keyword NUL text` (keyword Latin-1, 1–79 bytes, PNG spec 11.3.4.3)."""
    raw_keyword = keyword.encode("latin-1")
    if not 1 <= len(raw_keyword) <= 79 or b"\x00" in raw_keyword:
        raise ValueError(f"invalid tEXt keyword {keyword!r}")
    return encode_chunk("tEXt", raw_keyword + b"\x00" + text)


def write_card_chunks(
    png: bytes, chara_json: str | None, ccv3_json: str | None, *, file: str = "<png>"
) -> bytes:
    """Return a copy of `png` whose character card chunks are replaced.

    Mirrors SillyTavern src/character-card-parser.js write(): every tEXt chunk whose
    keyword is `chara` or `ccv3` (case-insensitive) is removed, then `chara` and then
    `ccv3` are inserted right before IEND, each holding base64 of the UTF-8 JSON text.
    A `None` argument means "do not write that chunk" (None/None strips the card).
    Every other chunk is copied byte for byte; bytes after IEND are dropped, as
    png-chunks-encode does.

    Raises:
        FormatError: `png` is not a readable PNG (see `walk_chunks`).
    """
    chunks = walk_chunks(png, file)
    out = [PNG_SIGNATURE]
    for chunk in chunks:
        if chunk.type == "tEXt" and split_text_chunk(chunk.data)[0].lower() in CARD_KEYWORDS:
            continue
        if chunk.type == "IEND":
            for keyword, text in (("chara", chara_json), ("ccv3", ccv3_json)):
                if text is not None:
                    out.append(encode_text_chunk(keyword, base64.b64encode(text.encode("utf-8"))))
        out.append(png[chunk.start : chunk.end])
    return b"".join(out)


def solid_png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A `width`×`height` PNG of one colour (8-bit RGB, no interlace; PNG spec 11.2.2): the
    picture of a card exported as PNG when the card came without one (a JSON card)."""
    if width < 1 or height < 1:
        raise ValueError("a PNG needs at least one pixel")
    row = b"\x00" + bytes(rgb) * width  # filter type 0 (None) per scanline
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (PNG_SIGNATURE + encode_chunk("IHDR", header) + encode_chunk("IDAT", zlib.compress(row * height, 9))
            + encode_chunk("IEND", b""))
