"""Beliefs that corroborate (issue 24 item 6): the same preference in other words supports one
belief (normalised containment: the shorter value, the longer adding only a qualifying phrase),
false merges stay apart, and a first-person statement inside a question counts. The nomination
threshold stays as the seed sets it (two separate messages, seed 002 decision 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.persona.corroborate import same_belief
from tavern_tui.persona.extract import extract_beliefs
from tavern_tui.persona.nominate import NominationRules
from tavern_tui.service import Tavern


def key(text: str) -> str:
    [candidate] = extract_beliefs(text)
    return candidate.key


@pytest.mark.parametrize(("a", "b"), [
    ("I love sailing on the lake at dawn.", "Honestly, I love sailing on the lake."),  # the pair
    ("I love sailing.", "I love sailing on the lake."),
    ("I hate mornings.", "I hate mornings in winter."),
    ("I love the sea.", "I love sea."),  # articles do not count
])
def test_the_same_preference_in_other_words_is_one_belief(a: str, b: str) -> None:
    assert same_belief(key(a), key(b)) and same_belief(key(b), key(a))


@pytest.mark.parametrize(("a", "b"), [
    ("I love cats.", "I love cats' enemies."),  # the false merge: another thing liked
    ("I love cats.", "I love cats and dogs."),  # more things
    ("I love sailing.", "I love sailing boats."),  # another noun
    ("I love cats.", "I hate cats."),  # another relation (that one supersedes, it does not corroborate)
    ("My name is Sam.", "My name is Sam Vimes."),  # containment is for preferences only
])
def test_false_merges_stay_apart(a: str, b: str) -> None:
    assert not same_belief(key(a), key(b))


@pytest.mark.parametrize("text", ["Did I mention I love sailing?", "did I ever tell you that I love sailing?",
                                  "Have I told you I love sailing?"])
def test_a_statement_inside_a_question_counts(text: str) -> None:
    assert [c.key for c in extract_beliefs(text)] == ["likes:sailing"]


@pytest.mark.parametrize("text", ["Do I love sailing?", "Did you mention I love sailing?", "Do you love sailing?"])
def test_other_questions_still_state_nothing(text: str) -> None:
    assert extract_beliefs(text) == []


def test_the_nomination_threshold_is_unchanged() -> None:
    assert NominationRules().min_corroborations == 2


def chat(tmp_path: Path, said: list[str]) -> Path:
    lines: list[dict] = [{"user_name": "Ann", "character_name": "Mira", "chat_metadata": {}},
                         {"name": "Mira", "is_user": False, "is_system": False, "mes": "Welcome."}]
    for text in said:
        lines += [{"name": "Ann", "is_user": True, "is_system": False, "mes": text},
                  {"name": "Mira", "is_user": False, "is_system": False, "mes": "Oh?"}]
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def mira(tavern: Tavern, tmp_path: Path) -> int:
    (tmp_path / "mira.json").write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0",
                                                    "data": {"name": "Mira", "first_mes": "Welcome."}}))
    [result] = tavern.imports.import_paths([tmp_path / "mira.json"])
    return result.id


def test_two_wordings_corroborate_one_belief_and_nominate_it(tavern: Tavern, mira: int, tmp_path: Path) -> None:
    path = chat(tmp_path, ["I love sailing on the lake at dawn.", "honestly, I love sailing on the lake",
                           "Did I mention I love sailing?"])
    [result] = tavern.imports.import_paths([path], character="Mira")
    tavern.persona.consolidate(result.id)
    [belief] = tavern.persona.beliefs()
    assert belief.key == "likes:sailing on the lake at dawn"  # the first statement stays
    assert belief.corroborations == 3
    assert [b.id for b in tavern.persona.nominations()] == [belief.id]


def test_a_false_merge_stays_two_beliefs_none_nominated(tavern: Tavern, mira: int, tmp_path: Path) -> None:
    [result] = tavern.imports.import_paths([chat(tmp_path, ["I love cats.", "I love cats' enemies."])],
                                           character="Mira")
    tavern.persona.consolidate(result.id)
    beliefs = tavern.persona.beliefs()
    assert sorted(b.key for b in beliefs) == ["likes:cats", "likes:cats' enemies"]
    assert all(b.corroborations == 1 for b in beliefs)
    assert tavern.persona.nominations() == []  # each said once: below the threshold
