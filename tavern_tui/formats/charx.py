"""Reads CHARX character files: a ZIP archive holding `card.json` (a V3 card) and its assets,
plain or behind a JPEG prefix (the archive appended to a picture, so viewers show the image).

Rules (Character Card V3 spec, "CHARX"): `card.json` at the archive root is the card; assets
are listed in `data.assets` as `{"type", "uri", "name", "ext"}` and an asset stored in the
archive has the URI `embeded://<path in the zip>` (the spec's spelling; `embedded://` is read
too); the main image is the `icon` asset named `main` (else the first `icon`). The embedded
lorebook is the card's own `data.character_book`. Python's `zipfile` finds the central directory
from the end, so a prefix (the JPEG) before the archive is allowed.

Limits keep a hostile archive from exhausting memory: `card.json` at most `MAX_CARD_BYTES`, an
image at most `MAX_IMAGE_BYTES` (sizes as the archive declares them, checked before reading and
enforced while reading). Pure: no I/O beyond the bytes given.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any

from tavern_tui.errors import FormatError
from tavern_tui.formats.jsontypes import loads_bounded

__all__ = ["CARD_MEMBER", "CharxCard", "MAX_CARD_BYTES", "MAX_IMAGE_BYTES", "charx_member", "is_charx",
           "read_charx"]

CARD_MEMBER = "card.json"
MAX_CARD_BYTES = 32 * 1024 * 1024
MAX_IMAGE_BYTES = 64 * 1024 * 1024
_URI_PREFIXES = ("embeded://", "embedded://")
_JPEG = b"\xff\xd8\xff"


@dataclass(frozen=True)
class CharxCard:
    """What a CHARX file holds.

    Attributes:
        obj: `card.json` decoded (the card object, not yet normalised).
        image: the main image as `{"path", "ext", "bytes", "sha256"}` (a member of the archive),
            None when the card names none that the archive holds.
        prefixed: the archive sat behind a JPEG prefix.
        warnings: plain sentences (an image named but absent, …).
    """

    obj: dict[str, Any]
    image: dict[str, Any] | None
    prefixed: bool
    warnings: tuple[str, ...] = ()


def is_charx(data: bytes) -> bool:
    """True for a ZIP archive (`PK\\x03\\x04` first) or a JPEG with an archive appended."""
    if data[:4] == b"PK\x03\x04":
        return True
    return data[:3] == _JPEG and b"PK\x05\x06" in data[-65557:] and zipfile.is_zipfile(io.BytesIO(data))


# What `zipfile` raises on a damaged member: bad CRC (BadZipFile), truncated (EOFError), bad deflate stream
# (zlib.error), unknown compression or encryption (NotImplementedError, RuntimeError), bad headers (ValueError).
_ARCHIVE_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError, RuntimeError,
                   OverflowError)


def _open_archive(data: bytes, file: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except _ARCHIVE_ERRORS as exc:
        raise FormatError(file, f"not a readable CHARX (ZIP) archive: {exc}") from None


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, file: str) -> bytes:
    if info.file_size > limit:
        raise FormatError(file, f"{info.filename} is {info.file_size} bytes, over the {limit}-byte limit",
                          info.filename)
    try:
        with archive.open(info) as member:
            data = member.read(limit + 1)
    except _ARCHIVE_ERRORS as exc:
        raise FormatError(file, f"{info.filename} cannot be read from the archive: {exc}", info.filename) from None
    if len(data) > limit:
        raise FormatError(file, f"{info.filename} inflates past the {limit}-byte limit", info.filename)
    return data


def _main_image(obj: dict[str, Any]) -> tuple[str, str] | None:
    """(path in the archive, ext) of the main icon named in `data.assets`, or None."""
    data = obj.get("data")
    assets = data.get("assets") if isinstance(data, dict) else None
    if not isinstance(assets, list):
        return None
    icons = [a for a in assets if isinstance(a, dict) and a.get("type") == "icon" and isinstance(a.get("uri"), str)]
    chosen = next((a for a in icons if a.get("name") == "main"), icons[0] if icons else None)
    if chosen is None:
        return None
    uri = str(chosen["uri"])
    prefix = next((p for p in _URI_PREFIXES if uri.startswith(p)), None)
    if prefix is None:
        return None  # ccdefault: / a URL: nothing inside the archive
    return uri[len(prefix):], str(chosen.get("ext") or uri.rsplit(".", 1)[-1]).lower()


def read_charx(data: bytes, file: str) -> CharxCard:
    """Read a CHARX file's card and the facts of its main image.

    Raises:
        FormatError(file, reason, field): not a readable ZIP archive (field ""); no `card.json`
            ("card.json"); `card.json` over the limit, not UTF-8 JSON or not an object
            ("card.json", also nested past `jsontypes.MAX_DEPTH` or holding a lone surrogate); a damaged
            member (bad CRC, bad deflate data, truncated, encrypted; field: its path); the main image over
            the limit (its path).
    """
    archive = _open_archive(data, file)
    warnings: list[str] = []
    with archive:
        members = {info.filename: info for info in archive.infolist() if not info.is_dir()}
        info = members.get(CARD_MEMBER)
        if info is None:
            raise FormatError(file, "CHARX archive without card.json at its root", CARD_MEMBER)
        raw = _read(archive, info, MAX_CARD_BYTES, file)
        try:  # bounded: depth, string and number sizes, lone surrogates (as a .json card is read)
            obj = loads_bounded(raw.decode("utf-8-sig"), file, CARD_MEMBER)
        except (UnicodeDecodeError, ValueError) as exc:
            raise FormatError(file, f"card.json is not UTF-8 JSON ({exc})", CARD_MEMBER) from None
        if not isinstance(obj, dict):
            raise FormatError(file, "card.json is not an object", CARD_MEMBER)
        image = None
        named = _main_image(obj)
        if named is not None:
            path, ext = named
            member = members.get(path)
            if member is None:
                warnings.append(f"the main image {path} is named in data.assets but not in the archive")
            else:
                body = _read(archive, member, MAX_IMAGE_BYTES, file)
                image = {"path": path, "ext": ext, "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    return CharxCard(obj, image, data[:4] != b"PK\x03\x04", tuple(warnings))


def charx_member(data: bytes, path: str, file: str = "<charx>") -> bytes:
    """One member of a CHARX archive (e.g. its main image), within `MAX_IMAGE_BYTES`.

    Raises:
        FormatError: not an archive, no such member, or over the limit.
    """
    archive = _open_archive(data, file)
    with archive:
        try:
            info = archive.getinfo(path)
        except KeyError:
            raise FormatError(file, "no such member in the archive", path) from None
        return _read(archive, info, MAX_IMAGE_BYTES, file)
