"""A new group chat opens with every member's greeting, as SillyTavern's `getGroupChat` does
(`public/scripts/group-chats.js`): for each of `group.members` in order, the member's first message
(`getFirstCharacterMessage`: `name` is the member's) is pushed; a member without one is skipped
(`if (!(mes?.mes)) continue;`); `disabled_members` (muted) are not consulted there, so a muted
member's greeting is posted too. The last greeting swipes among its own member's greetings; a
group whose other members have no greeting swipes the first member's as a one-character chat does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.errors import TavernError
from tavern_tui.service import Tavern

CARDS = {
    "Mira": {"first_mes": "Hi {{user}}.", "alternate_greetings": ["Second hello.", "Third hello."]},
    "Bo": {"first_mes": "{{char}} waves at {{user}}.", "alternate_greetings": ["Bo nods."]},
    "Quiet": {"first_mes": ""},
    "Cy": {"first_mes": "Cy hums."},
}


@pytest.fixture
def ids(tavern: Tavern, tmp_path: Path) -> dict[str, int]:
    out = {}
    for name, fields in CARDS.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": name, **fields}}))
        [result] = tavern.imports.import_paths([path])
        assert result.ok, result.error
        out[name] = result.id
    return out


def _shown(tavern: Tavern, pid: int) -> list[tuple[str, str, int | None, str, str]]:
    return [(m.speaker, m.content, m.character_id, m.source, m.origin) for m in tavern.playthroughs.messages(pid)]


async def _drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


def test_each_members_greeting_is_posted_in_member_order_under_its_speaker(tavern: Tavern,
                                                                          ids: dict[str, int]) -> None:
    _group, playthrough = tavern.groups.new_group("Hall", ["Mira", "Quiet", "Bo", "Cy"], user_name="Ann")
    assert _shown(tavern, playthrough.id) == [
        ("Mira", "Hi Ann.", ids["Mira"], "opening", "engine"),
        ("Bo", "Bo waves at Ann.", ids["Bo"], "opening", "engine"),  # Quiet has none: skipped
        ("Cy", "Cy hums.", ids["Cy"], "opening", "engine")]
    assert playthrough.message_count == 3


def test_a_muted_members_greeting_is_posted_too(tavern: Tavern, ids: dict[str, int]) -> None:
    tavern.groups.new_group("Hall", ["Mira", "Cy"], user_name="Ann")
    tavern.groups.set_muted("Hall", "Cy", True)
    again = tavern.groups.new_playthrough("Hall", user_name="Ann")
    assert [(s, c) for s, c, *_ in _shown(tavern, again.id)] == [("Mira", "Hi Ann."), ("Cy", "Cy hums.")]


async def test_the_last_greeting_swipes_among_its_own_members_greetings(tavern: Tavern, ids: dict[str, int]) -> None:
    _group, playthrough = tavern.groups.new_group("Hall", ["Mira", "Bo"], user_name="Ann")
    pid = playthrough.id
    state = tavern.timeline.swipe_state(pid)
    assert (state.label, state.greeting) == ("1/2", True)  # Bo's first_mes and one alternate
    assert tavern.timeline.swipe(pid, +1).label == "2/2"
    assert _shown(tavern, pid) == [("Mira", "Hi Ann.", ids["Mira"], "opening", "engine"),
                                   ("Bo", "Bo nods.", ids["Bo"], "opening", "engine")]
    assert tavern.timeline.swipe(pid, +1).label == "2/2"  # no reply made up past the last greeting
    assert tavern.timeline.swipe(pid, -1).label == "1/2"
    assert [c for _s, c, *_ in _shown(tavern, pid)] == ["Hi Ann.", "Bo waves at Ann."]
    with pytest.raises(TavernError, match="greeting"):
        await _drain(tavern.steps.regenerate(pid))


def test_the_first_members_greeting_swipes_when_it_is_the_only_one(tavern: Tavern, ids: dict[str, int]) -> None:
    _group, playthrough = tavern.groups.new_group("Hall", ["Mira", "Quiet"], user_name="Ann")
    pid = playthrough.id
    assert tavern.timeline.swipe_state(pid).label == "1/3"  # first_mes and two alternates
    assert tavern.timeline.swipe(pid, +1).label == "2/3"
    assert tavern.timeline.swipe(pid, +1).label == "3/3"
    assert _shown(tavern, pid) == [("Mira", "Third hello.", ids["Mira"], "opening", "engine")]
    assert tavern.timeline.swipe(pid, -1).label == "2/3"
    assert [c for _s, c, *_ in _shown(tavern, pid)] == ["Second hello."]


def test_an_exported_group_chat_gives_each_greeting_its_own_members_swipes(tavern: Tavern,
                                                                          ids: dict[str, int]) -> None:
    _group, playthrough = tavern.groups.new_group("Hall", ["Mira", "Bo"], user_name="Ann")
    tavern.timeline.swipe(playthrough.id, +1)  # Bo's alternate greeting shown
    lines = [json.loads(line) for line in tavern.group_files.export_chat(playthrough.id).splitlines()[1:]]
    assert [(m["name"], m["mes"], m["swipes"], m["swipe_id"]) for m in lines] == [
        ("Mira", "Hi Ann.", ["Hi Ann.", "Second hello.", "Third hello."], 0),
        ("Bo", "Bo nods.", ["Bo waves at Ann.", "Bo nods."], 1)]
    assert [len(m["swipe_info"]) for m in lines] == [3, 2]
