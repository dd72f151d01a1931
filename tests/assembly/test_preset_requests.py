"""Presets at the request level (issue 5, "How it is checked"): what the loopback server
receives under `projection` for corpus presets and hand-made ones. Expected orders and roles
come from the preset files themselves (their `prompt_order` 100001 and prompt roles) and from
SillyTavern's placement rules (format-digest §c.4), not from this code's output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.service import Tavern
from tests.support.loopback import LoopbackServer, sse_chunks_for

CARD = {"spec": "chara_card_v2", "spec_version": "2.0",
        "data": {"name": "Mira", "first_mes": "Hello.", "description": "Mira keeps the lighthouse.",
                 "mes_example": "<START>\n{{user}}: Is it far?\n{{char}}: Not far at all.",
                 "system_prompt": "{{original}} Mira never leaves the lighthouse."}}


def prompt(identifier: str, content: str = "", role: str = "system", **extra: object) -> dict:
    return {"identifier": identifier, "name": identifier, "role": role, "content": content, **extra}


def order(*identifiers: str) -> list[dict]:
    return [{"character_id": 100001, "order": [{"identifier": i, "enabled": True} for i in identifiers]}]


MARKERS = [{"identifier": i, "name": i, "system_prompt": True, "marker": True}
           for i in ("charDescription", "dialogueExamples", "chatHistory")]



@pytest.fixture
def service(server: LoopbackServer, db_url: str):  # type: ignore[no-untyped-def]
    tavern = Tavern(Settings(db_url=db_url, provider=ProviderSettings(base_url=server.base_url, model="loop-1",
                                                                      timeout=10)))
    yield tavern
    tavern.close()


def start(service: Tavern, tmp_path: Path, preset: dict | Path, card: dict | Path = CARD) -> int:
    """A projection playthrough of `card` bound to `preset` (dicts are written to files first)."""
    paths = []
    for value, name in ((card, "mira.json"), (preset, "Preset.json")):
        if isinstance(value, dict):
            (tmp_path / name).write_text(json.dumps(value))
            value = tmp_path / name
        paths.append(value)
    card_result, preset_result = service.imports.import_paths(paths)
    assert card_result.ok and preset_result.ok, (card_result.error, preset_result.error)
    pid = service.playthroughs.new_playthrough(card_result.id, user_name="Ann").id
    service.presets.bind_preset(pid, preset_result.id)
    service.strategies.apply_strategy(pid, "projection")
    return pid


async def exchange(service: Tavern, server: LoopbackServer, pid: int, text: str, reply: str = "Mm.") -> list[dict]:
    server.enqueue_sse(sse_chunks_for(reply))
    async for _ in service.steps.send(pid, text):
        pass
    return server.requests[-1].json["messages"]


async def test_a_corpus_preset_sends_its_prompt_order_with_its_roles(service: Tavern, server: LoopbackServer,
                                                                     corpus_dir: Path, tmp_path: Path) -> None:
    path = corpus_dir / "presets" / "nemo_vivarium_v1_0_beta.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    prompts = {p["identifier"]: p for p in raw["prompts"]}
    enabled = [i["identifier"] for group in raw["prompt_order"] if group["character_id"] == 100001
               for i in group["order"] if i["enabled"]]
    # The file's own order: two text prompts before the history (system, then user), then two
    # in-chat injections (both role user: depth 1 and depth 0).
    assert enabled == ["worldInfoBefore", "finch-core", "finch-databank", "worldInfoAfter", "dialogueExamples",
                       "chatHistory", "bbbf24ea-a85e-4c94-8514-b5cc9019a3a0", "finch-turn-gate"]
    pid = start(service, tmp_path, path, corpus_dir / "cards" / "seraphina_chara_ccv3.png")
    await exchange(service, server, pid, "Where am I?")
    sent = await exchange(service, server, pid, "Who are you?")
    parts = service.traces.trace(service.traces.traces(pid)[-1].id)["record"]["messages"]
    assert len(parts) == len(sent)
    # finch-core: the first system message (its leading {{// comments}} expand to nothing).
    core = prompts["finch-core"]["content"]
    first_plain = next(line for line in core.splitlines() if line.strip() and "{{" not in line)
    assert sent[0]["role"] == "system" and first_plain in sent[0]["content"]
    # finch-databank keeps its authored role (user) right after it.
    assert sent[1]["role"] == prompts["finch-databank"]["role"] == "user"
    assert "<story_data>" in sent[1]["content"]
    # The chat: greeting, first exchange, then the depth-1 injection before the last message and
    # the depth-0 one after it (format-digest §c.4 step 5).
    slop = prompts["bbbf24ea-a85e-4c94-8514-b5cc9019a3a0"]
    gate = prompts["finch-turn-gate"]
    assert (slop["injection_depth"], gate["injection_depth"]) == (1, 0)
    assert sent[-3]["role"] == "user" and sent[-3]["content"].startswith("<SLOP LOG>")
    assert sent[-2] == {"role": "user", "content": "Who are you?"}
    assert sent[-1]["role"] == "user" and "Remember the key r" in sent[-1]["content"]
    assert [m["content"] for m in sent[-6:-3]] == [sent[-6]["content"], "Where am I?", "Mm."]


async def test_card_system_prompt_wraps_the_main_prompt_with_original(service: Tavern, server: LoopbackServer,
                                                                      tmp_path: Path) -> None:
    preset = {"prompts": [prompt("main", "Write {{char}}'s next reply."), *MARKERS],
              "prompt_order": order("main", "charDescription", "chatHistory")}
    pid = start(service, tmp_path, preset)
    sent = await exchange(service, server, pid, "Hi.")
    assert sent[0] == {"role": "system", "content": "Write Mira's next reply. Mira never leaves the lighthouse."}


async def test_injections_land_at_their_depth_in_order(service: Tavern, server: LoopbackServer,
                                                       tmp_path: Path) -> None:
    preset = {"prompts": [prompt("main", "Main."), *MARKERS,
                          prompt("deep", "DEPTH FOUR", injection_position=1, injection_depth=4),
                          prompt("late", "ORDER 200", injection_position=1, injection_depth=0, injection_order=200),
                          prompt("early", "ORDER 100", injection_position=1, injection_depth=0,
                                 injection_order=100)],
              "prompt_order": order("main", "chatHistory", "deep", "late", "early")}
    pid = start(service, tmp_path, preset, {**CARD, "data": {**CARD["data"], "system_prompt": ""}})
    for text in ("One.", "Two.", "Three."):
        await exchange(service, server, pid, text, reply=f"Re: {text}")
    sent = await exchange(service, server, pid, "Four.")
    chat = [m["content"] for m in sent if m["content"] not in ("Main.", "DEPTH FOUR", "ORDER 100", "ORDER 200",
                                                                  "[Start a new Chat]")]
    assert chat == ["Hello.", "One.", "Re: One.", "Two.", "Re: Two.", "Three.", "Re: Three.", "Four."]
    contents = [m["content"] for m in sent]
    # Depth 4: just before the fourth-from-last chat message ("Two." … "Four." are the last four).
    assert contents[contents.index("DEPTH FOUR") + 1] == chat[-4] == "Re: Two."
    # Depth 0: after the last message, lower injection_order first.
    assert contents[-3:] == ["Four.", "ORDER 100", "ORDER 200"]


async def test_examples_are_dropped_before_history_when_the_budget_is_tight(
        service: Tavern, server: LoopbackServer, tmp_path: Path) -> None:
    long_example = "<START>\n{{user}}: " + "Tell me more. " * 200 + "\n{{char}}: " + "Gladly. " * 200
    card = {**CARD, "data": {**CARD["data"], "mes_example": long_example, "system_prompt": ""}}
    preset = {"openai_max_context": 700, "openai_max_tokens": 100,
              "prompts": [prompt("main", "Main."), *MARKERS],
              "prompt_order": order("main", "dialogueExamples", "chatHistory")}
    pid = start(service, tmp_path, preset, card)
    sent = await exchange(service, server, pid, "Hi.")
    contents = [m["content"] for m in sent]
    assert "[Example Chat]" not in contents and not any("Gladly." in c for c in contents)
    assert contents[-2:] == ["Hello.", "Hi."]  # the whole chat still fits; the examples did not
    roomy = {**preset, "openai_max_context": 8000}
    (tmp_path / "Roomy.json").write_text(json.dumps(roomy))
    [wide] = service.imports.import_paths([tmp_path / "Roomy.json"])
    service.presets.bind_preset(pid, wide.id)
    sent = await exchange(service, server, pid, "Again.")
    assert any("Gladly." in m["content"] for m in sent)


def test_a_preset_with_only_a_temperature_gets_the_default_order(service: Tavern, corpus_dir: Path,
                                                                  tmp_path: Path) -> None:
    (tmp_path / "Warm.json").write_text(json.dumps({"temperature": 0.3}))
    [result] = service.imports.import_paths([tmp_path / "Warm.json"])
    assert result.ok and result.kind == "preset", result.error
    preset = service.presets.parsed_preset(service.library.find("Warm", "presets", "preset").data, "Warm")
    # SillyTavern's own Default.json (the corpus copy) gives the order 100001 it falls back to.
    default = json.loads((corpus_dir / "presets" / "st_openai_default_staging.json").read_text(encoding="utf-8"))
    [group] = [g for g in default["prompt_order"] if g["character_id"] == 100001]
    assert [(i.identifier, i.enabled) for i in preset.order] == [(i["identifier"], i["enabled"])
                                                                  for i in group["order"]]
    assert preset.call_config()["temperature"] == 0.3


def test_history_before_main_keeps_the_order_and_warns(service: Tavern, tmp_path: Path) -> None:
    preset = {"prompts": [prompt("main", "Main."), *MARKERS], "prompt_order": order("chatHistory", "main")}
    (tmp_path / "Odd.json").write_text(json.dumps(preset))
    [result] = service.imports.import_paths([tmp_path / "Odd.json"])
    assert result.ok and any("chatHistory" in w and "main" in w for w in result.warnings), result.warnings
    parsed = service.presets.parsed_preset(service.library.find("Odd", "presets", "preset").data, "Odd")
    assert [i.identifier for i in parsed.order if i.enabled] == ["chatHistory", "main"]
