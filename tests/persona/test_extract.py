"""Belief extraction from the person's own messages (seed 002 ADR-0079 decision 6).

Covers the deterministic extractor (`extract_beliefs`) and the validator of a model's JSON
answer (`parse_model_beliefs`).
"""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from tavern_tui.errors import FormatError
from tavern_tui.persona.extract import extract_beliefs
from tavern_tui.persona.lexicon import (
    ALL_CATEGORIES,
    CATEGORY_SENSITIVITY,
    HEDGED_CONFIDENCE,
    NEVER_NOMINATE_CATEGORIES,
    Candidate,
)
from tavern_tui.persona.model_extract import (
    EXTRACTION_PROMPT,
    MODEL_SOURCE,
    parse_model_beliefs,
)

# text, key, category, kind, durable, sensitivity: each text yields exactly this one candidate.
SINGLE_CASES = [
    ("My name is Sam.", "name:sam", "name", "direct", True, "low"),
    ("Call me Alex Smith, please.", "name:alex smith", "name", "direct", True, "low"),
    ("Hi! I'm called Jordan.", "name:jordan", "name", "direct", True, "low"),
    ("I like cats.", "likes:cats", "preference", "direct", True, "low"),
    ("I really love Studio Ghibli films!", "likes:studio ghibli films", "preference", "direct", True, "low"),
    ("i enjoy hiking", "likes:hiking", "preference", "direct", True, "low"),
    ("I'm a big fan of The Beatles", "likes:beatles", "preference", "direct", True, "low"),
    ("Pizza is my favourite food.", "likes:pizza", "preference", "direct", True, "low"),
    ("My favorite color is blue.", "likes:blue", "preference", "direct", True, "low"),
    ("I hate spiders.", "dislikes:spiders", "dislike", "direct", True, "low"),
    ("I can't stand horror movies", "dislikes:horror movies", "dislike", "direct", True, "low"),
    ("I don\u2019t like mushrooms", "dislikes:mushrooms", "dislike", "direct", True, "low"),
    ("I'm not a fan of country music", "dislikes:country music", "dislike", "direct", True, "low"),
    ("I am a teacher.", "identity:teacher", "identity", "direct", True, "normal"),
    ("I work as a nurse at the hospital", "identity:nurse", "identity", "direct", True, "normal"),
    ("I\u2019m a software engineer and a dad", "identity:software engineer", "identity", "direct", True, "normal"),
    ("I'm vegan", "identity:vegan", "identity", "direct", True, "normal"),
    ("Please don't include gore.", "boundary:gore", "boundary", "direct", True, "normal"),
    ("(OOC: no gore please)", "boundary:gore", "boundary", "direct", True, "normal"),
    ("I don't want any violence in the story", "boundary:violence", "boundary", "direct", True, "normal"),
    ("Spiders are a hard limit for me", "boundary:spiders", "boundary", "direct", True, "normal"),
    ("[OOC: keep it slow burn]", "story:slow burn", "story", "direct", True, "low"),
    ("I prefer slow burn romance", "story:slow burn romance", "story", "direct", True, "low"),
    ("I'd prefer short replies", "story:short replies", "story", "direct", True, "low"),
    ("I prefer tea over coffee", "likes:tea", "preference", "direct", True, "low"),
    ("I think I might like jazz", "likes:jazz", "preference", "hypothesis", True, "low"),
    ("maybe I'm a morning person", "identity:morning person", "identity", "hypothesis", True, "normal"),
    ("I kinda hate horror", "dislikes:horror", "dislike", "hypothesis", True, "low"),
    ("I used to like cats", "used to like:cats", "preference", "direct", False, "low"),
    ("I used to be a teacher", "used to be:teacher", "identity", "direct", False, "normal"),
    ("I'm really into horror movies right now", "likes:horror movies", "preference", "direct", False, "low"),
    ("I'm a student at the moment", "identity:student", "identity", "direct", False, "normal"),
    # never-nominate categories: always "high"
    ("I have diabetes", "health:diabetes", "health", "direct", True, "high"),
    ("I'm on medication", "health:medication", "health", "direct", True, "high"),
    ("I'm pregnant", "identity:pregnant", "health", "direct", True, "high"),
    ("I'm gay", "identity:gay", "sexuality", "direct", True, "high"),
    ("I'm a lesbian", "identity:lesbian", "sexuality", "direct", True, "high"),
    ("I'm a Christian", "identity:christian", "religion", "direct", True, "high"),
    ("I love going to church", "likes:going to church", "religion", "direct", True, "high"),
    ("I vote Democrat", "politics:vote democrat", "politics", "direct", True, "high"),
    ("I'm a conservative", "identity:conservative", "politics", "direct", True, "high"),
    ("My salary is $50k", "finances:salary", "finances", "direct", True, "high"),
    ("I have a lot of debt", "finances:debt", "finances", "direct", True, "high"),
    ("I live at 12 Main Street", "location:12 main street", "location", "direct", True, "high"),
    ("I live in Boston with my wife", "location:boston", "location", "direct", True, "high"),
    ("my password is hunter2", "credentials:password", "credentials", "direct", True, "high"),
]


@pytest.mark.parametrize(("text", "key", "category", "kind", "durable", "sensitivity"), SINGLE_CASES)
def test_extracts_one_candidate_with_these_values(text: str, key: str, category: str, kind: str, durable: bool,
                                                  sensitivity: str) -> None:
    found = extract_beliefs(text)
    assert [c.key for c in found] == [key]
    candidate = found[0]
    assert (candidate.category, candidate.kind, candidate.durable, candidate.sensitivity) == \
        (category, kind, durable, sensitivity)


# text, statement, slot
STATEMENT_CASES = [
    ("I like Studio Ghibli films.", "{{user}} likes Studio Ghibli films.", "pref:studio ghibli films"),
    ("My name is Sam!", "{{user}}'s name is Sam.", "name"),
    ("Call me Ishmael.", "{{user}} goes by Ishmael.", "name"),
    ("I love my dog", "{{user}} loves their dog.", "pref:their dog"),
    ("Cats are my favourite animals", "Cats are {{user}}'s favourite animals.", "pref:cats"),
    ("I hate spiders", "{{user}} hates spiders.", "pref:spiders"),
    ("I don't like mushrooms", "{{user}} doesn't like mushrooms.", "pref:mushrooms"),
    ("I'm an only child", "{{user}} is an only child.", "identity:only child"),
    ("I work as a nurse", "{{user}} works as a nurse.", "identity:nurse"),
    ("Please, no spiders.", "{{user}} does not want spiders in the story.", "boundary:spiders"),
    ("(OOC: keep it short please)", "{{user}} wants the story kept short.", "story:short"),
    ("I used to love horror", "{{user}} used to love horror.", "pref:horror"),
    ("I have ADHD", "{{user}} has ADHD.", "health:adhd"),
    ("I'm from Canada", "{{user}} is from Canada.", "location"),
    ("my wifi password is abc123!", "{{user}} shared their password.", "credentials:password"),
    ("I love long walks on the beach at sunset with my dog", "{{user}} loves long walks on the beach.",
     "pref:long walks on the beach"),
]


@pytest.mark.parametrize(("text", "statement", "slot"), STATEMENT_CASES)
def test_statement_is_third_person_with_the_user_macro(text: str, statement: str, slot: str) -> None:
    [candidate] = extract_beliefs(text)
    assert candidate.statement == statement
    assert candidate.slot == slot


NEGATIVES = [
    "She loves cats.",                      # about the character
    "Her name is Luna and she likes tea.",
    "You like cats",                        # about the other party
    "He thinks I love cats.",               # someone else's claim
    "Do I like cats?",                      # questions state nothing
    "I love cats?",
    "*I love this place, she thinks*",      # asterisk action
    "*I'm a teacher* she says.",
    "I love you",                           # directed at the character / the scene
    "I like that",
    "I hate it when you do that",
    "I love the way you smile",
    "I'm tired",                            # passing states
    "I am hungry right now",
    "today I feel sad",
    "I'm at the store",
    "I'm a bit tired",
    "I don't think I like jazz",            # negated hedge
    "I'm not sure if I like tea",
    "I'm not a teacher",                    # negation
    "I don't hate cats",
    "I'd like a coffee",                    # a request, not a taste
    "I loved that movie",                   # one past event
    "call me later",                        # not a name
    "My name is not important.",
    "Keep it secret",                       # speech, not a story preference
    "Keep it down!",
    "no gore",                              # no please, not OOC
    "No problem, please.",
    "Don't go!",
    "Today is my favourite day",
    "",
    "   \n\t ",
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_yields_nothing(text: str) -> None:
    assert extract_beliefs(text) == []


def test_confidence_plain_emphatic_hedged() -> None:
    [plain] = extract_beliefs("I like cats")
    [emphatic] = extract_beliefs("I really love cats")
    [always] = extract_beliefs("I've always loved cats")
    [hedged] = extract_beliefs("maybe I like cats")
    assert 0.8 <= plain.confidence <= 0.9
    assert emphatic.confidence == always.confidence == 0.95
    assert hedged.confidence == HEDGED_CONFIDENCE <= 0.5
    assert hedged.kind == "hypothesis"


def test_clauses_lists_and_order() -> None:
    found = extract_beliefs("Hi! My name is Sam and I'm a teacher. Honestly, I love cats but I hate dogs.")
    assert [c.key for c in found] == ["name:sam", "identity:teacher", "likes:cats", "dislikes:dogs"]
    found = extract_beliefs("I enjoy hiking, reading, and painting.")
    assert [c.statement for c in found] == ["{{user}} enjoys hiking.", "{{user}} enjoys reading.",
                                            "{{user}} enjoys painting."]
    assert {c.quote for c in found} == {"I enjoy hiking, reading, and painting."}


def test_deduplicates_by_key_keeping_the_first() -> None:
    found = extract_beliefs("I love cats. I LOVE CATS! I really adore cats. I hate dogs.")
    assert [c.key for c in found] == ["likes:cats", "dislikes:dogs"]
    assert found[0].statement == "{{user}} loves cats."
    assert found[0].quote == "I love cats."


def test_likes_and_dislikes_of_one_thing_share_a_slot() -> None:
    [like] = extract_beliefs("I like cats")
    [dislike] = extract_beliefs("I dislike cats")
    [past] = extract_beliefs("I used to like cats")
    assert like.slot == dislike.slot == past.slot == "pref:cats"
    assert len({like.key, dislike.key, past.key}) == 3


def test_asterisk_actions_are_skipped_but_speech_and_ooc_are_read() -> None:
    found = extract_beliefs('*smiles* "I love the stars," she whispered. *I hate rain* (OOC: I\'m a nurse irl)')
    assert [(c.key, c.quote) for c in found] == [("likes:stars", "I love the stars,"),
                                                  ("identity:nurse", "OOC: I'm a nurse irl")]


def test_ooc_context_gates_imperatives() -> None:
    assert extract_beliefs("keep it moving") == []
    assert [c.key for c in extract_beliefs("OOC: keep it moving")] == ["story:moving"]
    assert [c.key for c in extract_beliefs("keep it lighthearted")] == ["story:lighthearted"]  # a tone word
    assert [c.key for c in extract_beliefs("avoid spiders")] == []
    assert [c.key for c in extract_beliefs("((avoid spiders))")] == ["boundary:spiders"]


def test_tag_question_keeps_the_statement() -> None:
    assert [c.key for c in extract_beliefs("I love cats, don't you?")] == ["likes:cats"]


def test_quote_is_the_trimmed_sentence_and_credentials_are_redacted() -> None:
    text = "  Well.   I   like\u2019 nothing.  I am a teacher!  My PIN is 4321.  "
    found = extract_beliefs(text)
    assert [(c.key, c.quote) for c in found] == [("identity:teacher", "I am a teacher!"),
                                                  ("credentials:pin", "My PIN is [redacted].")]
    assert "4321" not in found[1].statement + found[1].quote
    [wifi] = extract_beliefs("OOC: my wifi password is abc123!")
    assert wifi.quote == "OOC: my wifi password is [redacted]"  # "!" may belong to the secret


def test_every_candidate_is_well_formed() -> None:
    texts = [row[0] for row in SINGLE_CASES] + [row[0] for row in STATEMENT_CASES]
    for text in texts:
        for c in extract_beliefs(text):
            assert c.category in ALL_CATEGORIES
            assert c.sensitivity == CATEGORY_SENSITIVITY[c.category]
            assert c.statement.startswith(("{{user}}", c.statement[:1])) and "{{user}}" in c.statement
            assert c.statement.endswith(".")
            assert c.key == " ".join(c.key.lower().split()) and ":" in c.key
            assert 0.0 <= c.confidence <= 1.0
            assert c.kind in ("direct", "hypothesis")
            assert c.quote == c.quote.strip() and c.quote


def test_candidate_is_frozen() -> None:
    [c] = extract_beliefs("I like cats")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.key = "likes:dogs"  # type: ignore[misc]


@pytest.mark.parametrize("text", [
    "a" * 50_000,
    "I like " * 7_000,
    "*" * 50_000,
    "((" * 25_000,
    "(ooc " * 10_000,
    "my name is " + "A " * 25_000,
    "I love " + "cats, " * 10_000,
    "no " * 25_000,
    "oh and " * 7_000 + "x",
    "I think " * 6_000,
    "x is my favourite " * 3_000,
    "I love cats. " * 4_000,
])
def test_long_hostile_input_returns_promptly(text: str) -> None:
    started = time.perf_counter()
    found = extract_beliefs(text)
    assert isinstance(found, list)
    assert time.perf_counter() - started < 10


def test_long_input_of_statements_is_deduplicated() -> None:
    assert [c.key for c in extract_beliefs("I love cats. " * 4_000)] == ["likes:cats"]


# ---------------------------------------------------------------------------------------------
# parse_model_beliefs

MESSAGE = "Hi! *She walks in. I love the rain, she thinks.* I really love   cats. She likes dogs."


def item(**fields: object) -> dict[str, object]:
    """A valid model item about MESSAGE, with `fields` overriding."""
    base: dict[str, object] = {"statement": "{{user}} loves cats.", "key": "likes:cats", "slot": "pref:cats",
                               "kind": "direct", "category": "preference", "confidence": 0.9,
                               "sensitivity": "low", "durable": True, "quote": "I really love cats"}
    base.update(fields)
    return base


def answer(*items: object) -> str:
    return json.dumps({"beliefs": list(items)})


VALID = Candidate("{{user}} loves cats.", "likes:cats", "pref:cats", "direct", "preference", 0.9, "low", True,
                  "I really love cats")


def test_valid_item_is_kept() -> None:
    assert parse_model_beliefs(answer(item()), MESSAGE) == [VALID]


def test_fenced_answer_and_integer_confidence_are_accepted() -> None:
    raw = "```json\n" + answer(item(confidence=1)) + "\n```"
    assert parse_model_beliefs(raw, MESSAGE) == [dataclasses.replace(VALID, confidence=1.0)]


@pytest.mark.parametrize(("raw", "field"), [
    ("not json", ""),
    ('{"beliefs": [', ""),
    ("", ""),
    ("[1, 2]", ""),
    ('"beliefs"', ""),
    ("{}", "beliefs"),
    ('{"beliefs": 3}', "beliefs"),
    ('{"beliefs": {"key": "likes:cats"}}', "beliefs"),
    ('{"facts": []}', "beliefs"),
])
def test_answer_that_is_not_a_beliefs_object_raises(raw: str, field: str) -> None:
    with pytest.raises(FormatError) as caught:
        parse_model_beliefs(raw, MESSAGE)
    assert caught.value.file == MODEL_SOURCE == "model belief JSON"
    assert caught.value.field == field
    assert caught.value.reason


@pytest.mark.parametrize("bad", [
    item(category="gossip"),                  # unknown category
    item(kind="certain"),
    item(sensitivity="medium"),
    item(confidence=1.5),
    item(confidence=-0.1),
    item(confidence=True),
    item(confidence="0.9"),
    item(durable="yes"),
    item(key=""),
    item(key="Likes:Cats"),                   # key must be lowercase
    item(key=["likes:cats"]),
    item(slot=""),
    item(statement="Sam loves cats."),        # no {{user}}
    item(quote="I adore kittens"),            # invented support
    item(quote=""),
    {k: v for k, v in item().items() if k != "durable"},
    "likes:cats",
    None,
])
def test_invalid_item_is_dropped(bad: object) -> None:
    assert parse_model_beliefs(answer(bad, item(key="likes:rain", slot="pref:rain", quote="Hi!")), MESSAGE) == [
        Candidate("{{user}} loves cats.", "likes:rain", "pref:rain", "hypothesis", "preference", 0.5, "low", True,
                  "Hi!")]


def test_nan_confidence_is_dropped() -> None:
    raw = '{"beliefs": [' + json.dumps(item()).replace("0.9", "NaN") + "]}"
    assert parse_model_beliefs(raw, MESSAGE) == []


def test_quote_match_ignores_case_and_whitespace() -> None:
    found = parse_model_beliefs(answer(item(quote="  i REALLY love\ncats ")), MESSAGE)
    assert [(c.key, c.kind, c.quote) for c in found] == [("likes:cats", "direct", "i REALLY love\ncats")]


@pytest.mark.parametrize("quote", ["She likes dogs", "I love the rain", "She walks in"])
def test_kind_becomes_hypothesis_unless_the_quote_is_first_person_outside_actions(quote: str) -> None:
    [c] = parse_model_beliefs(answer(item(quote=quote, confidence=0.95)), MESSAGE)
    assert (c.kind, c.confidence) == ("hypothesis", 0.5)


def test_never_nominate_category_is_forced_high_and_statement_gets_a_period() -> None:
    [c] = parse_model_beliefs(answer(item(category="health", key="health:x", sensitivity="low",
                                          statement="  {{user}} loves\tcats  ")), MESSAGE)
    assert (c.category, c.sensitivity, c.statement) == ("health", "high", "{{user}} loves cats.")
    assert c.category in NEVER_NOMINATE_CATEGORIES


def test_duplicate_keys_keep_the_first_item() -> None:
    found = parse_model_beliefs(answer(item(), item(statement="{{user}} adores cats.")), MESSAGE)
    assert [c.statement for c in found] == ["{{user}} loves cats."]


def test_empty_belief_list_is_valid() -> None:
    assert parse_model_beliefs('{"beliefs": []}', MESSAGE) == []


def test_deterministic_candidates_pass_the_model_validator() -> None:
    text = "Hi! My name is Sam. (OOC: no gore please) I\u2019m a teacher, and I really love cats."
    found = extract_beliefs(text)
    assert [c.key for c in found] == ["name:sam", "boundary:gore", "identity:teacher", "likes:cats"]
    raw = json.dumps({"beliefs": [dataclasses.asdict(c) for c in found]})
    assert parse_model_beliefs(raw, text) == found


def test_prompt_names_every_field_and_the_shape() -> None:
    for name in ("beliefs", "statement", "key", "slot", "kind", "category", "confidence", "sensitivity", "durable",
                 "quote", "{{user}}", "hypothesis"):
        assert name in EXTRACTION_PROMPT
    for category in ALL_CATEGORIES:
        assert f'"{category}"' in EXTRACTION_PROMPT
