"""The built-in tools and the guard (issue 19 §2, §4): `roll_dice` takes the dice notation of
SillyTavern's `{{roll}}` (format-digest: `{{roll:d20}}`, `{{roll 2d6+3}}`, `{{roll:20}}` = 1d20);
`lore_search` finds entries by title, key and content, bounded; the guard validates arguments
against the JSON schema, refuses what the config does not allow, asks when it can, bounds results."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from tavern_tui.engine.stream import ToolCall
from tavern_tui.lore.context import SourcedBook
from tavern_tui.lore.model import WorldBook, WorldInfoEntry
from tavern_tui.tools import Toolbox, ToolFailed, ToolSpec
from tavern_tui.tools.builtin import LORE_ENTRY_CHARS, LoreSearch, RollDice, dice_summary
from tavern_tui.tools.guard import MAX_RESULT_CHARS, Guard


def fixed(*values: float) -> Any:
    it = iter(values)
    return lambda: next(it)


@pytest.mark.parametrize(("expression", "rand", "rolls", "bonus"), [
    ("2d6+3", (0.0, 0.99), [1, 6], 3),  # {{roll 2d6+3}}
    ("d20", (0.5,), [11], 0),  # {{roll:d20}}
    ("20", (0.95,), [20], 0),  # {{roll:20}} = 1d20
    ("3d4-2", (0.0, 0.25, 0.5), [1, 2, 3], -2),
])
async def test_roll_dice_takes_st_notation(expression: str, rand: tuple[float, ...], rolls: list[int],
                                           bonus: int) -> None:
    text, summary = await RollDice(fixed(*rand)).call({"expression": expression})
    result = json.loads(text)
    assert result == {"expression": expression, "rolls": rolls, "bonus": bonus, "total": sum(rolls) + bonus}
    assert summary == dice_summary(expression, rolls, bonus, sum(rolls) + bonus)


def test_the_compact_form() -> None:
    assert dice_summary("2d6+1", [3, 5], 1, 9) == "2d6+1 → [3, 5] + 1 = 9"
    assert dice_summary("d8-1", [4], -1, 3) == "d8-1 → [4] - 1 = 3"
    assert dice_summary("d20", [17], 0, 17) == "d20 → [17] = 17"


async def test_a_bad_expression_is_a_result_the_model_reads() -> None:
    box = Toolbox([RollDice()], Guard())
    await box.offered()
    outcome = await box.run(ToolCall("c1", "roll_dice", '{"expression": "a fistful of dice"}'))
    assert outcome.status == "error"
    assert "not dice notation" in json.loads(outcome.content)["error"]
    over = await box.run(ToolCall("c2", "roll_dice", '{"expression": "1000d6"}'))
    assert over.status == "error" and "at most 100 dice" in json.loads(over.content)["error"]


def book(*entries: WorldInfoEntry) -> list[SourcedBook]:
    return [SourcedBook(WorldBook("Ashford", list(entries)), "chat")]


async def test_lore_search_ranks_title_then_keys_then_content_and_bounds() -> None:
    long = "The keep " + "x" * (LORE_ENTRY_CHARS * 2)
    entries = book(
        WorldInfoEntry(1, key=["river"], comment="Mill", content="Ashford keep stands near."),
        WorldInfoEntry(2, key=["keep", "castle"], comment="Walls", content="Stone walls."),
        WorldInfoEntry(3, key=["tower"], comment="Ashford Keep", content=long),
        WorldInfoEntry(4, key=["keep"], comment="Off", content="disabled", disable=True),
        WorldInfoEntry(5, key=["bakery"], comment="Bread", content="Nothing here."),
    )
    text, summary = await LoreSearch(lambda: entries).call({"query": "Ashford keep"})
    found = json.loads(text)["entries"]
    assert [e["title"] for e in found] == ["Ashford Keep", "Mill", "Walls"]
    assert len(found[0]["content"]) == LORE_ENTRY_CHARS + 1 and found[0]["content"].endswith("…")
    assert summary == "'Ashford keep' → Ashford Keep, Mill, Walls"


async def test_lore_search_shows_contents_with_the_names_filled_in() -> None:
    # As the prompt's world info reads them: {{char}}/{{user}} (any case, and <USER>) are the names.
    entries = book(WorldInfoEntry(1, key=["glade"], comment="Glade",
                                  content='{{user}}: "Where?"\n{{Char}}: "My glade, <USER>."'))
    text, _ = await LoreSearch(lambda: (entries, ("Seraphina", "Ada"))).call({"query": "glade"})
    assert json.loads(text)["entries"][0]["content"] == 'Ada: "Where?"\nSeraphina: "My glade, Ada."'


SCHEMA_TOOL = ToolSpec("note", "n", {"type": "object", "properties": {"text": {"type": "string", "maxLength": 5}},
                                      "required": ["text"], "additionalProperties": False}, "safe")


@pytest.mark.parametrize(("raw", "said"), [
    ('{"text": 4}', "at text: 4 is not of type 'string'"),
    ('{"text": "too long"}', "at text: 'too long' is too long"),
    ("{}", "'text' is a required property"),
    ('{"text": "a", "x": 1}', "Additional properties are not allowed"),
    ('[1]', "must be a JSON object, not list"),
    ('{"text": "a"', "not valid JSON"),
])
def test_arguments_are_validated_against_the_schema(raw: str, said: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        Guard().validate(SCHEMA_TOOL, raw)
    assert said in str(caught.value)


RISKY = ToolSpec("lab__wipe", "w", {"type": "object"}, "unknown", "mcp:lab")
HIGH = ToolSpec("lab__rm", "r", {"type": "object"}, "high", "mcp:lab")


async def test_permission_rules() -> None:
    cli = Guard()
    assert (await cli.decide(SCHEMA_TOOL, {})).how == "safe"
    refused = await cli.decide(RISKY, {})
    assert not refused.allowed and "[tools] allow" in refused.reason
    assert (await Guard(["lab__wipe"]).decide(RISKY, {})).how == "config"
    asked: list[str] = []

    async def ask(spec: ToolSpec, arguments: dict[str, Any]) -> str:
        asked.append(spec.name)
        return answers.pop(0)

    answers = ["refuse", "once", "always"]
    tui = Guard(asker=ask)
    assert not (await tui.decide(RISKY, {})).allowed
    assert (await tui.decide(RISKY, {})).how == "asked once"
    assert (await tui.decide(RISKY, {})).how == "asked always"
    assert (await tui.decide(RISKY, {})).how == "this session" and len(asked) == 3
    high = await tui.decide(HIGH, {})
    assert not high.allowed and "high-risk" in high.reason and len(asked) == 3  # never asked
    assert (await Guard(["lab__rm"]).decide(HIGH, {})).allowed
    assert [tui.state(s) for s in (SCHEMA_TOOL, RISKY, HIGH)] == ["allowed", "allowed", "refused"]
    assert Guard(asker=ask).state(RISKY) == "ask" and Guard().state(RISKY) == "refused"


async def test_a_tool_never_receives_a_configured_secret() -> None:
    guard = Guard(["lab__wipe"], secrets=["sk-live-XYZ123456789"])
    decision = await guard.decide(RISKY, {"note": "key sk-live-XYZ123456789"})
    assert not decision.allowed and "secret" in decision.reason


class Big:
    spec = ToolSpec("big", "b", {"type": "object"}, "safe")

    async def call(self, arguments: dict[str, Any]) -> tuple[str, str]:
        return "y" * (MAX_RESULT_CHARS * 3), "big"


class Broken:
    spec = ToolSpec("broken", "b", {"type": "object"}, "safe")

    async def call(self, arguments: dict[str, Any]) -> tuple[str, str]:
        raise ToolFailed("the oracle is closed")


async def test_results_are_bounded_and_failures_are_results() -> None:
    box = Toolbox([Big(), Broken()], Guard())
    await box.offered()
    big = await box.run(ToolCall("c", "big", "{}"))
    assert len(big.content) < MAX_RESULT_CHARS + 100 and big.content.startswith("y" * MAX_RESULT_CHARS)
    assert f"{MAX_RESULT_CHARS * 2} more characters" in big.content
    assert big.detail["truncated_from"] == MAX_RESULT_CHARS * 3
    broken = await box.run(ToolCall("d", "broken", "{}"))
    assert broken.status == "error" and json.loads(broken.content) == {"error": "the oracle is closed"}
    missing = await box.run(ToolCall("e", "summon", "{}"))
    assert missing.status == "unavailable" and "no tool named 'summon'" in missing.content


async def test_a_seeded_roll_is_python_randoms_floats_by_the_dice_rule() -> None:
    # 3d6 seeded 7, by hand: each die 1 + floor(r * 6), r the next float of random.Random(7).
    floats = random.Random(7)
    by_hand = [1 + math.floor(floats.random() * 6) for _ in range(3)]
    assert by_hand == [2, 1, 4]
    box = Toolbox([RollDice(fixed())], Guard())  # no unseeded float may be drawn
    await box.offered()
    outcome = await box.run(ToolCall("c1", "roll_dice", '{"expression": "3d6+1", "seed": 7}'))
    assert outcome.status == "ok"
    assert json.loads(outcome.content) == {"expression": "3d6+1", "rolls": [2, 1, 4], "bonus": 1, "total": 8, "seed": 7}
    assert outcome.detail["summary"] == "3d6+1 → [2, 1, 4] + 1 = 8"
    again = await box.run(ToolCall("c2", "roll_dice", '{"expression": "3d6+1", "seed": 7}'))
    assert again.content == outcome.content
    bad = await box.run(ToolCall("c3", "roll_dice", '{"expression": "d6", "seed": -1}'))
    assert bad.status == "error" and "seed" in json.loads(bad.content)["error"]
