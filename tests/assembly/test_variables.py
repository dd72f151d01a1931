"""Macro variables that persist per branch (issue 17 §2), through the service.

Expected values follow SillyTavern 1.18 `variables.js`: `{{incvar::n}}` on a missing variable is
`addLocalVariable(n, 1)` = (`getLocalVariable` → "" || 0) + 1 = 1 and prints the new value; `{{setvar}}`
stores the string; global variables are shared by every chat.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.engine.state import STATE_KIND
from tavern_tui.engine.step import StepFailed
from tavern_tui.engine.stream import TextDelta
from tavern_tui.errors import ProviderError, TavernError
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

COUNTER_CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Counter", "first_mes": "Hello {{user}}.",
    "description": "Turn {{incvar::turns}} of the story.{{setvar::mood::calm}}",
    "scenario": "Seen {{incglobalvar::visits}} times."}}


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


def system_text(model: ScriptedModel, index: int) -> str:
    return "\n".join(str(m.get("content", "")) for m in model.requests[index].messages if m.get("role") == "system")


def commits(tavern: Tavern) -> int:
    return len(tavern.store.events.events_of_kind([STATE_KIND]))


@pytest.fixture
def pid(tavern: Tavern, tmp_path: Path) -> int:
    card = tmp_path / "counter.json"
    card.write_text(json.dumps(COUNTER_CARD))
    [result] = tavern.imports.import_paths([card])
    return tavern.playthroughs.new_playthrough(result.id, user_name="Ann").id


async def test_setvar_in_a_card_field_persists_to_the_next_step_and_a_restart(
        tavern: Tavern, model: ScriptedModel, pid: int) -> None:
    model.enqueue("r1", "r2", "r3")
    await drain(tavern.steps.send(pid, "u1"))
    assert "Turn 1 of the story." in system_text(model, 0)
    assert tavern.variables.variables(pid).local == {"turns": 1, "mood": "calm"}
    await drain(tavern.steps.send(pid, "u2"))
    assert "Turn 2 of the story." in system_text(model, 1)
    assert "Seen 2 times." in system_text(model, 1)
    # One commit per step; the second only changed what changed (mood stayed "calm").
    assert commits(tavern) == 2
    tavern.close()
    again = Tavern(tavern.settings, provider=model)
    try:
        assert again.variables.variables(pid).local == {"turns": 2, "mood": "calm"}
        await drain(again.steps.send(pid, "u3"))
        assert "Turn 3 of the story." in system_text(model, 2)
    finally:
        again.close()


async def test_a_swipe_re_derives_from_before_the_swiped_reply(tavern: Tavern, model: ScriptedModel,
                                                               pid: int) -> None:
    model.enqueue("r1", "r2", "r2 again", "r2 third")
    await drain(tavern.steps.send(pid, "u1"))
    await drain(tavern.steps.send(pid, "u2"))
    assert tavern.variables.variables(pid).local["turns"] == 2
    await drain(tavern.steps.regenerate(pid))
    await drain(tavern.steps.regenerate(pid))
    assert "Turn 2 of the story." in system_text(model, 2)
    assert "Turn 2 of the story." in system_text(model, 3)
    assert tavern.variables.variables(pid).local["turns"] == 2
    # Going back to the first variant shows its own state.
    tavern.timeline.swipe(pid, -1)
    assert tavern.variables.variables(pid).local["turns"] == 2
    # Globals are per profile, not per branch: each build counted.
    assert tavern.variables.variables(pid).global_["visits"] == 4


async def test_a_fork_inherits_the_variables_at_its_fork_point(tavern: Tavern, model: ScriptedModel,
                                                               pid: int) -> None:
    model.enqueue("r1", "r2", "b1")
    await drain(tavern.steps.send(pid, "u1"))
    await drain(tavern.steps.send(pid, "u2"))
    r1 = next(m for m in tavern.playthroughs.messages(pid) if m.content == "r1")
    branch = tavern.timeline.branch_playthrough(pid, r1.ref)
    assert tavern.variables.variables(branch.id).local == {"turns": 1, "mood": "calm"}
    await drain(tavern.steps.send(branch.id, "other u2"))
    assert "Turn 2 of the story." in system_text(model, 2)
    assert tavern.variables.variables(branch.id).local["turns"] == 2
    assert tavern.variables.variables(pid).local["turns"] == 2  # the original is untouched


async def test_preview_and_a_failed_step_commit_nothing(tavern: Tavern, model: ScriptedModel, pid: int) -> None:
    model.enqueue("r1")
    await drain(tavern.steps.send(pid, "u1"))
    before = commits(tavern)
    preview = tavern.steps.preview(pid, "next")
    assert any("Turn 2 of the story." in m["content"] for m in preview["messages"])
    tavern.steps.estimate_tokens(pid)
    assert commits(tavern) == before
    assert tavern.variables.variables(pid).local["turns"] == 1


async def test_the_person_sets_and_deletes_variables_durably(tavern: Tavern, model: ScriptedModel,
                                                             pid: int) -> None:
    view = tavern.variables.set(pid, "turns", "41")
    assert view.local == {"turns": "41"}
    model.enqueue("r1")
    await drain(tavern.steps.send(pid, "u1"))
    assert "Turn 42 of the story." in system_text(model, 0)  # "41" is numeric: 41 + 1
    assert tavern.variables.delete(pid, "mood").local == {"turns": 42}
    with pytest.raises(TavernError, match="no local variable"):
        tavern.variables.delete(pid, "mood")
    tavern.variables.set(pid, "flag", "on", scope="global")
    assert tavern.variables.variables(pid).global_["flag"] == "on"
    history = tavern.variables.history(pid)
    assert [h["origin"] for h in history] == ["operator", "step", "operator", "operator"]
    assert history[1]["after_message"] == 2 and history[1]["message_preview"] == "u1"


def write_st_chat(path: Path, variables: dict[str, object]) -> Path:
    """A SillyTavern 1.18 chat file: header line (`saveChat`), then messages with swipes (format-digest §d)."""
    header = {"chat_metadata": {"integrity": "abc", "variables": variables}, "user_name": "unused",
              "character_name": "unused"}
    lines = [header,
             {"name": "Counter", "is_user": False, "mes": "Hello Ann.", "send_date": "2024-07-12T01:31:37.000Z"},
             {"name": "Ann", "is_user": True, "mes": "hi", "send_date": "2024-07-12T01:32:00.000Z"},
             {"name": "Counter", "is_user": False, "mes": "second", "swipe_id": 1, "swipes": ["first", "second"],
              "send_date": "2024-07-12T01:33:00.000Z"}]
    path.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    return path


async def test_import_and_export_keep_chat_metadata_variables(tavern: Tavern, model: ScriptedModel, pid: int,
                                                              tmp_path: Path) -> None:
    source = write_st_chat(tmp_path / "Counter - chat.jsonl", {"turns": "5", "list": '["a"]'})
    [result] = tavern.imports.import_paths([source])
    assert result.error is None, result.error
    assert tavern.variables.variables(result.id).local == {"turns": "5", "list": '["a"]'}
    # The other swipe's branch (a fork before the reply) sees them too.
    tavern.timeline.swipe(result.id, -1)
    assert tavern.variables.variables(result.id).local["turns"] == "5"
    model.enqueue("r")
    await drain(tavern.steps.send(result.id, "next"))
    assert "Turn 6 of the story." in system_text(model, 0)
    exported = tavern.chat_files.export_chat(result.id)
    header = json.loads(exported.splitlines()[0])
    assert header["chat_metadata"]["variables"] == {"turns": 6, "list": '["a"]', "mood": "calm"}
    assert header["chat_metadata"]["integrity"] == "abc"
    # A chat made here exports its variables as chat_metadata.variables too.
    model.enqueue("r1")
    await drain(tavern.steps.send(pid, "u1"))
    mine = json.loads(tavern.chat_files.export_chat(pid).splitlines()[0])
    assert mine["chat_metadata"]["variables"] == {"turns": 1, "mood": "calm"}


async def test_the_trace_names_what_was_read_and_committed(tavern: Tavern, model: ScriptedModel, pid: int) -> None:
    model.enqueue("r1")
    await drain(tavern.steps.send(pid, "u1"))
    [trace] = tavern.traces.traces(pid)
    shown = tavern.traces.trace(trace.id)["variables"]
    assert shown["read"] == [["global", "visits"], ["local", "turns"]]
    assert shown["set"] == {"local": ["mood", "turns"], "global": ["visits"]}
    [commit] = tavern.store.events.events_of_kind([STATE_KIND])
    assert shown["commit"] == {"ref": list(commit.ref), "sha256": commit.body_sha256}
    assert commit.body == {"origin": "step", "variables": {"local": {"set": {"turns": 1, "mood": "calm"}},
                                                          "global": {"set": {"visits": 1}}}}


class FailingOnce(ScriptedModel):
    """The scripted model, but the next request fails after a few words (a provider error mid-reply)."""

    fail_next = False

    def stream(self, request):  # type: ignore[no-untyped-def]
        if not self.fail_next:
            return super().stream(request)
        self.fail_next = False
        self.requests.append(request)

        async def broken():  # type: ignore[no-untyped-def]
            yield TextDelta("Half a")
            raise ProviderError("connection reset", status=None)

        return broken()


async def test_a_failed_or_cancelled_step_commits_nothing(db_url: str, tmp_path: Path) -> None:
    model = FailingOnce(delay=0)
    tavern = Tavern(Settings(db_url=db_url), provider=model)
    try:
        card = tmp_path / "counter.json"
        card.write_text(json.dumps(COUNTER_CARD))
        [result] = tavern.imports.import_paths([card])
        pid = tavern.playthroughs.new_playthrough(result.id, user_name="Ann").id
        model.enqueue("r1")
        await drain(tavern.steps.send(pid, "u1"))
        model.fail_next = True
        with pytest.raises(StepFailed):
            await drain(tavern.steps.send(pid, "u2"))
        # The failed step's writes are not kept: the next one counts from 1 again, locally and globally.
        assert tavern.variables.variables(pid).local["turns"] == 1
        assert tavern.variables.variables(pid).global_["visits"] == 1
        model.enqueue("r2")
        await drain(tavern.steps.send(pid, "u2 again"))  # same session, after the failed attempt
        assert "Turn 2 of the story." in system_text(model, 2)
        # A cancelled step: the caller stops reading mid-reply (Esc in the TUI, Ctrl+C in the CLI).
        model.enqueue("a long reply " * 20)
        steps = tavern.steps.send(pid, "u3")
        async for update in steps:
            if isinstance(update, TextDelta):
                break
        await steps.aclose()
        assert tavern.variables.variables(pid).local["turns"] == 2
    finally:
        tavern.close()


async def test_a_chat_with_no_variables_folds_nothing_and_one_with_them_still_reads_them(
        tavern: Tavern, model: ScriptedModel, pid: int, corpus_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The fold reads the whole surface (after every append); a chat that never set a variable has
    # none to fold, which one read of its state commits tells.
    [plain] = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])
    other = tavern.playthroughs.new_playthrough(plain.id).id
    reads: list[int] = []
    real = type(tavern.store.events).surface_events
    monkeypatch.setattr(type(tavern.store.events), "surface_events",
                        lambda self, sid, *a, **k: reads.append(sid) or real(self, sid, *a, **k))
    session = tavern.playthroughs.playthrough(other).session_id
    assert tavern.variables.session_variables(session) == {}
    assert session not in reads
    model.enqueue("r1")
    await drain(tavern.steps.send(pid, "u1"))
    counter = tavern.playthroughs.playthrough(pid).session_id
    assert tavern.variables.session_variables(counter) == {"turns": 1, "mood": "calm"}
