"""Chat .jsonl import/export: fixtures built by hand from the SillyTavern 1.18 rules (format-digest §d;
`script.js` saveChat/ensureSwipes/syncSwipeToMes, `utils.js` parseTimestamp), broken files, round trips."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from tavern_tui.errors import FormatError
from tavern_tui.formats.chatlog import (
    CHAT_SUFFIXES,
    ChatLine,
    format_send_date,
    looks_like_chat_jsonl,
    parse_chat_jsonl,
    parse_send_date,
    write_chat_jsonl,
)

# ≤1.12 header: the names and a humanized create_date live in line 1.
OLD_HEADER = {
    "user_name": "Ren",
    "character_name": "Seraphina",
    "create_date": "2023-6-19@14h20m05s",
    "chat_metadata": {"note_prompt": "", "note_interval": 1},
}
# 1.18 header, as saveChat writes it.
NEW_HEADER = {
    "chat_metadata": {"integrity": "7c1e4f0a-2b7d-4c55-9a3e-0d4b1f6c2e11", "variables": {"mood": "calm"}},
    "user_name": "unused",
    "character_name": "unused",
}
# Greeting: swipes are [first_mes, *alternate_greetings]; getFirstMessage leaves swipe_info [].
GREETING = {
    "name": "Seraphina", "is_user": False, "is_system": False, "send_date": "June 19, 2023 2:20pm",
    "mes": "Welcome, traveller.", "swipes": ["Welcome, traveller.", "Ah, you wake.", "Rest now."],
    "swipe_id": 0, "swipe_info": [], "extra": {},
}
USER = {"name": "Ren", "is_user": True, "is_system": False, "send_date": "2024-7-12@01h31m37s",
        "mes": "Where am I?", "extra": {}}
THIRD_EXTRA = {"api": "openai", "model": "gpt-x", "reasoning": "She weighs her words.",
               "reasoning_duration": 1200, "x_extension": {"k": 1}}
THREE_SWIPES = {
    "name": "Seraphina", "is_user": False, "is_system": False, "title": "",
    "send_date": "2026-11-30T20:35:37.123Z", "gen_started": "2026-11-30T20:35:30.000Z",
    "gen_finished": "2026-11-30T20:35:37.100Z", "force_avatar": "User Avatars/ren.png",
    "mes": "Third reply.", "swipes": ["First reply.", "Second reply.", "Third reply."], "swipe_id": 2,
    "swipe_info": [
        {"send_date": "2026-11-30T20:30:00.000Z", "gen_started": "2026-11-30T20:29:55.000Z",
         "gen_finished": "2026-11-30T20:30:00.000Z", "extra": {"api": "openai", "model": "gpt-a"}},
        {"send_date": "2026-11-30T20:33:00.000Z", "gen_started": "2026-11-30T20:32:50.000Z",
         "gen_finished": "2026-11-30T20:33:00.000Z", "extra": {"api": "openai", "model": "gpt-b"}},
        {"send_date": "2026-11-30T20:35:37.123Z", "gen_started": "2026-11-30T20:35:30.000Z",
         "gen_finished": "2026-11-30T20:35:37.100Z", "extra": THIRD_EXTRA},
    ],
    "extra": THIRD_EXTRA,
    "x_unknown_top": [1, 2],
}
SYSTEM = {"name": "SillyTavern System", "is_user": False, "is_system": True, "send_date": 1720747897000,
          "mes": "A hidden note.", "extra": {"type": "narrator", "isSmallSys": True}}
# Only the first swipe has swipe_info: the other two get backfilled.
SHORT_INFO = {
    "name": "Seraphina", "is_user": False, "is_system": False, "send_date": "2024-6-5 @14h 56m 50s 682ms",
    "gen_started": "2024-06-05T14:56:40.000Z", "mes": "Alpha.", "swipes": ["Alpha.", "Beta.", "Gamma."],
    "swipe_id": 0, "swipe_info": [{"send_date": "2024-6-5 @14h 56m 50s 682ms",
                                   "gen_started": "2024-06-05T14:56:40.000Z", "extra": {"model": "m0"}}],
    "extra": {"model": "m0"},
}


def jsonl(*objs: object, newline: str = "\n") -> bytes:
    """One compact JSON object per line, with a trailing newline (as a saved file may have)."""
    return (newline.join(json.dumps(o, ensure_ascii=False) for o in objs) + newline).encode("utf-8")


def full_chat() -> bytes:
    return jsonl(NEW_HEADER, GREETING, USER, THREE_SWIPES, SYSTEM, SHORT_INFO)


def at(year, month, day, hour=0, minute=0, second=0, ms=0) -> datetime:
    return datetime(year, month, day, hour, minute, second, ms * 1000, tzinfo=UTC)


# --- headers ---------------------------------------------------------------------------


def test_old_header_gives_names_and_create_date():
    chat = parse_chat_jsonl(jsonl(OLD_HEADER, USER), "old.jsonl")
    assert chat.header == OLD_HEADER
    assert chat.user_name == "Ren"
    assert chat.character_name == "Seraphina"
    assert chat.create_date == "2023-6-19@14h20m05s"
    assert chat.chat_metadata == {"note_prompt": "", "note_interval": 1}
    assert [m.mes for m in chat.messages] == ["Where am I?"]
    assert chat.warnings == []


def test_118_header_unused_names_are_none():
    chat = parse_chat_jsonl(full_chat(), "new.jsonl")
    assert chat.header == NEW_HEADER
    assert chat.user_name is None and chat.character_name is None and chat.create_date is None
    assert chat.chat_metadata["integrity"] == "7c1e4f0a-2b7d-4c55-9a3e-0d4b1f6c2e11"
    assert len(chat.messages) == 5
    assert [m.line_no for m in chat.messages] == [2, 3, 4, 5, 6]


def test_header_only_file_has_no_messages():
    chat = parse_chat_jsonl(jsonl(NEW_HEADER), "empty-chat.jsonl")
    assert chat.messages == [] and chat.warnings == []


def test_header_with_only_name_is_accepted():
    chat = parse_chat_jsonl(jsonl({"name": "Seraphina"}, USER), "x.jsonl")
    assert chat.header == {"name": "Seraphina"}
    assert [m.name for m in chat.messages] == ["Ren"]


def test_headerless_file_reads_line_1_as_a_message():
    chat = parse_chat_jsonl(jsonl(USER, THREE_SWIPES), "headless.jsonl")
    assert chat.header == {} and chat.chat_metadata == {}
    assert [m.line_no for m in chat.messages] == [1, 2]
    assert chat.messages[0].mes == "Where am I?"
    assert len(chat.warnings) == 1 and chat.warnings[0].startswith("line 1:")
    assert "header" in chat.warnings[0]


def test_first_line_neither_header_nor_message_is_an_error():
    with pytest.raises(FormatError) as err:
        parse_chat_jsonl(jsonl({"spec": "chara_card_v2"}, USER), "card.jsonl")
    assert err.value.field == "line 1"


# --- messages and swipes --------------------------------------------------------------


def test_three_swipes_swipe_id_2():
    line = parse_chat_jsonl(full_chat(), "c.jsonl").messages[2]
    assert line.line_no == 4
    assert line.swipes == ["First reply.", "Second reply.", "Third reply."]
    assert line.swipe_id == 2 and line.mes == "Third reply."
    assert line.had_swipes
    assert [info["extra"]["model"] for info in line.swipe_info] == ["gpt-a", "gpt-b", "gpt-x"]
    assert line.swipe_info[2]["send_date"] == "2026-11-30T20:35:37.123Z"
    assert line.send_date == "2026-11-30T20:35:37.123Z"
    assert line.sent_at == at(2026, 11, 30, 20, 35, 37, 123)


def test_extra_keeps_reasoning_and_unknown_keys():
    line = parse_chat_jsonl(full_chat(), "c.jsonl").messages[2]
    assert line.extra["reasoning"] == "She weighs her words."
    assert line.extra["reasoning_duration"] == 1200
    assert line.extra["x_extension"] == {"k": 1}
    assert line.raw["x_unknown_top"] == [1, 2]
    assert line.raw["force_avatar"] == "User Avatars/ren.png"


def test_greeting_swipes_are_first_mes_and_alternates_with_backfilled_info():
    line = parse_chat_jsonl(full_chat(), "c.jsonl").messages[0]
    assert line.swipes == ["Welcome, traveller.", "Ah, you wake.", "Rest now."]
    assert line.swipe_id == 0 and line.mes == "Welcome, traveller."
    # swipe_info [] → one entry per swipe: the message's send_date; extra {} (ensureSwipes).
    assert line.swipe_info == [{"send_date": "June 19, 2023 2:20pm", "extra": {}}] * 3
    assert line.sent_at == at(2023, 6, 19, 14, 20)


def test_missing_swipe_info_entries_are_backfilled_from_the_message():
    chat = parse_chat_jsonl(full_chat(), "c.jsonl")
    line = chat.messages[4]
    assert len(line.swipe_info) == 3
    assert line.swipe_info[0] == {"send_date": "2024-6-5 @14h 56m 50s 682ms",
                                  "gen_started": "2024-06-05T14:56:40.000Z", "extra": {"model": "m0"}}
    backfill = {"send_date": "2024-6-5 @14h 56m 50s 682ms", "gen_started": "2024-06-05T14:56:40.000Z", "extra": {}}
    assert line.swipe_info[1] == backfill and line.swipe_info[2] == backfill
    assert line.sent_at == at(2024, 6, 5, 14, 56, 50, 682)
    assert chat.warnings == []


def test_message_without_swipes_gets_mes_as_its_only_swipe():
    line = parse_chat_jsonl(full_chat(), "c.jsonl").messages[1]
    assert line.swipes == ["Where am I?"] and line.swipe_id == 0 and not line.had_swipes
    assert line.is_user and not line.is_system
    assert line.swipe_info == [{"send_date": "2024-7-12@01h31m37s", "extra": {}}]
    assert line.sent_at == at(2024, 7, 12, 1, 31, 37)


def test_is_system_message():
    line = parse_chat_jsonl(full_chat(), "c.jsonl").messages[3]
    assert line.is_system and not line.is_user
    assert line.extra == {"type": "narrator", "isSmallSys": True}
    assert line.send_date == 1720747897000
    assert line.sent_at == at(2024, 7, 12, 1, 31, 37)


def test_missing_flags_are_false():
    line = parse_chat_jsonl(jsonl(NEW_HEADER, {"name": "A", "mes": "hi"}), "c.jsonl").messages[0]
    assert line.is_user is False and line.is_system is False
    assert line.extra == {} and line.send_date is None and line.sent_at is None


def test_swipe_id_too_large_clamps_to_last_with_a_warning():
    msg = {"name": "A", "mes": "two", "swipes": ["one", "two"], "swipe_id": 7}
    chat = parse_chat_jsonl(jsonl(NEW_HEADER, msg), "c.jsonl")
    assert chat.messages[0].swipe_id == 1 and chat.messages[0].mes == "two"
    assert chat.warnings == ["line 2: swipe_id 7 is out of range for 2 swipes; using 1"]


def test_negative_swipe_id_clamps_to_0():
    msg = {"name": "A", "mes": "one", "swipes": ["one", "two"], "swipe_id": -3}
    chat = parse_chat_jsonl(jsonl(NEW_HEADER, msg), "c.jsonl")
    assert chat.messages[0].swipe_id == 0
    assert chat.warnings == ["line 2: swipe_id -3 is out of range for 2 swipes; using 0"]


def test_swipe_id_not_a_number_becomes_0_with_a_warning():
    msg = {"name": "A", "mes": "one", "swipes": ["one", "two"], "swipe_id": "1"}
    chat = parse_chat_jsonl(jsonl(NEW_HEADER, msg), "c.jsonl")
    assert chat.messages[0].swipe_id == 0
    assert len(chat.warnings) == 1 and chat.warnings[0].startswith("line 2: swipe_id '1'")


def test_mes_differing_from_current_swipe_trusts_the_swipe():
    msg = {"name": "A", "mes": "stale", "swipes": ["one", "two"], "swipe_id": 1}
    chat = parse_chat_jsonl(jsonl(NEW_HEADER, USER, msg), "c.jsonl")
    assert chat.messages[1].mes == "two"
    assert len(chat.warnings) == 1 and chat.warnings[0].startswith("line 3: mes differs from swipes[1]")


def test_swipe_info_keeps_its_own_extra():
    # token_count was set on the message after the last sync: the swipe's entry keeps what the file
    # has (issue 24: the message's own extra is never copied into swipe_info), and is written back so.
    msg = {"name": "A", "is_user": False, "is_system": False, "mes": "b", "send_date": "2024-01-02T00:00:00.000Z",
           "swipes": ["a", "b"], "swipe_id": 1,
           "swipe_info": [{"send_date": "2024-01-01T00:00:00.000Z", "extra": {}},
                          {"send_date": "2024-01-02T00:00:00.000Z", "extra": {"model": "m"}}],
           "extra": {"model": "m", "token_count": 12}}
    chat = parse_chat_jsonl(jsonl(NEW_HEADER, msg), "c.jsonl")
    line = chat.messages[0]
    assert line.swipe_info[1]["extra"] == {"model": "m"}
    assert json.loads(write_chat_jsonl(chat.header, [line]).split("\n")[1]) == msg
    assert line.swipe_info[0] == {"send_date": "2024-01-01T00:00:00.000Z", "extra": {}}


def test_unreadable_send_date_is_kept_with_a_warning():
    msg = {"name": "A", "mes": "x", "send_date": "the day after tomorrow"}
    chat = parse_chat_jsonl(jsonl(NEW_HEADER, USER, msg), "c.jsonl")
    assert chat.messages[1].send_date == "the day after tomorrow"
    assert chat.messages[1].sent_at is None
    assert len(chat.warnings) == 1 and chat.warnings[0].startswith("line 3: send_date")


def test_bom_blank_lines_crlf_and_line_separator_in_text():
    text = "one line\u2028still the same line"  # U+2028 must not split the line
    data = b"\xef\xbb\xbf" + jsonl(NEW_HEADER, {"name": "A", "mes": text}, newline="\r\n") + b"\r\n\n   \n"
    chat = parse_chat_jsonl(data, "c.jsonl")
    assert chat.header == NEW_HEADER
    assert [m.mes for m in chat.messages] == [text]
    assert chat.warnings == []


def test_line_numbers_count_blank_lines():
    data = jsonl(NEW_HEADER) + b"\n\n" + jsonl(USER)
    assert parse_chat_jsonl(data, "c.jsonl").messages[0].line_no == 4


# --- send_date forms (utils.js parseTimestamp) ----------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    ("2026-11-30T20:35:37.123Z", at(2026, 11, 30, 20, 35, 37, 123)),          # 1.18 toISOString
    ("2024-07-12T03:31:37+02:00", at(2024, 7, 12, 1, 31, 37)),                # offset → UTC
    ("2024-07-12T01:31:37", at(2024, 7, 12, 1, 31, 37)),                      # no zone → UTC
    ("June 19, 2023 2:20pm", at(2023, 6, 19, 14, 20)),
    ("June 19, 2023 12:05am", at(2023, 6, 19, 0, 5)),                         # 12am is midnight
    ("December 1, 2023 12:30PM", at(2023, 12, 1, 12, 30)),                    # 12pm is noon
    ("Jan 5, 2024 9:07am", at(2024, 1, 5, 9, 7)),
    ("2024-7-12@01h31m37s", at(2024, 7, 12, 1, 31, 37)),
    ("2024-07-12@01h31m37s123ms", at(2024, 7, 12, 1, 31, 37, 123)),
    ("2024-6-5 @14h 56m 50s 682ms", at(2024, 6, 5, 14, 56, 50, 682)),
    ("2024-6-5 @14h 56m 50s 7ms", at(2024, 6, 5, 14, 56, 50, 7)),             # ms padded: .007
    (1720747897000, at(2024, 7, 12, 1, 31, 37)),                              # Unix ms
    ("1720747897000", at(2024, 7, 12, 1, 31, 37)),                            # Unix ms as digits
    (datetime(2024, 7, 12, 1, 31, 37), at(2024, 7, 12, 1, 31, 37)),
])
def test_parse_send_date_forms(value, expected):
    parsed = parse_send_date(value)
    assert parsed == expected
    assert parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize("value", [
    None, "", 0, -5, float("nan"), True, "yesterday", "Smarch 3, 2023 2:20pm", "2024-13-40@01h31m37s", {"a": 1},
])
def test_parse_send_date_rejects(value):
    assert parse_send_date(value) is None


def test_format_send_date_is_the_118_iso_form():
    assert format_send_date(datetime(2026, 11, 30, 20, 35, 37, 123456, tzinfo=UTC)) == "2026-11-30T20:35:37.123Z"
    plus_two = timezone(timedelta(hours=2))
    assert format_send_date(datetime(2026, 11, 30, 22, 35, 37, tzinfo=plus_two)) == "2026-11-30T20:35:37.000Z"
    assert format_send_date(datetime(2024, 7, 12, 1, 31, 37)) == "2024-07-12T01:31:37.000Z"
    when = at(2024, 7, 12, 1, 31, 37, 5)
    assert parse_send_date(format_send_date(when)) == when


# --- broken files ----------------------------------------------------------------------


def test_garbled_json_on_line_3_names_the_line_and_column():
    data = jsonl(NEW_HEADER, USER) + b'{"name": "A", "mes": "x",, }\n'
    with pytest.raises(FormatError) as err:
        parse_chat_jsonl(data, "bad.jsonl")
    assert err.value.field == "line 3"
    assert err.value.file == "bad.jsonl"
    assert "column 26" in err.value.reason


def test_swipes_not_a_list_is_an_error():
    with pytest.raises(FormatError) as err:
        parse_chat_jsonl(jsonl(NEW_HEADER, {"name": "A", "mes": "x", "swipes": "x"}), "c.jsonl")
    assert err.value.field == "line 2: swipes"


def test_swipes_with_a_non_string_is_an_error():
    with pytest.raises(FormatError) as err:
        parse_chat_jsonl(jsonl(NEW_HEADER, USER, {"name": "A", "mes": "x", "swipes": ["x", 3]}), "c.jsonl")
    assert err.value.field == "line 3: swipes"


def test_mes_not_a_string_is_an_error():
    with pytest.raises(FormatError) as err:
        parse_chat_jsonl(jsonl(NEW_HEADER, USER, USER, {"name": "A", "mes": 5}), "c.jsonl")
    assert err.value.field == "line 4: mes"


def test_line_that_is_not_an_object_is_an_error():
    with pytest.raises(FormatError) as err:
        parse_chat_jsonl(jsonl(NEW_HEADER, [1, 2]), "c.jsonl")
    assert err.value.field == "line 2"
    assert "list" in err.value.reason


@pytest.mark.parametrize("data", [b"", b"\n\n  \n", b"\xef\xbb\xbf"])
def test_empty_file_is_an_error(data):
    with pytest.raises(FormatError) as err:
        parse_chat_jsonl(data, "empty.jsonl")
    assert err.value.field == ""
    assert "empty" in err.value.reason


def test_non_utf8_names_the_line():
    data = jsonl(NEW_HEADER) + '{"name": "A", "mes": "café"}\n'.encode("latin-1")
    with pytest.raises(FormatError) as err:
        parse_chat_jsonl(data, "latin1.jsonl")
    assert err.value.field == "line 2"
    assert "UTF-8" in err.value.reason


# --- writing ---------------------------------------------------------------------------


def test_round_trip_keeps_messages_swipes_extra_and_header():
    first = parse_chat_jsonl(full_chat(), "c.jsonl")
    text = write_chat_jsonl(first.header, first.messages)
    second = parse_chat_jsonl(text.encode("utf-8"), "c.jsonl")
    assert second.header == NEW_HEADER
    assert second.warnings == []

    def shape(line: ChatLine) -> tuple:
        return (line.name, line.is_user, line.is_system, line.swipes, line.swipe_id, line.mes, line.extra,
                line.send_date, line.sent_at, line.swipe_info)

    assert [shape(m) for m in second.messages] == [shape(m) for m in first.messages]
    assert second.messages[2].raw["x_unknown_top"] == [1, 2]
    assert second.messages[2].raw["title"] == ""
    assert second.messages[2].raw["gen_finished"] == "2026-11-30T20:35:37.100Z"


def test_written_text_is_one_compact_object_per_line():
    chat = parse_chat_jsonl(full_chat(), "c.jsonl")
    text = write_chat_jsonl(chat.header, chat.messages)
    assert text.endswith("\n") and not text.endswith("\n\n")
    lines = text.split("\n")[:-1]
    assert len(lines) == 6
    assert json.loads(lines[0]) == NEW_HEADER
    assert lines[0] == json.dumps(NEW_HEADER, separators=(",", ":"))


def test_old_header_round_trips_as_given():
    chat = parse_chat_jsonl(jsonl(OLD_HEADER, USER), "old.jsonl")
    again = parse_chat_jsonl(write_chat_jsonl(chat.header, chat.messages).encode(), "old.jsonl")
    assert again.header == OLD_HEADER and again.user_name == "Ren"


def test_message_without_swipes_is_written_without_swipe_fields():
    chat = parse_chat_jsonl(jsonl(NEW_HEADER, USER), "c.jsonl")
    written = json.loads(write_chat_jsonl(chat.header, chat.messages).split("\n")[1])
    assert written == USER


def test_changing_swipe_id_writes_that_swipe_and_its_info():
    chat = parse_chat_jsonl(full_chat(), "c.jsonl")
    line = chat.messages[2]
    line.swipe_id = 0
    written = json.loads(write_chat_jsonl(chat.header, [line]).split("\n")[1])
    assert written["mes"] == "First reply."
    assert written["swipe_id"] == 0
    assert written["send_date"] == "2026-11-30T20:30:00.000Z"
    assert written["gen_started"] == "2026-11-30T20:29:55.000Z"
    assert written["extra"] == {"api": "openai", "model": "gpt-a"}
    assert written["swipes"] == ["First reply.", "Second reply.", "Third reply."]
    assert written["x_unknown_top"] == [1, 2]


def test_line_built_in_code_is_backfilled_and_clamped():
    line = ChatLine(line_no=0, name="Seraphina", is_user=False, is_system=False, swipes=["a", "b"], swipe_id=9,
                    send_date="2026-01-01T00:00:00.000Z", extra={"model": "m"})
    written = json.loads(write_chat_jsonl({}, [line]).split("\n")[1])
    assert written["mes"] == "b" and written["swipe_id"] == 1
    # Backfilled as ensureSwipes does; the message's own extra is not copied in (issue 24).
    assert written["swipe_info"] == [{"send_date": "2026-01-01T00:00:00.000Z", "extra": {}},
                                     {"send_date": "2026-01-01T00:00:00.000Z", "extra": {}}]
    assert written["extra"] == {"model": "m"}


def test_empty_header_gets_the_savechat_defaults():
    text = write_chat_jsonl({}, [])
    assert json.loads(text) == {"chat_metadata": {}, "user_name": "unused", "character_name": "unused"}


def test_headerless_round_trip_becomes_importable():
    chat = parse_chat_jsonl(jsonl(USER), "headless.jsonl")
    again = parse_chat_jsonl(write_chat_jsonl(chat.header, chat.messages).encode(), "headless.jsonl")
    assert again.warnings == [] and again.chat_metadata == {}
    assert [m.mes for m in again.messages] == ["Where am I?"]


def test_lone_surrogate_is_escaped_so_the_text_encodes():
    line = ChatLine(line_no=0, name="A", is_user=False, is_system=False, swipes=["cut \ud83d"])
    text = write_chat_jsonl(NEW_HEADER, [line])
    encoded = text.encode("utf-8")
    assert "\\ud83d" in text
    # Read back, the half emoji (no UTF-8 text can hold it) becomes U+FFFD, named in a warning.
    parsed = parse_chat_jsonl(encoded, "c.jsonl")
    assert parsed.messages[0].mes == "cut \ufffd"
    assert parsed.warnings == ["line 2.mes: a lone UTF-16 surrogate (half of an emoji) was replaced by U+FFFD"]


def test_writer_refuses_a_message_without_swipes():
    line = ChatLine(line_no=5, name="A", is_user=False, is_system=False, swipes=[])
    with pytest.raises(ValueError, match="line 5"):
        write_chat_jsonl(NEW_HEADER, [line])


# --- sniffing --------------------------------------------------------------------------


def test_chat_suffixes():
    assert CHAT_SUFFIXES == (".jsonl",)


@pytest.mark.parametrize(("data", "expected"), [
    (full_chat(), True),
    (jsonl(NEW_HEADER), True),                                        # header-only, has chat_metadata
    (jsonl(USER, USER), True),                                        # headerless, two messages
    (b"\xef\xbb\xbf\n" + jsonl(OLD_HEADER, USER), True),
    (jsonl({"name": "Seraphina", "description": "A guardian."}), False),  # one-line V1 card
    (json.dumps({"name": "X", "first_mes": "hi"}, indent=2).encode(), False),  # pretty JSON
    (b"\x89PNG\r\n\x1a\n\x00\x00", False),
    (jsonl({"entries": {}}, {"entries": {}}), False),
    (b"", False),
])
def test_looks_like_chat_jsonl(data, expected):
    assert looks_like_chat_jsonl(data) is expected


def test_a_malformed_line_is_named_with_the_json_modules_own_words() -> None:
    # json's message "Unterminated string starting at" is followed by where: ": column 9",
    # not glued to another "at".
    with pytest.raises(FormatError) as raised:
        parse_chat_jsonl(b'{"user_name": "Ann"}\n{"mes": "abc', "chat.jsonl")
    assert str(raised.value) == "chat.jsonl: line 2: not JSON: Unterminated string starting at: column 9"
