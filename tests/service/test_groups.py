"""Group chats in the service: a group of corpus characters and its first playthrough, cast changes
(add, remove, mute) with clear refusals, and who replies next by the group's turn order."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavern_tui.assembly.group_order import Said
from tavern_tui.errors import NotFound, TavernError
from tavern_tui.service import Tavern


def _cast(tavern: Tavern, corpus_dir: Path) -> None:
    results = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png",
                                           corpus_dir / "cards" / "shodan_v2_pure.png",
                                           corpus_dir / "cards" / "coding_sensei_v2.png"])
    assert all(r.ok for r in results), [r.error for r in results]


def test_a_new_group_has_its_cast_in_order_and_a_playthrough_of_it(tavern: Tavern, corpus_dir: Path) -> None:
    _cast(tavern, corpus_dir)
    group, playthrough = tavern.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy="list")
    assert [m.name for m in group.members] == ["Seraphina", "Shodan"]
    assert (group.strategy, group.mode, group.playthroughs) == ("list", "swap", (playthrough.id,))
    assert playthrough.character_name == "Seraphina"  # the first member: what reads a character keeps working
    assert tavern.groups.group_of(playthrough.id) == group
    assert tavern.groups.group("glade").id == group.id and tavern.groups.group(str(group.id)).name == "Glade"
    # Seraphina's card holds extensions.talkativeness 0.5; Shodan's extensions hold only "chub"
    # (FACTS.md): unset, which the turn order reads as SillyTavern's default 0.5.
    assert [m.talkativeness for m in group.members] == [0.5, None]


def test_cast_changes_and_their_refusals(tavern: Tavern, corpus_dir: Path) -> None:
    _cast(tavern, corpus_dir)
    tavern.groups.new_group("Glade", ["Seraphina", "Shodan"])
    group = tavern.groups.add_member("Glade", "Coding Sensei")
    assert [m.name for m in group.members] == ["Seraphina", "Shodan", "Coding Sensei"]
    group = tavern.groups.set_muted("Glade", "Shodan", True)
    assert [m.muted for m in group.members] == [False, True, False]
    group = tavern.groups.remove_member("Glade", "Seraphina")
    assert [m.name for m in group.members] == ["Shodan", "Coding Sensei"]
    with pytest.raises(TavernError, match="in the group already"):
        tavern.groups.add_member("Glade", "Shodan")
    with pytest.raises(TavernError, match="not a member of 'Glade'"):
        tavern.groups.set_muted("Glade", "Seraphina", True)
    with pytest.raises(NotFound, match="no group named 'Meadow'; groups: 1 'Glade'"):
        tavern.groups.group("Meadow")
    with pytest.raises(TavernError, match="named twice"):
        tavern.groups.new_group("Twice", ["Shodan", "Shodan"])
    with pytest.raises(ValueError, match="unknown group strategy 'round'"):
        tavern.groups.new_group("Round", ["Shodan"], strategy="round")


def test_next_speakers_follow_the_groups_order(tavern: Tavern, corpus_dir: Path) -> None:
    _cast(tavern, corpus_dir)
    group, _ = tavern.groups.new_group("Glade", ["Seraphina", "Shodan", "Coding Sensei"], strategy="list")
    ids = [m.character_id for m in group.members]
    user = Said(None, "Ann", "Hello.", is_user=True)
    assert tavern.groups.next_speakers(group, [], "Hello.") == ids
    muted = tavern.groups.set_muted("Glade", "Shodan", True)
    assert tavern.groups.next_speakers(muted, [user], "Hello.") == [ids[0], ids[2]]
    natural = tavern.groups.set_strategy("Glade", "natural")
    # A mention goes first; the rest roll their talkativeness (0.5 each), seeded.
    first = tavern.groups.next_speakers(natural, [user], "Sensei, a question.", seed="p1:3")
    assert first[0] == ids[2] and ids[1] not in first
    assert tavern.groups.next_speakers(natural, [user], "Sensei, a question.", seed="p1:3") == first


def test_a_group_name_is_its_own_and_a_members_solo_chats_stay_apart(tavern: Tavern, corpus_dir: Path) -> None:
    _cast(tavern, corpus_dir)
    group, playthrough = tavern.groups.new_group("Glade", ["Seraphina", "Shodan"])
    with pytest.raises(TavernError, match="a group named 'glade' exists already"):
        tavern.groups.new_group("glade", ["Shodan"])
    with pytest.raises(TavernError, match="a character is named 'Shodan'"):
        tavern.groups.new_group("Shodan", ["Seraphina"])
    with pytest.raises(TavernError, match="named twice among the members: Shodan"):
        tavern.groups.new_group("Twice", ["Shodan", "Shodan"])
    # The group's chat is not Seraphina's: her chats list none, and `tavern chat Seraphina` starts a solo one.
    seraphina = tavern.library.find_character("Seraphina").id
    assert tavern.playthroughs.playthroughs(seraphina) == []
    solo = tavern.playthroughs.resolve(seraphina)
    assert solo.id != playthrough.id and tavern.groups.group_of(solo.id) is None
    assert [p.id for p in tavern.playthroughs.playthroughs()] == [solo.id, playthrough.id]
    assert [p.id for p in tavern.playthroughs.playthroughs(group_id=group.id)] == [playthrough.id]
