"""Parses SillyTavern character cards (V1/V2/V3, PNG or JSON) into one normalised shape.

Where things go in `ParsedCard.data` (always the V2 `data` layout):
- every V2 field is present (strings default to "", `alternate_greetings`/`tags` to [],
  `extensions` to {}); `character_book` is present only when the card has a book;
- V3-only fields (`group_only_greetings`, `assets`, `nickname`, ...) are kept when present;
- any other key of `data` (e.g. Chub's `avatar`) and everything inside `extensions`
  (`regex_scripts`, `tavern_helper`, `chub`, `depth_prompt`, ...) is kept verbatim;
- for a V1 card, the top-level object *is* the data: its non-standard keys (e.g. `metadata`)
  sit in `data` under their own names; `creatorcomment` becomes `creator_notes`, and
  `talkativeness`/`fav` move to `extensions` (SillyTavern convertToV2/charaFormatData).
The JSON exactly as found is kept in `ParsedCard.raw` (top-level V1 mirror fields included).
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
from dataclasses import dataclass

from tavern_tui.errors import FormatError
from tavern_tui.formats.charx import CARD_MEMBER, is_charx, read_charx
from tavern_tui.formats.jsontypes import json_error, loads_bounded, type_name
from tavern_tui.formats.png import is_png, read_text_chunks, write_card_chunks
from tavern_tui.formats.sniff import CARD, sniff_kind
from tavern_tui.formats.worldinfo import from_character_book

SPEC_V1 = "chara_card_v1"
SPEC_V2 = "chara_card_v2"
SPEC_V3 = "chara_card_v3"

# V2 `data` string fields, in spec order ([CCv2] spec_v2.md; ST TavernCardValidator.js).
V2_STRING_FIELDS = (
    "name", "description", "personality", "scenario", "first_mes", "mes_example",
    "creator_notes", "system_prompt", "post_history_instructions", "creator", "character_version",
)
V2_LIST_FIELDS = ("alternate_greetings", "tags")
# ST fills this placeholder into empty V1 creator notes; it carries no information.
_CREATOR_NOTES_PLACEHOLDER = "Creator's notes go here."


@dataclass(frozen=True)
class ParsedCard:
    """A character card read from a PNG or JSON file.

    Attributes:
        name: `data["name"]`, never empty.
        spec: "chara_card_v1" (no `spec` in the file), "chara_card_v2" or "chara_card_v3".
        spec_version: as found, as a string ("2.0", "3.0"); "" for V1 cards.
        data: normalised V2-layout dict (see the module docstring for what goes where).
        raw: the JSON object exactly as decoded from the file or chunk.
        container: "png", "json" or "charx" (a ZIP with card.json, maybe behind a JPEG).
        chunk: the PNG text chunk the card came from ("chara" or "ccv3"), "card.json" for a
            CHARX, None for JSON.
        image: a CHARX's main image inside the original file (`{"path", "ext", "bytes",
            "sha256"}`, `formats.charx`); None otherwise (a PNG card is its own image).
        warnings: plain sentences about tolerated defects (dropped fields, CRC mismatch...).
    """

    name: str
    spec: str
    spec_version: str
    data: dict
    raw: dict
    container: str
    chunk: str | None
    warnings: tuple[str, ...] = ()
    image: dict | None = None

    @property
    def description(self) -> str:
        """`data.description` ("" when the card has none)."""
        return self.data["description"]

    @property
    def personality(self) -> str:
        """`data.personality`."""
        return self.data["personality"]

    @property
    def scenario(self) -> str:
        """`data.scenario`."""
        return self.data["scenario"]

    @property
    def first_mes(self) -> str:
        """`data.first_mes`, the greeting shown when a chat starts."""
        return self.data["first_mes"]

    @property
    def mes_example(self) -> str:
        """`data.mes_example`, the raw example dialogue block."""
        return self.data["mes_example"]

    @property
    def system_prompt(self) -> str:
        """`data.system_prompt`; "" means "use the user's own main prompt" ([CCv2] spec_v2.md)."""
        return self.data["system_prompt"]

    @property
    def post_history_instructions(self) -> str:
        """`data.post_history_instructions`; "" means "use the user's own" ([CCv2] spec_v2.md)."""
        return self.data["post_history_instructions"]

    @property
    def alternate_greetings(self) -> list[str]:
        """A copy of `data.alternate_greetings` (strings only; [] when absent)."""
        return list(self.data["alternate_greetings"])

    @property
    def greetings(self) -> list[str]:
        """`[first_mes, *alternate_greetings]`, nothing skipped (the swipes of message 0, spec_v2)."""
        return [self.first_mes, *self.alternate_greetings]

    @property
    def character_book(self) -> dict | None:
        """The embedded lorebook `{..., "entries": [...]}`, or None when the card has none."""
        return self.data.get("character_book")

    def to_dict(self) -> dict:
        """Return a JSON-serialisable dict of every attribute (deep copies), for storage."""
        return {
            "name": self.name,
            "spec": self.spec,
            "spec_version": self.spec_version,
            "data": copy.deepcopy(self.data),
            "raw": copy.deepcopy(self.raw),
            "container": self.container,
            "chunk": self.chunk,
            "warnings": list(self.warnings),
            "image": copy.deepcopy(self.image),
        }

    @classmethod
    def from_dict(cls, stored: dict) -> ParsedCard:
        """Rebuild a card from `to_dict()` output.

        Raises:
            FormatError(file="<stored card>"): a key is missing or has the wrong type.
        """
        try:
            card = cls(
                name=str(stored["name"]),
                spec=str(stored["spec"]),
                spec_version=str(stored["spec_version"]),
                data=copy.deepcopy(stored["data"]),
                raw=copy.deepcopy(stored["raw"]),
                container=str(stored["container"]),
                chunk=stored["chunk"],
                warnings=tuple(stored.get("warnings", ())),
                image=copy.deepcopy(stored.get("image")),
            )
        except (KeyError, TypeError) as exc:
            raise FormatError("<stored card>", f"not a stored card: {exc!r}") from exc
        if not isinstance(card.data, dict) or not isinstance(card.raw, dict):
            raise FormatError("<stored card>", "data and raw must be objects")
        return card


def parse_card(data: bytes, file: str) -> ParsedCard:
    """Parse the bytes of a card file (PNG or JSON) into a `ParsedCard`.

    `file` names the file in errors. PNG is detected by its signature, anything else is
    read as UTF-8 JSON (a BOM is allowed).

    PNG: the `ccv3` tEXt chunk wins over `chara` (SillyTavern src/character-card-parser.js
    read(); [CCv3] "SHOULD"). Unlike ST, when `ccv3` does not decode (base64 → UTF-8 →
    JSON object) but `chara` does, `chara` is used and a warning says so.

    Spec detection (ST src/endpoints/characters.js importFromJson): `spec ==
    "chara_card_v3"` → V3, `"chara_card_v2"` → V2 (fields in `data`; top-level V1 mirror
    fields are ignored because `data` wins, as in readFromV2); no `spec` key → V1.

    Raises:
        FormatError(file, reason, field), with field:
            "" — empty file; "not a PNG or JSON card"; a JSON file that is not UTF-8 or does not
            parse (where, and whether the file looks cut short); JSON top level not an object;
            PNG structure errors — see `png.walk_chunks` (field names the chunk);
            "" with reason "no character card chunk" — PNG without chara/ccv3 tEXt;
            "chara"/"ccv3" — bad base64, not UTF-8, not JSON (with line/column), not an object;
            "spec" — unknown spec value; "data" — V2/V3 `data` missing or not an object;
            "name"/"data.name" — missing, empty or non-string name;
            "data.character_book" ("character_book" for V1) — present but not an object
            with an `entries` list; "data.<field>" — a string field holding a list/object,
            `extensions` not an object.
    """
    if not data.strip():
        raise FormatError(file, "file is empty")
    warnings: list[str] = []
    image = None
    if is_png(data):
        obj, chunk = _load_png(data, file, warnings)
        container = "png"
    elif is_charx(data):
        charx = read_charx(data, file)
        obj, chunk, container, image = charx.obj, CARD_MEMBER, "charx", charx.image
        warnings.extend(charx.warnings)
    else:
        obj, chunk = _load_json(data, file), None
        container = "json"
    spec, spec_version, normalised = _normalise(obj, file, chunk or "", warnings)
    warnings.extend(_book_key_warnings(normalised, file))
    return ParsedCard(
        name=normalised["name"],
        spec=spec,
        spec_version=spec_version,
        data=normalised,
        raw=obj,
        container=container,
        chunk=chunk,
        warnings=tuple(warnings),
        image=image,
    )


def export_card_v2_json(card: ParsedCard) -> dict:
    """Return `{"spec": "chara_card_v2", "spec_version": "2.0", "data": {...}}` for `card`.

    `data` is a deep copy of the normalised data: extensions (regex_scripts, depth_prompt,
    ...), the character_book and any unknown or V3-only keys are kept, as ST keeps
    unknown `data` keys on export ([CCv2]: extensions MUST survive import/export).
    `parse_card` on the JSON of this dict yields equal `data`.
    """
    return {"spec": SPEC_V2, "spec_version": "2.0", "data": copy.deepcopy(card.data)}


def export_card_st_json(card: ParsedCard, *, create_date: str = "") -> dict:
    """Return the card as SillyTavern writes one (format-digest §a.2 "hybrid" shape, [ST118]
    `charaFormatData`): `spec` "chara_card_v2", `spec_version` "2.0", the whole normalised `data`
    (extensions, character_book and unknown keys kept), and the V1 fields mirrored at the top
    level with ST's legacy keys (`creatorcomment`, `avatar` "none", `talkativeness`, `fav`,
    `tags`, `create_date`) for readers that know V1 only. Readers take `data` over the mirror
    (ST `readFromV2`), so `parse_card` on its JSON gives back equal `data`."""
    data = copy.deepcopy(card.data)
    ext = data.get("extensions") if isinstance(data.get("extensions"), dict) else {}
    out: dict = {field: data.get(field, "") for field in
                 ("name", "description", "personality", "scenario", "first_mes", "mes_example")}
    out.update({"creatorcomment": data.get("creator_notes", ""), "avatar": "none", "chat": "",
                "talkativeness": ext.get("talkativeness", 0.5), "fav": bool(ext.get("fav", False)),
                "tags": list(data.get("tags", [])), "create_date": create_date,
                "spec": SPEC_V2, "spec_version": "2.0", "data": data})
    return out


def export_card_v3_json(card: ParsedCard, *, modified: int) -> dict:
    """The `ccv3` chunk's card: SillyTavern's V2 JSON with `spec` "chara_card_v3" and
    `spec_version` "3.0" (format-digest §a.4 "ST write"), plus what [CCv3] requires of `data`:
    `group_only_greetings` (a list, [] when the card had none) and `modification_date` (Unix
    seconds, "set on export"). `modified` is that time."""
    out = export_card_st_json(card)
    out["spec"], out["spec_version"] = SPEC_V3, "3.0"
    data = out["data"]
    if not isinstance(data.get("group_only_greetings"), list):
        data["group_only_greetings"] = []
    data["modification_date"] = int(modified)
    return out


def card_png(card: ParsedCard, image: bytes, *, modified: int) -> bytes:
    """`image` (a PNG) carrying `card` as SillyTavern writes it (format-digest §a.4): every old
    chara/ccv3 chunk removed, then `chara` (V2 JSON) and `ccv3` (V3 JSON) before IEND, each
    base64 of UTF-8 JSON.

    Raises:
        FormatError: `image` is not a readable PNG.
    """
    chara = json.dumps(export_card_st_json(card), ensure_ascii=False)
    ccv3 = json.dumps(export_card_v3_json(card, modified=modified), ensure_ascii=False)
    return write_card_chunks(image, chara, ccv3, file="card image")


# --- loading -------------------------------------------------------------------------


def _load_png(data: bytes, file: str, warnings: list[str]) -> tuple[dict, str]:
    """Pick the card chunk (ccv3 first, then chara; first of each) and decode it."""
    texts, png_warnings = read_text_chunks(data, file)
    warnings.extend(png_warnings)
    found: dict[str, bytes] = {}
    for keyword, text in texts:
        key = keyword.lower()
        if key in ("chara", "ccv3"):
            if key in found:
                warnings.append(f"more than one {key} chunk; the first one was used")
            else:
                found[key] = text
    if not found:
        raise FormatError(file, "no character card chunk (no chara or ccv3 tEXt chunk)")
    if "ccv3" in found:
        try:
            return _decode_chunk(found["ccv3"], file, "ccv3"), "ccv3"
        except FormatError as exc:
            if "chara" not in found:
                raise
            try:
                obj = _decode_chunk(found["chara"], file, "chara")
            except FormatError:
                raise exc from None  # both broken: report the chunk that would have won
            warnings.append(f"ccv3 chunk unreadable ({exc.reason}); the chara chunk was used")
            return obj, "chara"
    return _decode_chunk(found["chara"], file, "chara"), "chara"


def _decode_chunk(text: bytes, file: str, chunk: str) -> dict:
    """base64 → UTF-8 → JSON object; every failure is a FormatError whose field is `chunk`."""
    # Node's Buffer.from(s, 'base64') tolerates whitespace, missing padding and the
    # URL-safe alphabet; accept those, reject anything else.
    cleaned = bytes(b for b in text if b not in b" \t\r\n").translate(bytes.maketrans(b"-_", b"+/"))
    cleaned += b"=" * (-len(cleaned) % 4)
    try:
        raw = base64.b64decode(cleaned, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise FormatError(file, f"chunk text is not valid base64 ({exc})", chunk) from exc
    try:
        decoded = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(file, f"decoded chunk is not UTF-8 (byte {exc.start})", chunk) from exc
    try:
        obj = loads_bounded(decoded, file, chunk)
    except json.JSONDecodeError as exc:
        raise FormatError(file, f"decoded chunk is not JSON: {_json_error(exc)}", chunk) from exc
    if not isinstance(obj, dict):
        raise FormatError(file, f"card JSON is a {type_name(obj)}, not an object", chunk)
    return obj


def _load_json(data: bytes, file: str) -> dict:
    """Decode a .json card file (UTF-8, optional BOM) into its top-level object. A file that
    begins as JSON does ("{" or "[") is named a broken JSON file (whatever it was meant to be),
    with where it breaks and, when it breaks at its very end, that it looks cut short; anything
    else is "not a PNG or JSON card"."""
    looks_json = data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if not looks_json:
            raise FormatError(file, "not a PNG or JSON card") from None
        cut = " (it ends mid-character: the file looks cut short)" if exc.reason == "unexpected end of data" else ""
        raise FormatError(file, f"a JSON file that is not UTF-8 text at byte {exc.start}{cut}") from None
    try:
        obj = loads_bounded(text, file)
    except json.JSONDecodeError as exc:
        if not looks_json:
            raise FormatError(file, f"not a PNG or JSON card (JSON error: {_json_error(exc)})") from exc
        # At the end of the text, or in a string never closed (a string runs to the end only
        # then: a line break in it fails sooner).
        ended = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        cut = " (it ends before the JSON does: the file looks cut short)" if ended else ""
        raise FormatError(file, f"a JSON file that does not parse: {_json_error(exc)}{cut}") from exc
    if not isinstance(obj, dict):
        raise FormatError(file, f"card JSON is a {type_name(obj)}, not an object")
    return obj


def _json_error(exc: json.JSONDecodeError) -> str:
    return f"{json_error(exc)} (char {exc.pos})"




# --- normalising ---------------------------------------------------------------------


def _normalise(obj: dict, file: str, chunk: str, warnings: list[str]) -> tuple[str, str, dict]:
    """Detect the spec and return (spec, spec_version, normalised data)."""
    kind = sniff_kind(obj)
    if kind not in (None, CARD):
        raise FormatError(file, f"this is a {kind} file, not a character card")
    if "spec" not in obj:
        # ST importFromJson: no spec but a name → V1 (TavernAI legacy, [CCv2] spec_v1.md).
        return SPEC_V1, "", _normalise_fields(_v1_to_data(obj), file, "", warnings)
    spec = obj["spec"]
    if spec not in (SPEC_V2, SPEC_V3):
        where = f" in the {chunk} chunk" if chunk else ""
        raise FormatError(file, f"unknown card spec {spec!r}{where}", "spec")
    version = obj.get("spec_version")
    spec_version = "" if version is None else str(version)
    _check_version(spec, spec_version, warnings)
    if not isinstance(obj.get("data"), dict):
        what = "missing" if "data" not in obj else f"a {type_name(obj['data'])}"
        raise FormatError(file, f"{spec} keeps its fields in data, which is {what}, not an object", "data")
    return spec, spec_version, _normalise_fields(copy.deepcopy(obj["data"]), file, "data.", warnings)


def _check_version(spec: str, spec_version: str, warnings: list[str]) -> None:
    """Warn (never fail) on versions the spec does not name.

    [CCv3]: spec_version is compared as a float; a newer one is imported with a warning.
    ST's TavernCardValidator wants exactly "2.0" for V2; we only warn.
    """
    if spec == SPEC_V2:
        if spec_version != "2.0":
            warnings.append(f"chara_card_v2 with spec_version {spec_version!r} (expected \"2.0\"); imported anyway")
        return
    try:
        major_ok = 3.0 <= float(spec_version) < 4.0
    except ValueError:
        major_ok = False
    if not major_ok:
        warnings.append(f"chara_card_v3 with spec_version {spec_version!r} (expected 3.x); imported anyway")


def _v1_to_data(obj: dict) -> dict:
    """Turn a flat V1 object into V2-layout data (ST convertToV2 → charaFormatData)."""
    data = copy.deepcopy(obj)
    ext = data.get("extensions")
    ext = dict(ext) if isinstance(ext, dict) else ({} if ext is None else ext)
    if "creatorcomment" in data:
        notes = data.pop("creatorcomment")
        if notes == _CREATOR_NOTES_PLACEHOLDER:
            notes = ""
        if not data.get("creator_notes"):
            data["creator_notes"] = notes
    for key in ("talkativeness", "fav"):
        if key in data and isinstance(ext, dict):
            value = data.pop(key)
            ext.setdefault(key, value)  # an explicit extensions value wins, like `data` does
    data["extensions"] = ext
    return data


def _normalise_fields(data: dict, file: str, prefix: str, warnings: list[str]) -> dict:
    """Fill V2 defaults in place and drop tolerated bad values; return `data`.

    `prefix` is "data." for V2/V3 and "" for V1, so error fields read "data.name" or "name".
    """
    name = data.get("name")
    if name is None:
        raise FormatError(file, "the card has no name", prefix + "name")
    if not isinstance(name, str):
        raise FormatError(file, f"name is a {type_name(name)}, not a string", prefix + "name")
    if not name.strip():
        raise FormatError(file, "the card's name is empty", prefix + "name")

    for field in V2_STRING_FIELDS:
        value = data.get(field)
        if value is None:
            data[field] = ""  # absent or null: spec_v1/spec_v2 say "" is the default
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            data[field] = str(value)
            warnings.append(f"{prefix}{field} was the number {value!r}; stored as text")
        elif not isinstance(value, str):
            raise FormatError(file, f"expected a string, found a {type_name(value)}", prefix + field)

    for field in V2_LIST_FIELDS:
        value = data.get(field)
        if value is None:
            data[field] = []
        elif not isinstance(value, list):
            data[field] = []
            warnings.append(f"{prefix}{field} is a {type_name(value)}, not a list; dropped")
        else:
            kept = [item for item in value if isinstance(item, str)]
            if len(kept) != len(value):
                warnings.append(f"{prefix}{field}: {len(value) - len(kept)} non-text entries dropped")
            data[field] = kept

    ext = data.get("extensions")
    if ext is None:
        data["extensions"] = {}
    elif not isinstance(ext, dict):
        raise FormatError(file, f"extensions is a {type_name(ext)}, not an object", prefix + "extensions")

    if "character_book" in data:
        book = data["character_book"]
        if book is None:
            del data["character_book"]  # exporters write null for "no book" (ST does too)
        elif isinstance(book, dict) and isinstance(book.get("entries"), dict):
            # An object map of entries (some exporters write the World Info shape): a list in
            # JavaScript's own key order, every field kept.
            data["character_book"] = {**book, "entries": list(_js_key_order(book["entries"]))}
            warnings.append(f"{prefix}character_book.entries is an object; read as a list in key order")
        elif not isinstance(book, dict) or not isinstance(book.get("entries"), list):
            # ST TavernCardValidator: a present book needs an entries array.
            raise FormatError(
                file, "character_book must be an object with an entries list", prefix + "character_book"
            )
    return data


def _book_key_warnings(data: dict, file: str) -> list[str]:
    """Warnings for the embedded book's regex keys, as a standalone book import gives them
    (`lore.matching.invalid_regex_keys`: invalid ones, and valid ones refused as too costly to
    compile). A book whose entries do not convert gives none here: its errors show where it is read."""
    book = data.get("character_book")
    if book is None:
        return []
    try:
        parsed = from_character_book(book, file, str(data.get("name", "")))
    except FormatError:
        return []
    from tavern_tui.lore.matching import invalid_regex_keys  # the regex engine: on import, not at start-up

    return [f"character_book {warning}" for warning in invalid_regex_keys(parsed)]


def _js_key_order(entries: dict) -> list:
    """The values of an object in the order JavaScript enumerates its keys (ECMAScript
    OrdinaryOwnPropertyKeys: array-index keys, i.e. canonical integers below 2^32 − 1, ascending;
    then the other keys in insertion order), as `Object.values` gives them to SillyTavern."""
    def is_index(key: str) -> bool:
        return key.isdigit() and (key == "0" or not key.startswith("0")) and int(key) < 2**32 - 1
    indexed = sorted((k for k in entries if is_index(k)), key=int)
    return [entries[k] for k in indexed] + [v for k, v in entries.items() if not is_index(k)]
