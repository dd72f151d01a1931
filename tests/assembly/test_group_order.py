"""Group turn order, as SillyTavern's `group-chats.js` picks who replies (natural, list, manual,
pooled), with `extractAllWords`' ASCII words. Talkativeness 1 always wins its roll and 0 never
does (`talkativeness >= Math.random()`), so those orders are exact whatever the seed."""

from __future__ import annotations

import random

import pytest

from tavern_tui.assembly.group_order import Member, Said, Strategy, speakers, words

ALICE, BOB, CAROL = Member("alice.png", "Alice", 0.0), Member("bob.png", "Bob", 0.0), Member("carol.png", "Carol", 0.0)
USER = Said(None, "Ann", "Hello.", is_user=True)


def reply(member: Member, text: str = "...") -> Said:
    return Said(member.key, member.name, text)


def test_words_are_javascripts_ascii_word_runs_lower_cased() -> None:
    assert words("Bob's R2_D2, ok?") == ["bob", "s", "r2_d2", "ok"]
    assert words("青空 理 says Hi") == ["says", "hi"]  # \w is ASCII in JavaScript: CJK names have no words


def test_natural_mentions_come_first_in_the_order_of_the_words() -> None:
    got = speakers(Strategy.NATURAL, [ALICE, BOB, CAROL], [USER], "Carol, ask bob about it", rng=random.Random(1))
    assert got == ["carol.png", "bob.png"]


def test_natural_a_name_of_several_words_is_matched_by_any_of_them() -> None:
    knight = Member("k.png", "Sir Lancelot", 0.0)
    assert speakers(Strategy.NATURAL, [ALICE, knight], [USER], "Lancelot!", rng=random.Random(2)) == ["k.png"]


def test_natural_talkative_members_follow_the_mentions_in_a_seeded_shuffle() -> None:
    chatty_bob, chatty_carol = Member("bob.png", "Bob", 1.0), Member("carol.png", "Carol", 1.0)
    orders = set()
    for seed in range(40):
        got = speakers(Strategy.NATURAL, [ALICE, chatty_bob, chatty_carol], [USER], "Alice?", rng=random.Random(seed))
        assert got[0] == "alice.png" and sorted(got[1:]) == ["bob.png", "carol.png"]
        again = speakers(Strategy.NATURAL, [ALICE, chatty_bob, chatty_carol], [USER], "Alice?", rng=random.Random(seed))
        assert again == got  # the same seed plays the same round
        orders.add(tuple(got))
    assert len(orders) == 2  # both shuffles occur


def test_natural_without_input_the_last_author_does_not_answer_itself_unless_allowed() -> None:
    chatty = [Member("bob.png", "Bob", 1.0), Member("carol.png", "Carol", 1.0)]
    chat = [USER, reply(chatty[0], "I'm Bob.")]
    for seed in range(10):
        assert speakers(Strategy.NATURAL, chatty, chat, rng=random.Random(seed)) == ["carol.png"]
    allowed = {tuple(speakers(Strategy.NATURAL, chatty, chat, allow_self_responses=True, rng=random.Random(seed)))
               for seed in range(10)}
    assert all(sorted(order) == ["bob.png", "carol.png"] for order in allowed)


def test_natural_nobody_rolled_so_one_talkative_member_is_picked() -> None:
    shy = Member("bob.png", "Bob", 0.0)
    quiet = Member("carol.png", "Carol", 1e-9)  # talkativeness above 0: the only one in the random pool
    for seed in range(10):
        assert speakers(Strategy.NATURAL, [shy, quiet], [USER], "hello", rng=random.Random(seed)) == ["carol.png"]


def test_natural_unset_talkativeness_is_one_half() -> None:
    unset = [Member(f"m{i}.png", f"M{i}") for i in range(200)]
    got = speakers(Strategy.NATURAL, unset, [USER], "hello", rng=random.Random(7))
    assert 70 < len(got) < 130  # about half of 200 win a 0.5 roll


def test_list_is_every_unmuted_member_in_the_groups_order() -> None:
    muted_bob = Member("bob.png", "Bob", muted=True)
    assert speakers(Strategy.LIST, [CAROL, muted_bob, ALICE], [USER], "hi") == ["carol.png", "alice.png"]


def test_pooled_prefers_members_who_have_not_replied_since_the_person_spoke() -> None:
    assert speakers(Strategy.POOLED, [ALICE, BOB], [USER, reply(ALICE)], rng=random.Random(3)) == ["bob.png"]
    # Everyone has replied: anyone but the last reply's author.
    everyone = [USER, reply(ALICE), reply(BOB)]
    assert speakers(Strategy.POOLED, [ALICE, BOB], everyone, rng=random.Random(3)) == ["alice.png"]
    # A new line from the person starts a new pool: one member, any of them.
    got = {speakers(Strategy.POOLED, [ALICE, BOB], [USER, reply(ALICE)], "again", rng=random.Random(s))[0]
           for s in range(20)}
    assert got == {"alice.png", "bob.png"}


def test_manual_waits_for_the_person_to_pick_and_a_turn_asked_without_input_is_one_member() -> None:
    assert speakers(Strategy.MANUAL, [ALICE, BOB], [USER], "hi") == []
    assert speakers(Strategy.MANUAL, [ALICE, BOB], [USER], rng=random.Random(4)) in (["alice.png"], ["bob.png"])
    assert speakers(Strategy.MANUAL, [Member("a", "A", muted=True)], [USER]) == []


def test_every_muted_member_means_nobody_replies() -> None:
    muted = [Member("a", "A", 1.0, muted=True), Member("b", "B", 1.0, muted=True)]
    for strategy in Strategy:
        assert speakers(strategy, muted, [USER], "A and B", rng=random.Random(0)) == []


def test_strategy_names_and_sillytaverns_numbers() -> None:
    assert [Strategy.parse(n) for n in ("natural", "LIST", "manual", "pooled")] == list(Strategy)
    assert Strategy.parse(3) is Strategy.POOLED and Strategy.parse("1") is Strategy.LIST
    with pytest.raises(ValueError, match="unknown group strategy 'round'"):
        Strategy.parse("round")
