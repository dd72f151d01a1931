"""SillyTavern group files through the service: a group definition (`groups/<id>.json`, as
groups.js `/create` writes it) and its group chat (1.13+: header line, then messages with
`original_avatar`, as group-chats.js / script.js `saveReply` write them) imported into a group of
two corpus characters, read back with each reply's speaker, and exported so that every message,
speaker and swipe comes back; the refusals (a member not imported, a chat without its group)
store nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.formats.groups import parse_group, parse_group_chat
from tavern_tui.formats.sniff import GROUP, sniff_kind
from tavern_tui.service import Tavern
from tests.support.st_groups import DEFINITION, HEADER, LINES, SHODAN, USER
from tests.support.st_groups import write_st_group as _write


def _cast(tavern: Tavern, corpus_dir: Path) -> dict[str, int]:
    results = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png",
                                           corpus_dir / "cards" / "shodan_v2_pure.png"])
    assert all(r.ok for r in results), [r.error for r in results]
    return {c.name: c.id for c in tavern.library.characters()}


def test_a_group_and_its_chat_round_trip_every_message_speaker_and_swipe(tavern: Tavern, corpus_dir: Path,
                                                                         tmp_path: Path) -> None:
    ids = _cast(tavern, corpus_dir)
    definition, chat_file = _write(tmp_path)
    [made] = tavern.imports.import_paths([definition])
    assert (made.kind, made.error, made.name) == ("group", None, "Glade")
    group = tavern.groups.group(made.id)
    assert [(m.name, m.muted) for m in group.members] == [("Seraphina", False), ("Shodan", True)]
    assert (group.strategy, group.mode, group.allow_self_responses, group.playthroughs) == ("list", "join", True, ())

    [chat] = tavern.imports.import_paths([chat_file], group="Glade")
    assert chat.ok and chat.kind == "chat" and chat.warnings == (), chat.error
    assert tavern.groups.group_of(chat.id).id == group.id
    messages = tavern.playthroughs.messages(chat.id)
    assert [(m.role, m.speaker, m.content, m.character_id) for m in messages] == [
        ("user", "Ann", "Hello, both.", None),
        ("assistant", "Seraphina", "Hi, Ann.", ids["Seraphina"]),
        ("assistant", "Shodan", "Insect.", ids["Shodan"]),
    ]
    # The swipe not shown is a sibling (first of two, as in the file), and it is Seraphina's too.
    tree, _members = tavern.timeline.variant_tree(chat.id, bodies=True)
    replies = [v.row.body for v in tree.variants.values() if v.row.role == "assistant"]
    assert sorted((b["content"], b["name"], b["character_id"]) for b in replies) == [
        ("Hi, Ann.", "Seraphina", ids["Seraphina"]), ("Insect.", "Shodan", ids["Shodan"]),
        ("Welcome, traveller.", "Seraphina", ids["Seraphina"])]
    assert [(v.preview, v.position) for v in tavern.timeline.timeline(chat.id).variants if v.role == "assistant"] == [
        ("Welcome, traveller.", (1, 2)), ("Hi, Ann.", (2, 2)), ("Insect.", (1, 1))]

    exported = parse_group_chat(tavern.group_files.export_chat(chat.id).encode("utf-8"), "out.jsonl")
    assert exported.chat_metadata == {"note": "kept"}
    assert [m.raw for m in exported.messages] == LINES  # every field of every line, swipes and speakers
    assert [m.raw.get("original_avatar") for m in exported.messages] == [None, "Seraphina.png", "shodan_v2_pure.png"]

    back = json.loads(tavern.group_files.export_group("Glade"))
    assert back == DEFINITION  # the chat's title is its id, so `chats` and `chat_id` come back too
    assert parse_group(json.dumps(back).encode(), "g.json").members == DEFINITION["members"]


def test_importing_the_definition_again_makes_no_second_group(tavern: Tavern, corpus_dir: Path,
                                                              tmp_path: Path) -> None:
    _cast(tavern, corpus_dir)
    definition, _chat = _write(tmp_path)
    [first] = tavern.imports.import_paths([definition])
    [again] = tavern.imports.import_paths([definition])
    assert (again.ok, again.duplicate, again.id) == (True, True, first.id)
    assert [g.name for g in tavern.groups.groups()] == ["Glade"]


def test_a_member_not_imported_is_named_and_nothing_is_stored(tavern: Tavern, corpus_dir: Path,
                                                              tmp_path: Path) -> None:
    tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])
    definition, chat_file = _write(tmp_path)
    [result] = tavern.imports.import_paths([definition])
    assert result.error is not None and "'shodan_v2_pure.png'" in result.error
    assert "import its card first" in result.error and "Seraphina.png" not in result.error
    assert tavern.groups.groups() == []
    [chat] = tavern.imports.import_paths([chat_file])
    assert chat.error is not None and "pass --group GROUP" in chat.error
    assert tavern.playthroughs.playthroughs() == []


def test_a_group_chat_finds_the_group_that_lists_it_and_refuses_an_unknown_speaker(
        tavern: Tavern, corpus_dir: Path, tmp_path: Path) -> None:
    _cast(tavern, corpus_dir)
    definition, chat_file = _write(tmp_path)
    # A folder: `group chats/` sorts before `groups/`, but a chat is imported after its group.
    results = tavern.imports.import_paths([tmp_path])
    assert [(r.kind, r.error) for r in results] == [("group", None), ("chat", None)]
    assert tavern.groups.group("Glade").playthroughs == (results[1].id,)

    stranger = {**SHODAN, "name": "Stranger", "original_avatar": "Stranger.png"}
    odd = tmp_path / "odd.jsonl"
    odd.write_text("\n".join(json.dumps(line) for line in [HEADER, USER, stranger]), encoding="utf-8")
    [refused] = tavern.imports.import_paths([odd], group="Glade")
    assert refused.error is not None and "line 3: 'Stranger' (Stranger.png)" in refused.error
    assert "import the card first" in refused.error
    assert tavern.groups.group("Glade").playthroughs == (results[1].id,)


def test_a_group_made_here_exports_its_chat_with_each_speakers_card_file(tavern: Tavern, corpus_dir: Path) -> None:
    ids = _cast(tavern, corpus_dir)
    group, playthrough = tavern.groups.new_group("Made", ["Seraphina", "Shodan"])
    exported = parse_group_chat(tavern.group_files.export_chat(playthrough.id).encode("utf-8"), "out.jsonl")
    assert exported.header == {"chat_metadata": {}, "user_name": "unused", "character_name": "unused"}
    greeting = exported.messages[0]
    assert (greeting.name, greeting.raw["original_avatar"]) == ("Seraphina", "seraphina_chara_ccv3.png")
    back = json.loads(tavern.group_files.export_group(group.id))
    assert back["members"] == ["seraphina_chara_ccv3.png", "shodan_v2_pure.png"] and back["name"] == "Made"
    assert back["chats"] == [back["chat_id"]] and back["chat_id"].startswith("Made - ")
    assert ids  # both characters were imported


@pytest.mark.parametrize(("obj", "kind"), [
    ({"id": "1", "name": "G", "members": [], "chat_id": "1", "chat_metadata": {}}, GROUP),
    ({"name": "G", "members": ["a.png"], "activation_strategy": 0}, GROUP),
    ({"name": "Crew", "members": ["Ann"], "description": "a card with a members field"}, "character card"),
])
def test_a_group_definition_is_sniffed_before_the_chat_and_card_rules(obj: dict, kind: str) -> None:
    assert sniff_kind(obj) == kind


def test_a_chat_imported_into_a_group_without_one_of_its_speakers_says_so(tavern: Tavern, corpus_dir: Path,
                                                                          tmp_path: Path) -> None:
    _cast(tavern, corpus_dir)
    tavern.imports.import_paths([corpus_dir / "cards" / "skynet_v1_legacy.png"])
    tavern.groups.new_group("Machines", ["Shodan", "Skynet"])
    _definition, chat_file = _write(tmp_path)  # Seraphina's and Shodan's lines
    [result] = tavern.imports.import_paths([chat_file], group="Machines")
    assert result.error is None
    assert result.warnings == ("Seraphina wrote replies here but is not in 'Machines'; kept under their names",)
