"""SillyTavern group files: the definition `/api/groups/create` writes (src/endpoints/groups.js) and
group chat lines with `original_avatar` (group-chats.js), read, written back and refused with the
field named."""

from __future__ import annotations

import json

import pytest

from tavern_tui.errors import FormatError
from tavern_tui.formats.groups import (
    group_chat_line,
    parse_group,
    parse_group_chat,
    speaker_of,
    write_group,
    write_group_chat,
)

# What `/create` writes for a two-member group (defaults from groups.js: activation 0, generation 0,
# auto_mode_delay 5, empty join prefix/suffix, chat_id and chats from the id).
CREATED = {
    "id": "1733480000000", "name": "Glade", "members": ["Seraphina.png", "Shodan.png"],
    "avatar_url": "img/ai4.png", "allow_self_responses": False, "activation_strategy": 0,
    "generation_mode": 0, "disabled_members": [], "chat_metadata": {}, "fav": False,
    "chat_id": "Glade - 2024-12-06@10h00m00s", "chats": ["Glade - 2024-12-06@10h00m00s"],
    "auto_mode_delay": 5, "generation_mode_join_prefix": "", "generation_mode_join_suffix": "",
    "hideMutedSprites": True,
}


def _bytes(obj: object) -> bytes:
    return json.dumps(obj, indent=4).encode("utf-8")


def test_a_created_group_reads_with_its_members_strategy_and_chat() -> None:
    group = parse_group(_bytes(CREATED), "groups/1733480000000.json")
    assert (group.id, group.name, group.members) == ("1733480000000", "Glade", ["Seraphina.png", "Shodan.png"])
    assert (group.activation_strategy, group.generation_mode, group.join) == (0, 0, False)
    assert group.chat_id == "Glade - 2024-12-06@10h00m00s" and group.auto_mode_delay == 5


def test_writing_a_group_back_keeps_every_field_and_sillytaverns_indent() -> None:
    group = parse_group(_bytes(CREATED), "g.json")
    group.disabled_members.append("Shodan.png")
    group.activation_strategy = 3
    text = write_group(group)
    assert text.startswith('{\n    "id": "1733480000000"')  # JSON.stringify(group, null, 4)
    back = json.loads(text)
    assert back == {**CREATED, "disabled_members": ["Shodan.png"], "activation_strategy": 3}


def test_join_modes_and_an_older_file_without_optional_fields() -> None:
    minimal = parse_group(_bytes({"name": "Old", "members": ["A.png"], "generation_mode": 2}), "groups/77.json")
    assert minimal.id == "77" and minimal.join and minimal.chats == ["77"] and minimal.chat_id == "77"
    assert minimal.auto_mode_delay == 5 and minimal.disabled_members == []


@pytest.mark.parametrize(("change", "field", "reason"), [
    ({"members": "A.png"}, "members", "list of strings"),
    ({"disabled_members": [1]}, "disabled_members", "list of strings"),
    ({"activation_strategy": 7}, "activation_strategy", "0..3"),
    ({"generation_mode": "join"}, "generation_mode", "must be a number"),
    ({"name": ["x"]}, "name", "must be text"),
])
def test_a_bad_field_is_named(change: dict, field: str, reason: str) -> None:
    with pytest.raises(FormatError) as caught:
        parse_group(_bytes({**CREATED, **change}), "bad.json")
    assert caught.value.field == field and reason in caught.value.reason and caught.value.file == "bad.json"


def test_a_file_without_members_is_not_a_group() -> None:
    with pytest.raises(FormatError, match="not a SillyTavern group: no members list"):
        parse_group(_bytes({"name": "card?", "description": "x"}), "card.json")


def test_group_chat_speakers_and_a_round_trip_with_swipes() -> None:
    names = {"Seraphina.png": "Seraphina", "Shodan.png": "SHODAN"}
    lines = [
        group_chat_line("Ann", "Hello, both.", avatar=None, is_user=True),
        group_chat_line("Seraphina", "Welcome.", avatar="Seraphina.png", swipes=["Welcome.", "Hi, Ann."], swipe_id=1),
        group_chat_line("SHODAN", "Insect.", avatar="Shodan.png"),
    ]
    text = write_group_chat(lines, {"note": "kept"})
    chat = parse_group_chat(text.encode("utf-8"), "group chats/Glade.jsonl")
    assert chat.chat_metadata == {"note": "kept"} and chat.warnings == []
    assert [(m.name, m.mes, speaker_of(m, names)) for m in chat.messages] == [
        ("Ann", "Hello, both.", None), ("Seraphina", "Hi, Ann.", "Seraphina.png"), ("SHODAN", "Insect.", "Shodan.png")]
    assert chat.messages[1].swipes == ["Welcome.", "Hi, Ann."]


def test_a_headerless_group_chat_from_before_headers_and_a_name_only_speaker() -> None:
    # Group chats were messages only (saveGroupChat posted `chat` as is); replies before
    # `original_avatar` are matched by name, as activateSwipe does.
    raw = "\n".join(json.dumps(line) for line in [
        {"name": "Ann", "is_user": True, "mes": "Hi."},
        {"name": "SHODAN", "is_user": False, "mes": "Insect."},
        {"name": "Stranger", "is_user": False, "mes": "Who?"},
    ])
    chat = parse_group_chat(raw.encode("utf-8"), "old.jsonl")
    names = {"Seraphina.png": "Seraphina", "Shodan.png": "SHODAN"}
    assert chat.warnings == [] and [speaker_of(m, names) for m in chat.messages] == [None, "Shodan.png", None]
