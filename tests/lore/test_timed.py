"""Sticky, cooldown and delay across steps (SillyTavern `WorldInfoTimedEffects`), per branch."""

from __future__ import annotations

import copy

from tavern_tui.lore.context import ActivationContext, ScanMessage
from tavern_tui.lore.model import WorldInfoEntry
from tavern_tui.lore.result import ActivationResult
from tavern_tui.lore.timed import TimedEffect, TimedState, entry_hash, evaluate_timed

from ._util import book, entry, fired, reason, run


class Chat:
    """A user/assistant chat that runs one activation per user message, carrying the timed state."""

    def __init__(self, *entries: WorldInfoEntry) -> None:
        self.book = book(*entries)
        self.messages: list[ScanMessage] = []
        self.state = TimedState()

    def send(self, text: str) -> ActivationResult:
        ctx = ActivationContext(messages=list(self.messages), input=text, user_name="User", timed_state=self.state)
        result = run(self.book, ctx)
        self.state = result.new_timed_state
        self.messages += [ScanMessage("User", text), ScanMessage("Alice", "(reply)")]
        return result


def test_sticky_keeps_firing_without_its_key_for_n_messages() -> None:
    chat = Chat(entry(1, ["dragon"], sticky=3))
    first = chat.send("a dragon!")  # chat length 1: sticky until length 4
    assert reason(first, 1) == "key"
    assert chat.state.sticky[("book", 1)].start == 1 and chat.state.sticky[("book", 1)].end == 4
    second = chat.send("what now?")  # length 3 < 4; "dragon" is 3 messages back, beyond depth 2
    assert fired(second) == {1} and reason(second, 1) == "sticky"
    third = chat.send("and now?")  # length 5 >= 4: ended
    assert fired(third) == set() and reason(third, 1) == "no_match"


def test_sticky_skips_the_probability_roll() -> None:
    e = entry(1, ["dragon"], sticky=3, probability=50)
    state = TimedState(sticky={("book", 1): TimedEffect(1, 4, False, entry_hash(e))})
    ctx = ActivationContext(messages=[ScanMessage("U", "x")] * 2, input="a dragon", timed_state=state)
    assert fired(run(book(e), ctx)) == {1}  # `run` fails on any roll


def test_cooldown_blocks_reactivation_for_n_messages() -> None:
    chat = Chat(entry(1, ["dragon"], cooldown=3))
    assert fired(chat.send("a dragon")) == {1}  # length 1: cooldown until 4
    blocked = chat.send("another dragon")  # length 3
    assert reason(blocked, 1) == "cooldown" and "4" in blocked.decision("book", 1).detail
    assert fired(chat.send("yet another dragon")) == {1}  # length 5


def test_cooldown_starts_when_sticky_ends() -> None:
    chat = Chat(entry(1, ["dragon"], sticky=3, cooldown=2))
    assert reason(chat.send("a dragon"), 1) == "key"  # length 1: sticky to 4
    assert reason(chat.send("a dragon"), 1) == "sticky"  # length 3
    ended = chat.send("a dragon")  # length 5: sticky ends, cooldown 5..7 starts at once
    assert reason(ended, 1) == "cooldown"
    assert chat.state.cooldown[("book", 1)].protected
    assert reason(chat.send("a dragon"), 1) == "key"  # length 7


def test_delay_compares_with_the_chat_length() -> None:
    e = entry(1, ["dragon"], delay=3)
    ctx = ActivationContext(messages=[ScanMessage("U", "dragon")], input="dragon")  # length 2
    assert reason(run(book(e), ctx), 1) == "delayed"
    longer = ActivationContext(messages=[ScanMessage("U", "x")] * 2, input="dragon")  # length 3
    assert fired(run(book(e), longer)) == {1}
    assert fired(run(book(e), ActivationContext(input="dragon", chat_length=40))) == {1}


def test_the_input_state_is_never_modified() -> None:
    e = entry(1, ["dragon"], sticky=2, cooldown=5)
    state = TimedState(sticky={("book", 9): TimedEffect(0, 1, False, "gone")})
    before = copy.deepcopy(state)
    result = run(book(e), ActivationContext(messages=[ScanMessage("U", "x")] * 3, input="dragon", timed_state=state))
    assert state == before
    assert ("book", 1) in result.new_timed_state.sticky and ("book", 9) not in result.new_timed_state.sticky


def test_a_fork_continues_from_its_parents_state() -> None:
    chat = Chat(entry(1, ["dragon"], sticky=5))
    chat.send("a dragon")
    fork = Chat(entry(1, ["dragon"], sticky=5))
    fork.messages, fork.state = list(chat.messages), TimedState.from_json(chat.state.to_json())
    assert reason(fork.send("elsewhere"), 1) == "sticky"


def test_effects_are_dropped_when_the_chat_did_not_advance_unless_protected() -> None:
    e = entry(1, [], sticky=3, cooldown=3)
    key = ("book", 1)
    h = entry_hash(e)
    state = TimedState(sticky={key: TimedEffect(5, 8, False, h)}, cooldown={key: TimedEffect(5, 8, True, h)})
    work = evaluate_timed(state, {key: e}, chat_length=5)  # a swipe: same length as when set
    assert key not in work.sticky and key in work.cooldown_active


def test_editing_an_entry_stops_applying_its_effect_until_the_window_ends() -> None:
    old = entry(1, ["dragon"], sticky=5)
    edited = entry(1, ["dragon"], sticky=5, content="new text")
    key = ("book", 1)
    state = TimedState(sticky={key: TimedEffect(1, 6, False, entry_hash(old))})
    work = evaluate_timed(state, {key: edited}, chat_length=3)
    assert key not in work.sticky_active and key in work.sticky  # kept, not applied
    assert key not in evaluate_timed(state, {key: edited}, chat_length=6).sticky


def test_retriggering_does_not_extend_a_running_window() -> None:
    chat = Chat(entry(1, ["dragon"], sticky=5))
    chat.send("dragon")
    first = chat.state.sticky[("book", 1)]
    chat.send("dragon again")
    assert chat.state.sticky[("book", 1)] == first


def test_state_round_trips_through_json() -> None:
    state = TimedState(sticky={("b", 1): TimedEffect(1, 4, False, "h1")},
                       cooldown={("b", "x"): TimedEffect(2, 9, True, "h2")})
    assert TimedState.from_json(state.to_json()) == state
    assert TimedState.from_json(None) == TimedState()
