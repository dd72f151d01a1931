"""A step's frozen request sends the model-visible surface (no placeholder replies, no hidden
messages: SillyTavern's `is_system`) less what the fit left out; between two steps it looks only
at the first message (the system section) and the messages after the part shared with the last
surface it froze, and gives what a walk of the whole surface gives."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from tavern_tui.engine.log import HIDDEN_KEY, PLACEHOLDER_SOURCE, SurfaceMessage, sent_to_model
from tavern_tui.engine.step import freeze

NOW = datetime(2026, 12, 7, tzinfo=UTC)


def _message(seq: int, *, hidden: bool = False, placeholder: bool = False) -> SurfaceMessage:
    role = "user" if seq % 2 else "assistant"
    return SurfaceMessage((1, seq), f"{role}/message", role, f"line {seq}", None,
                          PLACEHOLDER_SOURCE if placeholder else None, NOW, {HIDDEN_KEY: True} if hidden else {})


def test_a_surface_that_goes_on_is_looked_at_from_where_the_last_one_ended(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    sendable = freeze._Sendable()
    first = [_message(n, hidden=n == 7) for n in range(1, 301)]
    kept, refs = sendable.of(first)
    assert [m.ref for m in kept] == refs == [(1, n) for n in range(1, 301) if n != 7]
    looked: list[SurfaceMessage] = []
    monkeypatch.setattr(freeze, "sent_to_model", lambda m: looked.append(m) or sent_to_model(m))
    # The same stored messages derived again (new objects, the events' own bodies), then new ones.
    later = [replace(m) for m in first] + [_message(301), _message(302, placeholder=True),
                                           _message(303, hidden=True), _message(304)]
    kept, refs = sendable.of(later)
    assert looked == [later[0], *later[300:]]  # the system section's place, then only the new messages
    assert kept == [m for m in later if sent_to_model(m)] and refs[-2:] == [(1, 301), (1, 304)]


def test_a_message_hidden_since_the_last_surface_is_looked_at_again() -> None:
    sendable = freeze._Sendable()
    first = [_message(n) for n in range(1, 301)]
    sendable.of(first)
    hidden = [*first[:100], replace(first[100], body={HIDDEN_KEY: True}), *first[101:]]  # SillyTavern's /hide
    kept, _refs = sendable.of(hidden)
    assert (1, 101) not in [m.ref for m in kept] and len(kept) == 299


def test_a_surface_that_does_not_go_on_is_looked_at_whole() -> None:
    sendable = freeze._Sendable()
    sendable.of([_message(n) for n in range(1, 301)])
    other = [_message(n, hidden=n == 2) for n in range(1, 5)]  # other bodies: another session
    kept, _refs = sendable.of(other)
    assert [m.ref for m in kept] == [(1, 1), (1, 3), (1, 4)]
