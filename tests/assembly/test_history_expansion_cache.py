"""The stored chat's macros are expanded on every build without writing variables (SillyTavern
re-runs substituteParams on the chat each generation); an expansion that cannot depend on state is
cached across builds, one that reads variables, time or chance is not."""

from __future__ import annotations

import random

import pytest

from tavern_tui.assembly.macros import MacroContext, engine, history_expander


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    original = engine._Evaluator.run

    def counting(self: engine._Evaluator) -> str:
        seen.append(self.raw_text)
        return original(self)

    monkeypatch.setattr(engine._Evaluator, "run", counting)
    with engine._history_lock:
        engine._history_cache.clear()
    return seen


def test_a_state_free_expansion_is_reused(runs: list[str]) -> None:
    ctx = MacroContext(char="Mira", user="Ann", chat_id="c1")
    text = "{{char}} waves at {{user}}.{{// aside}} {{pick::a::b::c}}"
    first = history_expander(ctx)(text)
    assert first.startswith("Mira waves at Ann. ")
    assert history_expander(ctx)(text) == first and runs == [text]  # the second build reads the cache
    # Another card name or chat id is another key.
    assert history_expander(MacroContext(char="Lio", user="Ann", chat_id="c1"))(text).startswith("Lio waves")
    assert len(runs) == 2


def test_a_state_reading_expansion_is_done_again_and_writes_nothing(runs: list[str]) -> None:
    ctx = MacroContext(char="Mira", local_vars={"mood": "calm"})
    text = "Mood: {{getvar::mood}}{{incvar::n}} {{if .mood}}set{{/if}}"
    assert history_expander(ctx)(text) == "Mood: calm1 set"
    ctx.local_vars["mood"] = "angry"
    assert history_expander(ctx)(text) == "Mood: angry1 set"
    assert ctx.local_vars == {"mood": "angry"} and len(runs) == 2  # read-only, never cached
    rolled = "{{roll::1d20}} {{random::x::y}}"
    history_expander(MacroContext(rng=random.Random(1)))(rolled)
    history_expander(MacroContext(rng=random.Random(1)))(rolled)
    assert runs.count(rolled) == 2


def test_macro_free_text_is_returned_as_it_is(runs: list[str]) -> None:
    text = "No macros here."
    assert history_expander(MacroContext())(text) is text and runs == []
