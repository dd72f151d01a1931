"""Per-prompt attribution (issue 24 item 2): every message lists its parts in order, with offsets
that cut the content exactly and token counts; the per-category breakdown (SillyTavern's prompt
itemization categories) sums to the request's count; the trace shows the same for what was sent
and its hashes still cover exactly the bodies sent.

Expected values come from the corpus preset file itself (its `prompt_order`, prompt names and
contents), from the hand-made card and book below, and from the token rule of `text.tokens`
(ceil(UTF-8 bytes / 4), + 3 framing tokens per message: OpenAI's ~3 per message)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.engine.trace import message_hash
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.service import Tavern
from tests.support.loopback import LoopbackServer, sse_chunks_for

PRESET = "st_openai_default_staging.json"
CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Mira", "description": "Mira keeps the lighthouse on Gull Rock.", "personality": "Patient, dry humour.",
    "scenario": "A storm night at the lighthouse.", "first_mes": "The lamp hums above you.",
    "mes_example": "<START>\n{{user}}: Hello?\n{{char}}: Who goes there?\n<START>\n{{char}}: The sea is loud tonight.",
    "post_history_instructions": "Stay in character as {{char}}.", "system_prompt": "", "creator_notes": "",
    "alternate_greetings": [], "tags": [], "creator": "", "character_version": "", "extensions": {}}}
BOOK = {"name": "Gull Rock", "entries": {
    "0": {"uid": 0, "key": ["storm"], "content": "Storms here last three days.", "comment": "Storms", "position": 0,
          "order": 100},
    "1": {"uid": 1, "key": ["storm"], "content": "The lamp must never go dark.", "comment": "Lamp rule",
          "position": 0, "order": 200},
    "2": {"uid": 2, "key": ["lamp"], "content": "The lamp was lit in 1902.", "comment": "Lamp history",
          "position": 1},
    "3": {"uid": 3, "key": ["storm"], "content": "Thunder answers every lie.", "comment": "Thunder",
          "position": 4, "depth": 1, "role": 0},
}}
INPUT = "Is the storm getting worse? Check the lamp."


def estimate(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4) if text else 0


def request_count(messages: list[dict]) -> int:
    return sum(estimate(m["content"]) + (estimate(m["name"]) if m.get("name") else 0) + 3 for m in messages)


@pytest.fixture
def setup(db_url: str, corpus_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    def make(base_url: str = "") -> tuple[Tavern, int, dict]:
        provider = ProviderSettings(base_url=base_url, model="loop-1", api_key="", timeout=10) if base_url else None
        service = Tavern(Settings(db_url=db_url, provider=provider) if provider else Settings(db_url=db_url))
        card = tmp_path / "Mira.json"
        card.write_text(json.dumps(CARD))
        book = tmp_path / "Gull Rock.json"
        book.write_text(json.dumps(BOOK))
        imported = service.imports.import_paths([card, corpus_dir / "presets" / PRESET, book])
        assert all(r.ok for r in imported)
        pid = service.playthroughs.new_playthrough(imported[0].id, user_name="Ann").id
        service.presets.bind_preset(pid, imported[1].id)
        service.lore.bind_world_book(imported[2].id, "playthrough", pid)
        preset = json.loads((corpus_dir / "presets" / PRESET).read_text(encoding="utf-8"))
        return service, pid, preset
    return make


def _names(text: str) -> str:
    return text.replace("{{char}}", "Mira").replace("{{user}}", "Ann")


def _dedupe(items: list[str]) -> list[str]:
    return [x for i, x in enumerate(items) if i == 0 or items[i - 1] != x]


def check_system_section(content: str, parts: list[dict], preset: dict) -> None:
    """The slots-first system section against the preset file: identifiers in prompt_order order,
    names from the file, and offsets cutting the exact text of each contribution."""
    prompts = {p["identifier"]: p for p in preset["prompts"]}
    order = next(o["order"] for o in preset["prompt_order"] if o["character_id"] == 100001)
    # Enabled prompts that carry something here: the persona marker is empty (no persona),
    # chatHistory is the chat itself, empty non-marker prompts are not sent.
    expected = [item["identifier"] for item in order if item["enabled"]
                and item["identifier"] not in ("chatHistory", "personaDescription", "nsfw")
                and (prompts[item["identifier"]].get("marker") or prompts[item["identifier"]].get("content")
                     or item["identifier"] == "jailbreak")]
    # What SillyTavern puts inside or after the chat goes to the end of the section in its chat
    # order: world info @depth 1 (before the last message), then the post-history jailbreak.
    assert expected[-1] == "jailbreak"
    expected = [*expected[:-1], "worldInfoDepth", "jailbreak"]
    assert _dedupe([p["identifier"] for p in parts]) == expected
    assert [p["start"] for p in parts] == sorted(p["start"] for p in parts)
    for part in parts:
        if part["identifier"] in prompts and part["kind"] != "examples":
            assert part["name"] == prompts[part["identifier"]]["name"]
    cut = {p["identifier"] if p["kind"] != "world_info" else (p["book"], p["uid"]): content[p["start"]:p["end"]]
           for p in parts}
    assert cut["main"] == _names(prompts["main"]["content"])
    assert cut["charDescription"] == CARD["data"]["description"]
    assert cut["charPersonality"] == _names(preset["personality_format"]).replace(
        "{{personality}}", CARD["data"]["personality"])
    assert cut["scenario"] == preset["scenario_format"].replace("{{scenario}}", CARD["data"]["scenario"])
    assert cut["jailbreak"] == _names(CARD["data"]["post_history_instructions"])
    for uid in ("0", "1", "2", "3"):
        assert cut[("Gull Rock", int(uid))] == BOOK["entries"][uid]["content"]
    titles = [(p["uid"], p["title"]) for p in parts if p["kind"] == "world_info"]
    # worldInfoBefore in ascending order (100 then 200), then worldInfoAfter, then @depth moved to the end.
    assert titles == [(0, "Storms"), (1, "Lamp rule"), (2, "Lamp history"), (3, "Thunder")]
    assert [p["identifier"] for p in parts if p["kind"] == "world_info"] == [
        "worldInfoBefore", "worldInfoBefore", "worldInfoAfter", "worldInfoDepth"]
    depth = next(p for p in parts if p["identifier"] == "worldInfoDepth")
    assert (depth["depth"], depth["role"]) == (1, "system")
    examples = [p for p in parts if p["kind"] == "examples"]
    assert {p["block"] for p in examples} == {0, 1}
    blocks = ["Ann: Hello?\nMira: Who goes there?", "Mira: The sea is loud tonight."]
    for part in examples:
        text = content[part["start"]:part["end"]]
        assert text == preset["new_example_chat_prompt"] or text in blocks[part["block"]].replace(
            "Ann: ", "").replace("Mira: ", "")
    categories = {p["identifier"]: p["category"] for p in parts}
    assert (categories["main"], categories["charDescription"], categories["charPersonality"],
            categories["scenario"], categories["worldInfoBefore"], categories["dialogueExamples"]) == (
        "system", "description", "personality", "scenario", "world_info", "examples")


async def test_slots_first_preview_lists_each_prompt_with_exact_offsets(setup) -> None:  # type: ignore[no-untyped-def]
    service, pid, preset = setup()
    service.strategies.apply_strategy(pid, "preset-slots-first")
    shown = service.steps.preview(pid, INPUT)
    messages, parts = shown["messages"], shown["parts"]
    assert [m["source"] for m in messages] == ["system", "history", "input"]
    check_system_section(messages[0]["content"], parts[0], preset)
    assert parts[1] == [dict(parts[1][0], kind="history", start=0, end=len(CARD["data"]["first_mes"]))]
    assert parts[2][0]["kind"] == "input" and parts[2][0]["end"] == len(INPUT)
    breakdown = shown["breakdown"]
    total = request_count(messages)
    assert breakdown["total"] == total
    assert sum(v for k, v in breakdown.items() if k != "total") == total
    assert breakdown["chat_history"] > 0 and breakdown["world_info"] > 0 and breakdown["examples"] > 0
    for message, message_parts in zip(messages, parts):  # each message: its parts + its framing
        assert sum(p["tokens"] for p in message_parts) <= estimate(message["content"])
    service.close()


@pytest.mark.parametrize("strategy", ["compat", "preset-roles-first", "projection"])
async def test_every_strategy_attributes_every_message_and_sums(setup, strategy: str) -> None:  # type: ignore[no-untyped-def]
    service, pid, _preset = setup()
    service.strategies.apply_strategy(pid, strategy)
    shown = service.steps.preview(pid, INPUT)
    assert all(p is not None for p in shown["parts"])
    for message, message_parts in zip(shown["messages"], shown["parts"]):
        for part in message_parts:
            assert 0 <= part["start"] <= part["end"] <= len(message["content"])
    cut = {(p["book"], p["uid"]): m["content"][p["start"]:p["end"]]
           for m, ps in zip(shown["messages"], shown["parts"]) for p in ps if p["kind"] == "world_info"}
    assert cut == {("Gull Rock", int(u)): e["content"] for u, e in BOOK["entries"].items()}
    assert shown["breakdown"]["total"] == request_count(shown["messages"])
    service.close()


async def test_the_trace_attributes_what_was_sent_and_hashes_are_unchanged(setup) -> None:  # type: ignore[no-untyped-def]
    with LoopbackServer() as server:
        service, pid, preset = setup(server.base_url)
        service.strategies.apply_strategy(pid, "preset-slots-first")
        server.enqueue_sse(sse_chunks_for("The glass rattles."))
        async for _ in service.steps.send(pid, INPUT):
            pass
        [trace] = service.traces.traces(pid)
        shown = service.traces.trace(trace.id)
        sent = server.requests[0].json["messages"]
    attribution = shown["attribution"]
    check_system_section(sent[0]["content"], attribution["messages"][0], preset)
    assert attribution["breakdown"]["total"] == request_count(sent)
    # The hashes recorded cover the bodies exactly as the server received them.
    assert [m["sha256"] for m in shown["record"]["messages"]] == [message_hash(m) for m in sent]
    service.close()


@pytest.mark.parametrize("strategy", ["preset-slots-first", "compat", "projection"])
async def test_persona_entries_are_parts_of_their_own(setup, strategy: str) -> None:  # type: ignore[no-untyped-def]
    service, pid, _preset = setup()
    version = service.persona.edit_persona(0, add="{{user}} is a cartographer.").version
    service.persona.edit_persona(version, add="{{user}} prefers short replies.")
    service.strategies.apply_strategy(pid, strategy)
    shown = service.steps.preview(pid, INPUT)
    found = [(m["content"][p["start"]:p["end"]], p["entry"], p["category"])
             for m, ps in zip(shown["messages"], shown["parts"]) for p in ps if p["kind"] == "persona"]
    entries = [e.id for e in service.persona.persona().entries]
    assert found == [("Ann is a cartographer.", entries[0], "persona"),
                     ("Ann prefers short replies.", entries[1], "persona")]
    assert shown["breakdown"]["persona"] > 0 and shown["breakdown"]["total"] == request_count(shown["messages"])
    service.close()


async def test_an_in_chat_authors_note_is_a_part_with_its_depth_and_role(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    service, _pid, _preset = setup()
    # A chat whose chat_metadata holds an in-chat Author's Note at depth 1, system role (ST keys).
    header = {"user_name": "Ann", "character_name": "Mira", "chat_metadata": {
        "note_prompt": "Keep the storm in every scene.", "note_interval": 1, "note_position": 1, "note_depth": 1,
        "note_role": 0}}
    lines = [header, {"name": "Mira", "is_user": False, "is_system": False, "mes": "The lamp hums above you."},
             {"name": "Ann", "is_user": True, "is_system": False, "mes": "Hello?"},
             {"name": "Mira", "is_user": False, "is_system": False, "mes": "Up here."}]
    path = tmp_path / "Mira - note.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    [chat] = service.imports.import_paths([path])
    assert chat.ok, chat.error
    service.strategies.apply_strategy(chat.id, "projection")
    shown = service.steps.preview(chat.id, INPUT)
    notes = [(m["content"][p["start"]:p["end"]], p.get("depth"), p.get("role"), p["category"])
             for m, ps in zip(shown["messages"], shown["parts"]) for p in ps if p["kind"] == "authors_note"]
    assert notes == [("Keep the storm in every scene.", 1, "system", "injections")]
    assert shown["breakdown"]["injections"] > 0 and shown["breakdown"]["total"] == request_count(shown["messages"])
    service.close()


def test_a_custom_preset_lists_its_own_prompt_ids_in_prompt_order(setup, corpus_dir: Path) -> None:  # type: ignore[no-untyped-def]
    service, pid, _ = setup()
    raw = json.loads((corpus_dir / "presets" / "nemo_vivarium_v1_0_beta.json").read_text(encoding="utf-8"))
    [bound] = service.imports.import_paths([corpus_dir / "presets" / "nemo_vivarium_v1_0_beta.json"])
    service.presets.bind_preset(pid, bound.id)
    service.strategies.apply_strategy(pid, "preset-slots-first")
    shown = service.steps.preview(pid, INPUT)
    content, parts = shown["messages"][0]["content"], shown["parts"][0]
    prompts = {p["identifier"]: p for p in raw["prompts"]}
    order = [item["identifier"] for item in raw["prompt_order"][0]["order"] if item["enabled"]]
    relative = [i for i in order if not prompts[i].get("marker") and prompts[i].get("injection_position") != 1]
    in_chat = [i for i in order if prompts[i].get("injection_position") == 1]
    # Relative prompts in prompt_order order; the in-chat ones moved to the end, deepest first
    # (ST inserts them by depth: depth 1 before the last message, depth 0 after it).
    in_chat.sort(key=lambda i: -prompts[i]["injection_depth"])
    listed = [p["identifier"] for p in parts if p["kind"] in ("preset", "injection")]
    assert listed == relative + in_chat
    for part in parts:
        if part["kind"] in ("preset", "injection"):
            assert part["name"] == prompts[part["identifier"]]["name"]
    slop = next(p for p in parts if p["identifier"] == "bbbf24ea-a85e-4c94-8514-b5cc9019a3a0")
    assert content[slop["start"]:slop["end"]] == prompts[slop["identifier"]]["content"].strip()  # no macros in it
    assert (slop["depth"], slop["role"]) == (1, "user")
    assert shown["breakdown"]["total"] == request_count(shown["messages"])
    service.close()
