"""One request build's evaluation budget (`lore.eval_budget`): a card holding several of the
trial's hostile contents at once (deep macros, an expansion bomb in a book key, unclosed MVU commands,
endless templates, a regex bomb) builds its request with the over-budget parts refused and named (the
card's field or the book entry, and the limit), and the person's typed text is sent as typed.

The budget is CPU time, so the deterministic tests give the build a budget of 0 s (everything
refused from the start); the subprocess test plays the card with the real budget and asserts only
the outcome, with a generous bound for a hang and a memory cap.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tavern_tui.assembly.macros import LIMIT_MARKER
from tavern_tui.config import Settings
from tavern_tui.lore.eval_budget import EXHAUSTED
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

BOMB_KEY = "{{newline::1000}}" * 2000
DEEP = "{{if 1}}" * 300 + "x" + "{{/if}}" * 300
SETVARS = "{{setvar::v::" * 500 + "x" + "}}" * 500
MVU = "_.set(" * 5000
ENDLESS = "<% while (true) {} %>"
HUGE = "<%= 'a'.repeat(1e9) %>"
STOPPED = LIMIT_MARKER.format(reason=EXHAUSTED)


def hostile_card(corpus_dir: Path, name: str) -> dict[str, Any]:
    """The corpus's V3 card with a different hostile content in each field, book key and entry."""
    card = json.loads((corpus_dir / "cards" / "ai_v3_with_book.json").read_text(encoding="utf-8"))
    data = card["data"]
    data.update(name=name, description="She keeps the gate. " + DEEP, personality=SETVARS, scenario=MVU,
                mes_example=BOMB_KEY, first_mes="Welcome, {{user}}. " + ENDLESS)
    keys = [BOMB_KEY, "/a{99999999}/", "/(a+)+$/", MVU]
    contents = [BOMB_KEY, ENDLESS, HUGE, SETVARS, DEEP]
    for n, entry in enumerate(data["character_book"]["entries"]):
        entry["keys"] = [keys[n % len(keys)], "hello"]
        entry["content"] = contents[n % len(contents)]
    return card


@pytest.fixture
def roomy(db_url: str, model: ScriptedModel) -> Iterator[Tavern]:
    """The service with a context large enough for the hostile texts left as written."""
    service = Tavern(Settings(db_url=db_url, max_context=1_000_000), provider=model)
    yield service
    service.close()


def _played(tavern: Tavern, corpus_dir: Path, tmp_path: Path) -> int:
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(hostile_card(corpus_dir, "Hostile")), encoding="utf-8")
    [result] = tavern.imports.import_paths([path])
    assert result.id is not None, result.error
    return tavern.playthroughs.new_playthrough(result.id).id


def _no_budget(tavern: Tavern, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every build's evaluation budget is 0 s: each untrusted evaluation is refused."""
    assembling = tavern.steps.assembling
    working = assembling.assembler

    def spent(*args: Any, **kwargs: Any) -> Any:
        return replace(working(*args, **kwargs), eval_seconds=0.0)

    monkeypatch.setattr(assembling, "assembler", spent)


def test_a_spent_budget_builds_the_request_with_each_refused_part_named(
        roomy: Tavern, corpus_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pid = _played(roomy, corpus_dir, tmp_path)
    _no_budget(roomy, monkeypatch)
    request = roomy.steps.preview(pid, "hello there")
    [note] = [a for a in request["adjustments"] if a.startswith("evaluation stopped")]
    assert note.startswith("evaluation stopped for the card 'Hostile': the 0 s evaluation budget of one request "
                           "build (macros, templates, world-info keys, regex scripts; CPU time) was used up")
    refused = note.split("; refused: ", 1)[1]
    assert "description: macros stopped" in refused and "personality: macros stopped" in refused
    assert re.search(r"book '爱' entry \d+ key: macros stopped", refused)  # the 2 MB key is never expanded
    assert "world-info keys: regex searches skipped" in refused
    assert re.search(r"book '爱' entry \d+ content: template not run", refused)
    sent = "\n".join(str(m["content"]) for m in request["messages"])
    assert sent.count(STOPPED) >= 2 and STOPPED + "She keeps the gate. {{if 1}}{{if 1}}" in sent  # left as written
    assert request["messages"][-1]["content"] == "hello there"


async def test_a_step_under_a_spent_budget_sends_the_typed_text_as_typed(
        roomy: Tavern, model: ScriptedModel, corpus_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    pid = _played(roomy, corpus_dir, tmp_path)
    _no_budget(roomy, monkeypatch)
    model.enqueue("*She nods.*")
    async for _ in roomy.steps.send(pid, "I bow to {{char}}."):
        pass
    [sent] = model.requests
    last = sent.messages[-1]
    assert last["role"] == "user" and last["content"] == "I bow to Hostile."  # the person's own macros run
    assert STOPPED in "\n".join(str(m["content"]) for m in sent.messages)  # the card's did not
    assert [m.content for m in roomy.playthroughs.messages(pid)][-2:] == ["I bow to Hostile.", "*She nods.*"]
    assert roomy.inbox.pending(pid) == []


def test_every_hostile_field_together_builds_or_refuses_within_bounds(corpus_dir: Path, tmp_path: Path) -> None:
    # The real budget: the outcome is asserted, time only as a generous hang bound, memory as the peak
    # resident size (`resource`; no address-space cap: V8 reserves a large one up front).
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(hostile_card(corpus_dir, "Hostile")), encoding="utf-8")
    script = textwrap.dedent(f"""
        import asyncio, json, resource, time
        from tavern_tui.config import Settings
        from tavern_tui.errors import TavernError
        from tavern_tui.service import Tavern
        from tests.conftest import ScriptedModel
        model = ScriptedModel(delay=0)
        for context in (4095, 1_000_000):
            tavern = Tavern(Settings(db_url="sqlite:///{tmp_path}/h" + str(context) + ".db", max_context=context),
                            provider=model)
            [result] = tavern.imports.import_paths([{str(path)!r}])
            pid = tavern.playthroughs.new_playthrough(result.id).id
            began = time.perf_counter()
            try:
                request = tavern.steps.preview(pid, "hello there")
                outcome = ["built", request["messages"][-1]["content"],
                           [a for a in request["adjustments"] if a.startswith("evaluation stopped")]]
            except TavernError as exc:
                outcome = ["refused", str(exc)]
            preview_s = time.perf_counter() - began
            model.enqueue("*She nods.*")
            async def step():
                async for _ in tavern.steps.send(pid, "hello there"):
                    pass
            began = time.perf_counter()
            try:
                asyncio.run(step())
                stepped = ["sent", [m.content for m in tavern.playthroughs.messages(pid)][-2:]]
            except TavernError as exc:
                stepped = ["refused", str(exc), [i.text for i in tavern.inbox.pending(pid)],
                           len(tavern.playthroughs.messages(pid))]
            print(json.dumps({{"preview": outcome, "step": stepped, "preview_s": preview_s,
                              "step_s": time.perf_counter() - began,
                              "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}}))
            tavern.close()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    runs = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(runs) == 2, done.stdout
    for run in runs:
        preview, step = run["preview"], run["step"]
        if preview[0] == "built":
            assert preview[1] == "hello there"
            for note in preview[2]:  # what the budget refused is named, with the limit
                assert "evaluation budget of one request build" in note and ": " in note.split("refused: ")[1]
        else:  # a refusal that says why (here: the card cannot fit the context)
            assert preview[1] and "Traceback" not in preview[1]
        if step[0] == "sent":
            assert step[1] == ["hello there", "*She nods.*"]
        elif "your message is kept in the queue" in step[1]:  # a build failure: the text waits in the inbox
            assert step[2] == ["hello there"]
        else:  # refused before anything was claimed (the fit): nothing stored, the caller keeps the text
            assert step[1].startswith("the request does not fit the context") and step[2:] == [[], 1]
        assert run["preview_s"] < 60 and run["step_s"] < 60, run  # a hang, not a timing: the budget is ~2.5 s CPU
        assert run["rss_mib"] < 2 << 10
