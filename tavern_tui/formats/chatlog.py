"""Reads and writes SillyTavern chat files (`.jsonl`): one header object, then one message per line.

Rules come from SillyTavern 1.18 (format-digest §d): `public/global.d.ts` (`ChatHeader`,
`ChatMessage`, `SwipeInfo`), `public/script.js` (`saveChat`, `ensureSwipes`, `syncMesToSwipe`,
`syncSwipeToMes`), `public/scripts/utils.js` (`parseTimestamp`) and `src/endpoints/chats.js`
(import accepts a header with `user_name`, `name` or `chat_metadata`). Pure: bytes in, objects out;
objects in, text out.
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tavern_tui.errors import FormatError
from tavern_tui.formats.jsontypes import json_error, loads_bounded, type_name

CHAT_SUFFIXES = (".jsonl",)

# What `saveChat` writes as line 1 since the names moved out of the header (1.18).
_DEFAULT_HEADER = {"chat_metadata": {}, "user_name": "unused", "character_name": "unused"}
_HEADER_KEYS = ("user_name", "name", "chat_metadata")
# SwipeInfo fields that mirror the message's own fields (global.d.ts SwipeInfo).
_SWIPE_INFO_KEYS = ("send_date", "gen_started", "gen_finished", "extra")
_UNUSED = "unused"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DIGITS = re.compile(r"[0-9]+")
# utils.js parseTimestamp patterns, unanchored like JS `String.match`; ASCII like JS `\d`/`\w`.
# `(?<!\w)`: a match can only start where a word does (JS finds the same leftmost match, as \w+ from
# the word's start reaches every end a mid-word start does); without it every position of a long
# word retries `\w+`, quadratic in its length (a 100k-character send_date took 60 s).
_MERIDIEM = re.compile(r"(?<!\w)(\w+)\s([0-9]{1,2}),\s([0-9]{4})\s([0-9]{1,2}):([0-9]{1,2})(am|pm)",
                       re.IGNORECASE | re.ASCII)
_HUMANIZED = (
    re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})@([0-9]{1,2})h([0-9]{1,2})m([0-9]{1,2})s([0-9]{1,3})ms"),
    re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})@([0-9]{1,2})h([0-9]{1,2})m([0-9]{1,2})s()"),
    re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2}) @([0-9]{1,2})h ([0-9]{1,2})m ([0-9]{1,2})s ([0-9]{1,3})ms"),
)
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")
_SURROGATE = re.compile("[\ud800-\udfff]")


# --- public API ------------------------------------------------------------------------


@dataclass
class ChatLine:
    """One message line of a chat file (SillyTavern 1.18 `public/global.d.ts` ChatMessage).

    Attributes:
        line_no: 1-based line number in the file (the header is line 1); 0 for lines built in code.
        name: speaker name as written.
        is_user: written by the user's persona.
        is_system: hidden from the prompt but still displayed.
        swipes: alternative texts; never empty (a line without `swipes` gets `[mes]`).
        swipe_id: index of the shown swipe, always valid for `swipes`.
        swipe_info: one `{send_date, gen_started, gen_finished, extra}` object per swipe.
            Entries are kept as the file has them (each swipe's `extra` is its own; the
            message's `extra` is never copied in, issue 24); missing entries are backfilled as
            `ensureSwipes` does: the message's send_date, gen_started and gen_finished, and an
            empty `extra`.
        send_date: the raw `send_date` value (ISO string, humanized string, Unix ms or None).
        sent_at: `send_date` parsed by `parse_send_date` (aware UTC), None when absent or unreadable.
        extra: the message's `extra` object ({} when absent).
        raw: the whole line object as read; the writer starts from it so unknown fields survive.
        had_swipes: the file line carried a `swipes` list.
        had_swipe_info: the file line carried `swipe_info` (True for lines made here): the writer
            writes it back only then, so an older file's lines come back without one added.

    The writer writes a line read from a file back as it was. When `swipe_id` differs from the
    line's own, the message's send_date, gen_started, gen_finished and extra are taken from
    `swipe_info[swipe_id]` (`syncSwipeToMes`, what SillyTavern does when a swipe is shown).
    """

    line_no: int
    name: str
    is_user: bool
    is_system: bool
    swipes: list[str]
    swipe_id: int = 0
    swipe_info: list[dict] = field(default_factory=list)
    send_date: str | int | None = None
    sent_at: datetime | None = None
    extra: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict)
    had_swipes: bool = False
    had_swipe_info: bool = True

    @property
    def mes(self) -> str:
        """The shown text: `swipes[swipe_id]` (ChatMessage `mes` mirrors it)."""
        return self.swipes[self.swipe_id]


@dataclass
class ParsedChat:
    """A chat file as read by `parse_chat_jsonl`.

    Attributes:
        header: line 1 exactly as read ({} when the file has no header).
        user_name / character_name: the header's names (≤1.12 files); None when absent or "unused" (1.18).
        create_date: the header's humanized creation date (≤1.12), else None.
        chat_metadata: the header's `chat_metadata` object ({} when absent).
        messages: the message lines in file order.
        warnings: what was repaired, each starting with the line ("line 7: …").
    """

    header: dict
    user_name: str | None
    character_name: str | None
    create_date: str | None
    chat_metadata: dict
    messages: list[ChatLine]
    warnings: list[str]


def parse_chat_jsonl(data: bytes, file: str) -> ParsedChat:
    """Parse a SillyTavern chat file: UTF-8 (BOM allowed), one JSON object per line, blank lines skipped.

    The first non-blank line is the header when it has `user_name` or `chat_metadata` (`saveChat`
    writes `{chat_metadata, user_name: "unused", character_name: "unused"}`; ≤1.12 wrote the persona
    and character names and `create_date`), or `name` without `mes` (`chats.js` import accepts it).
    A first line with `mes` and neither of the first two is read as a message: the file is
    headerless, and a warning says so. Each message is read as `ChatLine` (SillyTavern 1.18
    `public/global.d.ts` ChatMessage), repaired as SillyTavern does when it can:
    - `swipe_id` missing or not a number → 0; out of range → clamped (negative → 0, too large →
      last), with a warning;
    - `mes` different from `swipes[swipe_id]` → `swipes[swipe_id]` wins, with a warning;
    - `swipe_info` missing, short or with non-object entries → backfilled (`ensureSwipes`); entries
      past the last swipe are dropped with a warning;
    - `is_user`/`is_system` missing → False; `extra` missing → {}.

    Returns:
        ParsedChat with `warnings` naming each repaired line.

    Raises:
        FormatError: empty file; not UTF-8 (field names the line); a line that is not JSON (the
            JSON error and column) or not an object; a first line that is neither a header nor a
            message; `name` or `mes` not a string; `swipes` not a list of strings (field e.g.
            "line 4: swipes").
    """
    warnings: list[str] = []
    header, header_line, messages = _read_lines(_decode(data, file), file, warnings)
    if header is None:  # only whitespace ASCII strip() keeps (U+2028, U+001C, …): no line to read
        raise FormatError(file, "not a SillyTavern chat: it holds no JSON lines")
    metadata = header.get("chat_metadata", {})
    if not isinstance(metadata, dict):
        warnings.append(f"line {header_line}: chat_metadata is a {type_name(metadata)}, not an object; using {{}}")
        metadata = {}
    create_date = header.get("create_date")
    return ParsedChat(
        header=header,
        user_name=_header_name(header.get("user_name")),
        character_name=_header_name(header.get("character_name")),
        create_date=create_date if isinstance(create_date, str) else None,
        chat_metadata=metadata,
        messages=messages,
        warnings=warnings,
    )


def _decode(data: bytes, file: str) -> str:
    """The file's text without its BOM; empty or non-UTF-8 bytes fail, naming the bad byte's line."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
        raise FormatError(file, "file is empty")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FormatError(file, f"not UTF-8 text (bad byte at offset {exc.start})", f"line {line}") from None


def _read_lines(text: str, file: str, warnings: list[str]) -> tuple[dict | None, int, list[ChatLine]]:
    """The header (None when no line holds JSON; {} when headerless), its line number and the messages."""
    header: dict | None = None
    header_line = 0
    messages: list[ChatLine] = []
    # Split on "\n" only: str.splitlines would also break at U+2028/U+0085, which JSON.stringify leaves raw.
    for index, line_text in enumerate(text.split("\n"), start=1):
        if not line_text.strip():
            continue
        obj = _load_line(line_text, file, index, warnings)
        if header is None:
            header_line = index
            if _is_header(obj):
                header = obj
                continue
            if "mes" not in obj:
                raise FormatError(file, "not a SillyTavern chat: the first line has no user_name, name or "
                                  "chat_metadata (a header) and no mes (a message)", f"line {index}")
            header = {}
            warnings.append(f"line {index}: no chat header (user_name, name or chat_metadata); "
                            "reading every line as a message")
        messages.append(_read_message(obj, index, file, warnings))
    return header, header_line, messages


def write_chat_jsonl(header: dict, messages: list[ChatLine]) -> str:
    """Chat file text: the header, then one compact JSON object per message, each line ending in "\\n".

    The header is written as given; one with none of `user_name`, `name`, `chat_metadata` (e.g. the
    {} of a headerless file) gets `saveChat`'s defaults added so SillyTavern will import the file.
    Each message starts from `raw` (unknown fields survive), then gets `name`, `is_user`,
    `is_system`, `send_date`, `mes` = `swipes[swipe_id]` and `extra` (both omitted when empty and
    absent from `raw`). `swipes`, `swipe_id` and `swipe_info` are written when the line had swipes
    or has more than one, and dropped otherwise; when written, the message's send_date,
    gen_started, gen_finished and extra are mirrored from `swipe_info[swipe_id]` wherever that
    entry carries them (`script.js` syncSwipeToMes; what `saveChat` finds in memory).
    `swipe_id` is clamped and `swipe_info` backfilled as the reader does.

    Raises:
        ValueError: a message with no swipes.
    """
    if not any(key in header for key in _HEADER_KEYS):
        header = {**_DEFAULT_HEADER, **header}
    lines = [_dump(header)]
    lines.extend(_dump(_message_object(message)) for message in messages)
    return "\n".join(lines) + "\n"


def parse_send_date(value: object) -> datetime | None:
    """A message timestamp as an aware UTC datetime, following `public/scripts/utils.js` parseTimestamp.

    Accepted, in this order:
    - a `datetime` (naive taken as UTC);
    - Unix milliseconds, as a number or a string of digits (1720747897000 → 2024-07-12 01:31:37 UTC);
    - ISO 8601, the 1.18 form ("2024-07-12T01:31:37.123Z"); an offset is converted to UTC;
    - "June 19, 2023 2:20pm" (≤1.12 message dates; English month name, full or three letters);
    - humanized "2024-7-12@01h31m37s", "2024-07-12@01h31m37s123ms", "2024-6-5 @14h 56m 50s 682ms".

    Forms without a zone are read as UTC: SillyTavern itself reads the humanized ones with a "Z",
    and reads the others as browser-local time, which a file does not record.

    Returns:
        The datetime, or None for an empty/falsy value (as SillyTavern), a negative or non-finite
        number, or a string in none of the forms above.
    """
    if not value or isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, (int, float)) or (isinstance(value, str) and _DIGITS.fullmatch(value)):
        if isinstance(value, str) and len(value) > 20:
            return None  # more milliseconds than any date holds (and past Python's int() limit at 4,300)
        millis = float(value) if isinstance(value, float) else int(value)
        if not math.isfinite(millis) or millis < 0:
            return None
        try:
            return _EPOCH + timedelta(milliseconds=millis)
        except OverflowError:
            return None
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return _parse_legacy(value)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def format_send_date(when: datetime) -> str:
    """The SillyTavern 1.18 `send_date` form (JS `Date.toISOString`): "2026-11-30T20:35:37.123Z".

    Converted to UTC (a naive datetime is taken as UTC); milliseconds truncated, as a JS Date holds.
    """
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return (f"{when.year:04d}-{when.month:02d}-{when.day:02d}T{when.hour:02d}:{when.minute:02d}:"
            f"{when.second:02d}.{when.microsecond // 1000:03d}Z")


def looks_like_chat_jsonl(data: bytes) -> bool:
    """Whether `data` looks like a chat file, without reading it all.

    True when the first non-blank line is a JSON object with `user_name`, `name`, `chat_metadata`
    or `mes`, and either another non-blank line follows or that object has `chat_metadata` (a
    one-line JSON card or world book also has `name`, so one line alone is not enough).
    """
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    first: Any = None
    for raw_line in data.split(b"\n"):
        if not raw_line.strip():
            continue
        if first is not None:
            return True
        try:
            first = loads_bounded(raw_line.decode("utf-8"), "<sniff>")
        except (UnicodeDecodeError, json.JSONDecodeError, FormatError):
            return False
        if not isinstance(first, dict) or not any(key in first for key in (*_HEADER_KEYS, "mes")):
            return False
    return isinstance(first, dict) and "chat_metadata" in first


# --- reading ---------------------------------------------------------------------------


def _load_line(line_text: str, file: str, line_no: int, warnings: list[str] | None = None) -> dict:
    try:
        # A cut emoji (a lone surrogate SillyTavern's JSON.stringify wrote) is repaired and noted.
        obj = loads_bounded(line_text, file, f"line {line_no}", repairs=warnings)
    except json.JSONDecodeError as exc:
        raise FormatError(file, f"not JSON: {json_error(exc, line=False)}", f"line {line_no}") from None
    if not isinstance(obj, dict):
        raise FormatError(file, f"is a {type_name(obj)}, not an object", f"line {line_no}")
    return obj


def _is_header(obj: dict) -> bool:
    # A message also has `name`, so `mes` decides when only `name` is there.
    return "user_name" in obj or "chat_metadata" in obj or ("name" in obj and "mes" not in obj)


def _header_name(value: Any) -> str | None:
    return value if isinstance(value, str) and value != _UNUSED else None


def _read_message(obj: dict, line_no: int, file: str, warnings: list[str]) -> ChatLine:
    where = f"line {line_no}"

    def warn(text: str) -> None:
        warnings.append(f"{where}: {text}")

    name = obj.get("name", "")
    if not isinstance(name, str):
        raise FormatError(file, f"name is a {type_name(name)}, not a string", f"{where}: name")
    mes = obj.get("mes")
    if "mes" in obj and not isinstance(mes, str):
        raise FormatError(file, f"mes is a {type_name(mes)}, not a string", f"{where}: mes")
    flags = {}
    for key in ("is_user", "is_system"):
        value = obj.get(key, False)
        if not isinstance(value, bool):
            warn(f"{key} is a {type_name(value)}, not true/false; reading it as {bool(value)}")
        flags[key] = bool(value)
    extra = obj.get("extra", {})
    if not isinstance(extra, dict):
        if extra is not None:
            warn(f"extra is a {type_name(extra)}, not an object; using {{}}")
        extra = {}

    had_swipes = "swipes" in obj
    if had_swipes:
        swipes = obj["swipes"]
        if not isinstance(swipes, list) or not all(isinstance(s, str) for s in swipes):
            what = type_name(swipes) if not isinstance(swipes, list) else "list with a non-string item"
            raise FormatError(file, f"swipes is a {what}, not a list of strings", f"{where}: swipes")
        swipes = list(swipes)
        if not swipes:
            warn("swipes is empty; using [mes]")
            swipes = [mes or ""]
        swipe_id = _swipe_id(obj, len(swipes), warn)
        if mes is not None and mes != swipes[swipe_id]:
            warn(f"mes differs from swipes[{swipe_id}]; using swipes[{swipe_id}]")
    else:
        if mes is None:
            warn("no mes; using empty text")
        swipes, swipe_id = [mes or ""], 0

    send_date = obj.get("send_date")
    sent_at = parse_send_date(send_date)
    if sent_at is None and send_date not in (None, "", 0):
        warn(f"send_date {send_date!r} is not a date SillyTavern writes; keeping it as is")
    swipe_info = _swipe_info(obj.get("swipe_info"), obj, len(swipes), swipe_id, warn)
    return ChatLine(
        line_no=line_no, name=name, is_user=flags["is_user"], is_system=flags["is_system"],
        swipes=swipes, swipe_id=swipe_id, swipe_info=swipe_info, send_date=send_date, sent_at=sent_at,
        extra=extra, raw=obj, had_swipes=had_swipes, had_swipe_info="swipe_info" in obj,
    )


def _swipe_id(obj: dict, count: int, warn: Any) -> int:
    value = obj.get("swipe_id", 0)
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON 1.0 is the number 1 to JavaScript
    if isinstance(value, bool) or not isinstance(value, int):
        warn(f"swipe_id {value!r} is not a whole number; using 0")  # ensureSwipes resets non-numbers to 0
        return 0
    clamped = min(max(value, 0), count - 1)
    if clamped != value:
        warn(f"swipe_id {value} is out of range for {count} swipes; using {clamped}")
    return clamped


def _swipe_info(value: Any, message: dict, count: int, swipe_id: int, warn: Any) -> list[dict]:
    """`count` SwipeInfo objects: the file's, backfilled like ensureSwipes, entry `swipe_id` synced."""
    if value is None:
        value = []
    elif not isinstance(value, list):
        warn(f"swipe_info is a {type_name(value)}, not a list; rebuilding it")
        value = []
    if len(value) > count:
        warn(f"swipe_info has {len(value)} entries for {count} swipes; dropping the extra ones")
    infos: list[dict] = []
    for index in range(count):
        entry = value[index] if index < len(value) else None
        if entry is not None and not isinstance(entry, dict):
            warn(f"swipe_info[{index}] is a {type_name(entry)}, not an object; rebuilding it")
            entry = None
        if entry is None:
            # ensureSwipes createSwipeInfo: the message's dates, no extra.
            entry = {key: message[key] for key in _SWIPE_INFO_KEYS[:3] if key in message}
            entry["extra"] = {}
        infos.append(copy.deepcopy(entry))
    # Entries stay as written: SillyTavern copies the message into its swipe_info only when it
    # generates or edits, never when it loads and saves a chat (issue 24: no `extra` copied in).
    return infos


def _parse_legacy(text: str) -> datetime | None:
    match = _MERIDIEM.search(text)
    if match:
        month_name, day, year, hour, minute, meridiem = match.groups()
        month = _month_number(month_name)
        hour24 = int(hour) % 12 + (12 if meridiem.lower() == "pm" else 0)
        if month is None:
            return None
        return _utc(int(year), month, int(day), hour24, int(minute), 0, 0)
    for pattern in _HUMANIZED:
        match = pattern.search(text)
        if match:
            year, month, day, hour, minute, second, millis = match.groups()
            return _utc(int(year), int(month), int(day), int(hour), int(minute), int(second), int(millis or 0))
    return None


def _month_number(name: str) -> int | None:
    lowered = name.lower()
    for number, month in enumerate(_MONTHS, start=1):
        if lowered == month or lowered == month[:3]:
            return number
    return None


def _utc(year: int, month: int, day: int, hour: int, minute: int, second: int, millis: int) -> datetime | None:
    try:
        return datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=UTC)
    except ValueError:  # e.g. month 13: moment gives an invalid date
        return None


# --- writing ---------------------------------------------------------------------------


def _message_object(message: ChatLine) -> dict:
    if not message.swipes:
        raise ValueError(f"line {message.line_no}: a chat message needs at least one swipe")
    swipe_id = min(max(message.swipe_id, 0), len(message.swipes) - 1)
    out = copy.deepcopy(message.raw)
    out["name"] = message.name
    out["is_user"] = message.is_user
    out["is_system"] = message.is_system
    if message.send_date is not None:
        out["send_date"] = message.send_date
    else:
        out.pop("send_date", None)
    out["mes"] = message.swipes[swipe_id]
    if message.extra or "extra" in out:
        out["extra"] = copy.deepcopy(message.extra)
    if message.had_swipes or len(message.swipes) > 1:
        infos = [copy.deepcopy(info) if isinstance(info, dict) else None for info in message.swipe_info]
        infos = (infos + [None] * len(message.swipes))[: len(message.swipes)]
        for index, info in enumerate(infos):
            if info is None:
                info = {key: out[key] for key in _SWIPE_INFO_KEYS[:3] if key in out}
                info["extra"] = {}  # never the message's own extra (ensureSwipes' createSwipeInfo)
                infos[index] = info
        current = infos[swipe_id]
        if message.raw.get("swipe_id", swipe_id) != swipe_id:  # another swipe shown: syncSwipeToMes
            for key in _SWIPE_INFO_KEYS:
                if key in current:
                    out[key] = copy.deepcopy(current[key])
        out["swipes"] = list(message.swipes)
        out["swipe_id"] = swipe_id
        if message.had_swipe_info:
            out["swipe_info"] = infos
        else:
            out.pop("swipe_info", None)
    else:
        for key in ("swipes", "swipe_id", "swipe_info"):
            out.pop(key, None)
    return out


def _dump(obj: dict) -> str:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    # A lone surrogate (a cut emoji) cannot be encoded as UTF-8; escape it as JSON.stringify does.
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
