"""Swipes, continue, impersonate, edit, delete, rollback and branches through the service (issue 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy

from tavern_tui.errors import NotFound, TavernError
from tavern_tui.service import Tavern
from tavern_tui.service.steps import CONTINUE_NUDGE
from tests.conftest import ScriptedModel

SERAPHINA = "cards/seraphina_chara_ccv3.png"


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


def texts(tavern: Tavern, pid: int) -> list[str]:
    return [m.content for m in tavern.playthroughs.messages(pid)]


def all_hashes(tavern: Tavern) -> dict[tuple[int, int], str]:
    """Every event's body hash, read straight from the database (SQLite or PostgreSQL)."""
    with tavern.ctx.store.engine.connect() as conn:
        rows = conn.execute(sqlalchemy.text("SELECT session_id, seq, body_sha256 FROM events")).all()
    return {(s, q): h for s, q, h in rows}


@pytest.fixture
def pid(tavern: Tavern, corpus_dir: Path) -> int:
    [result] = tavern.imports.import_paths([corpus_dir / SERAPHINA])
    return tavern.playthroughs.new_playthrough(result.id, user_name="Ann").id


async def test_swipe_makes_siblings_and_moving_among_them_is_remembered(tavern: Tavern, model: ScriptedModel,
                                                                        pid: int, db_url: str) -> None:
    model.enqueue("first reply", "second reply", "third reply")
    await drain(tavern.steps.send(pid, "hello"))
    assert tavern.timeline.swipe_state(pid).label == "1/1"
    assert tavern.timeline.swipe(pid, +1) is None  # right past the last reply: the caller generates
    await drain(tavern.steps.regenerate(pid))
    await drain(tavern.steps.regenerate(pid))
    assert texts(tavern, pid)[-2:] == ["hello", "third reply"]
    assert tavern.timeline.swipe_state(pid).label == "3/3"
    # The regenerated request answered the same history: no duplicated user message.
    assert ([m["content"] for m in model.requests[2].messages[1:]]
            == [m["content"] for m in model.requests[0].messages[1:]])

    assert tavern.timeline.swipe(pid, -1).label == "2/3"
    assert texts(tavern, pid)[-1] == "second reply"
    assert tavern.timeline.swipe(pid, -1).label == "1/3"
    assert tavern.timeline.swipe(pid, -1).label == "1/3"  # left of the first: stays
    assert texts(tavern, pid)[-1] == "first reply"
    assert tavern.timeline.swipe(pid, +1).label == "2/3"

    # Remembered by pointer across a restart.
    tavern.close()
    again = Tavern(tavern.settings, provider=model)
    try:
        assert texts(again, pid)[-1] == "second reply"
        assert again.timeline.swipe_state(pid).label == "2/3"
    finally:
        again.close()


async def test_greeting_swipes_among_the_cards_greetings_without_a_reply(tavern: Tavern, pid: int,
                                                                         corpus_dir: Path) -> None:
    character = tavern.library.find_character("Seraphina")
    state = tavern.timeline.swipe_state(pid)
    assert state.greeting and state.position == (1, character.greetings)
    first = texts(tavern, pid)
    if character.greetings == 1:
        assert tavern.timeline.swipe(pid, +1) == state  # nothing else to show, nothing fabricated
        assert texts(tavern, pid) == first
        return
    moved = tavern.timeline.swipe(pid, +1)
    assert moved is not None and moved.position == (2, character.greetings)
    shown = tavern.playthroughs.messages(pid)
    assert len(shown) == 1 and shown[0].origin == "engine" and shown[0].content != first[0]
    assert tavern.timeline.swipe(pid, -1).position == (1, character.greetings)
    assert texts(tavern, pid) == first


async def test_a_card_with_alternate_greetings_swipes_through_them(tavern: Tavern, tmp_path: Path) -> None:
    card = tmp_path / "alt.json"
    card.write_text('{"spec":"chara_card_v2","spec_version":"2.0","data":{"name":"Mira","first_mes":"Hi {{user}}.",'
                    '"alternate_greetings":["Second hello.","Third hello."]}}')
    [result] = tavern.imports.import_paths([card])
    pid = tavern.playthroughs.new_playthrough(result.id, user_name="Ann").id
    assert texts(tavern, pid) == ["Hi Ann."]
    assert tavern.timeline.swipe(pid, +1).label == "2/3"
    assert tavern.timeline.swipe(pid, +1).label == "3/3"
    assert texts(tavern, pid) == ["Third hello."]
    assert tavern.timeline.swipe(pid, +1).label == "3/3"  # no fabricated reply past the last greeting
    assert tavern.timeline.swipe(pid, -1).label == "2/3"
    assert texts(tavern, pid) == ["Second hello."]
    assert [m.origin for m in tavern.playthroughs.messages(pid)] == ["engine"]
    # Going back to a greeting already shown reuses its variant (no new fork).
    before = len(tavern.timeline.timeline(pid).variants)
    tavern.timeline.swipe(pid, +1)
    assert len(tavern.timeline.timeline(pid).variants) == before
    with pytest.raises(TavernError, match="greeting"):
        await drain(tavern.steps.regenerate(pid))


async def test_continue_extends_the_reply_as_a_sibling_and_sends_the_nudge(tavern: Tavern, model: ScriptedModel,
                                                                            pid: int) -> None:
    model.enqueue("She smiles", "and waves.")
    await drain(tavern.steps.send(pid, "hello"))
    await drain(tavern.steps.continue_reply(pid))
    assert texts(tavern, pid)[-1] == "She smiles and waves."
    sent = model.requests[-1].messages
    assert sent[-2] == {"role": "assistant", "content": "She smiles"}
    assert sent[-1] == {"role": "system", "content": CONTINUE_NUDGE}
    assert tavern.timeline.swipe_state(pid).label == "2/2"  # the original is one swipe away
    tavern.timeline.swipe(pid, -1)
    assert texts(tavern, pid)[-1] == "She smiles"


async def test_impersonation_is_a_user_line_with_agent_origin(tavern: Tavern, model: ScriptedModel, pid: int) -> None:
    model.enqueue("I wave back at her.", "Seraphina nods.")
    await drain(tavern.steps.impersonate(pid))
    last = tavern.playthroughs.messages(pid)[-1]
    assert (last.role, last.origin, last.natural, last.content) == ("user", "agent", False, "I wave back at her.")
    assert "point of view of Ann" in model.requests[-1].messages[-1]["content"]
    # Then the reply to it is generated without new input, as a normal generation (SillyTavern:
    # an empty Send after the person's line is Generate('normal')).
    await drain(tavern.steps.reply(pid))
    assert texts(tavern, pid)[-2:] == ["I wave back at her.", "Seraphina nods."]
    assert model.requests[-1].messages[-1] == {"role": "user", "content": "I wave back at her."}
    assert tavern.traces.traces(pid)[-1].generation == "normal"
    with pytest.raises(TavernError, match="does not end with your message"):
        await drain(tavern.steps.reply(pid))


async def test_an_impersonation_for_the_composer_stays_out_of_the_chat(tavern: Tavern, model: ScriptedModel,
                                                                       pid: int) -> None:
    before = texts(tavern, pid)
    model.enqueue("I wave back at her.")
    settled = [u for u in [u async for u in tavern.steps.impersonate(pid, into_composer=True)]
               if type(u).__name__ == "StepSettled"]
    assert settled[0].event.content == "I wave back at her."  # what the TUI puts in its composer
    assert texts(tavern, pid) == before  # not in the chat (SillyTavern: it lands in the send box)
    assert tavern.playthroughs.playthrough(pid).message_count == len(before)  # nor counted
    trace = tavern.traces.traces(pid)[-1]
    session, seq = settled[0].event.ref
    assert (trace.generation, trace.outcome, trace.reply) == ("impersonate", "ok", f"{session}:{seq}")
    # A reply to the chat now answers the greeting, not the hidden line.
    with pytest.raises(TavernError, match="does not end with your message"):
        await drain(tavern.steps.reply(pid))


async def test_edit_and_delete_replace_the_surface_and_keep_every_event(tavern: Tavern, model: ScriptedModel,
                                                                       pid: int, tmp_path: Path) -> None:
    model.enqueue("reply one", "reply two")
    await drain(tavern.steps.send(pid, "first"))
    await drain(tavern.steps.send(pid, "second"))
    before = all_hashes(tavern)
    shown = tavern.playthroughs.messages(pid)
    reply_one = next(m for m in shown if m.content == "reply one")
    tavern.timeline.edit_message(pid, reply_one.ref, "reply one, rewritten")
    after_edit = tavern.playthroughs.messages(pid)
    edited = next(m for m in after_edit if m.content == "reply one, rewritten")
    assert (edited.role, edited.origin) == ("assistant", "operator")
    assert [m.content for m in after_edit][1:] == ["first", "reply one, rewritten", "second", "reply two"]
    first = next(m for m in after_edit if m.content == "first")
    tavern.timeline.edit_message(pid, first.ref, "first, rewritten")
    assert next(m for m in tavern.playthroughs.messages(pid) if m.content == "first, rewritten").origin == "customer"

    second = next(m for m in tavern.playthroughs.messages(pid) if m.content == "second")
    assert tavern.timeline.delete_message(pid, second.ref, to_end=True) == 2
    assert texts(tavern, pid)[1:] == ["first, rewritten", "reply one, rewritten"]
    after = all_hashes(tavern)
    assert {k: after[k] for k in before} == before  # nothing stored was changed
    # The originals are still in the tree, marked.
    tree = tavern.timeline.timeline(pid)
    by_text = {v.preview: v for v in tree.variants}
    assert by_text["reply two"].deleted and by_text["second"].deleted
    assert by_text["reply one, rewritten"].edited


async def test_swipe_after_editing_the_persons_message_answers_the_edited_text(tavern: Tavern, model: ScriptedModel,
                                                                              pid: int) -> None:
    model.enqueue("to the typo", "to the fix")
    await drain(tavern.steps.send(pid, "helo"))
    user = tavern.playthroughs.messages(pid)[-2]
    tavern.timeline.edit_message(pid, user.ref, "hello")
    await drain(tavern.steps.regenerate(pid))
    assert model.requests[-1].messages[-1] == {"role": "user", "content": "hello"}
    assert texts(tavern, pid)[-2:] == ["hello", "to the fix"]


async def test_rollback_keeps_later_messages_as_a_sibling_branch(
        tavern: Tavern, model: ScriptedModel, pid: int) -> None:
    model.enqueue("r1", "r2", "r3")
    await drain(tavern.steps.send(pid, "u1"))
    await drain(tavern.steps.send(pid, "u2"))
    r1 = next(m for m in tavern.playthroughs.messages(pid) if m.content == "r1")
    tavern.timeline.rollback(pid, r1.ref)
    assert texts(tavern, pid)[-1] == "r1"
    await drain(tavern.steps.send(pid, "u2 again"))
    assert texts(tavern, pid)[-2:] == ["u2 again", "r3"]
    tree = tavern.timeline.timeline(pid)
    u2 = next(v for v in tree.variants if v.preview == "u2")
    again = next(v for v in tree.variants if v.preview == "u2 again")
    assert u2.parent == again.parent == r1.ref and not u2.active and again.active
    assert again.position == (2, 2)
    # Jumping to the old branch shows its continuation.
    tavern.timeline.select_variant(pid, u2.ref)
    assert texts(tavern, pid)[-2:] == ["u2", "r2"]
    # Lists count what the chat shows, across the forks (greeting, u1, r1, u2, r2).
    assert tavern.playthroughs.playthrough(pid).message_count == len(tavern.playthroughs.messages(pid)) == 5


async def test_new_playthrough_from_here_is_linked_from_the_tree(
        tavern: Tavern, model: ScriptedModel, pid: int) -> None:
    model.enqueue("r1", "r2", "branch reply")
    await drain(tavern.steps.send(pid, "u1"))
    await drain(tavern.steps.send(pid, "u2"))
    r1 = next(m for m in tavern.playthroughs.messages(pid) if m.content == "r1")
    branch = tavern.timeline.branch_playthrough(pid, r1.ref)
    assert branch.id != pid and texts(tavern, branch.id)[-1] == "r1"
    await drain(tavern.steps.send(branch.id, "elsewhere"))
    assert texts(tavern, branch.id)[-2:] == ["elsewhere", "branch reply"]
    assert texts(tavern, pid)[-1] == "r2"  # the original is untouched
    node = next(v for v in tavern.timeline.timeline(pid).variants if v.ref == r1.ref)
    assert node.branches == (branch.id,)
    # The branch's own tree starts with the shared messages and cannot move into the parent's sessions.
    branch_tree = tavern.timeline.timeline(branch.id)
    assert [v.preview for v in branch_tree.variants if v.active][-2:] == ["elsewhere", "branch reply"]
    assert "u2" not in [v.preview for v in branch_tree.variants]


async def test_unknown_refs_and_bad_operations_are_refused(tavern: Tavern, model: ScriptedModel, pid: int) -> None:
    with pytest.raises(NotFound):
        tavern.timeline.select_variant(pid, (999, 1))
    with pytest.raises(NotFound):
        tavern.timeline.rollback(pid, (999, 1))
    with pytest.raises(NotFound):
        tavern.timeline.edit_message(pid, (999, 1), "x")
    model.enqueue("I say hi.")
    await drain(tavern.steps.impersonate(pid))
    with pytest.raises(TavernError, match="does not end with"):
        await drain(tavern.steps.continue_reply(pid))
    greeting = tavern.playthroughs.messages(pid)[0]
    with pytest.raises(TavernError, match="needs text"):
        tavern.timeline.edit_message(pid, greeting.ref, "   ")


async def test_the_last_messages_of_a_deep_fork_match_the_full_surface(tavern: Tavern, model: ScriptedModel,
                                                                      pid: int) -> None:
    for i in range(6):
        model.enqueue(f"r{i}")
        await drain(tavern.steps.send(pid, f"u{i}"))
        if i % 2:
            shown = tavern.playthroughs.messages(pid)
            tavern.timeline.rollback(pid, shown[-2].ref)  # fork before the reply, then answer again
            model.enqueue(f"r{i} again")
            await drain(tavern.steps.regenerate(pid))
    shown = tavern.playthroughs.messages(pid)
    tavern.timeline.edit_message(pid, shown[-3].ref, "edited")
    tavern.timeline.delete_message(pid, shown[-5].ref)
    full = tavern.playthroughs.messages(pid)
    for last in (1, 3, 5, 50):
        assert ([(m.ref, m.content) for m in tavern.playthroughs.messages(pid, last=last)]
                == [(m.ref, m.content) for m in full[-last:]])


async def test_a_variant_can_be_edited_again_through_its_tree_ref(
        tavern: Tavern, model: ScriptedModel, pid: int) -> None:
    model.enqueue("draft")
    await drain(tavern.steps.send(pid, "hi"))
    variant = tavern.timeline.timeline(pid).path[-1]
    tavern.timeline.edit_message(pid, variant, "second draft")
    tavern.timeline.edit_message(pid, variant, "final")  # the tree still names the original variant
    assert texts(tavern, pid)[-1] == "final"
    node = next(v for v in tavern.timeline.timeline(pid).variants if v.ref == variant)
    assert node.edited and node.preview == "final"
    tavern.timeline.delete_message(pid, variant)
    assert texts(tavern, pid)[-1] == "hi"


async def test_preview_equals_the_next_request_for_each_strategy(tavern: Tavern, model: ScriptedModel, pid: int,
                                                                 corpus_dir: Path) -> None:
    [preset] = tavern.imports.import_paths([corpus_dir / "presets" / "st_openai_default_staging.json"])
    tavern.presets.bind_preset(pid, preset.id)
    for strategy in ("compat", "preset-roles-first", "preset-slots-first", "projection"):
        tavern.strategies.apply_strategy(pid, strategy)
        shown = tavern.steps.preview(pid, f"hello via {strategy}")
        assert shown["strategy"] == strategy
        model.enqueue(f"reply via {strategy}")
        await drain(tavern.steps.send(pid, f"hello via {strategy}"))
        sent = model.requests[-1]
        assert [{k: v for k, v in m.items() if k != "source"} for m in shown["messages"]] == sent.messages
        assert shown["config"] == sent.config
        # The bound preset's parameters are the call config under either strategy (Default.json values).
        assert sent.config == {"temperature": 1, "top_p": 1, "frequency_penalty": 0, "presence_penalty": 0,
                               "max_tokens": 300}
    with pytest.raises(TavernError, match="unknown strategy"):
        tavern.strategies.apply_strategy(pid, "nonsense")


async def test_a_swipe_after_editing_twice_answers_the_last_edit(
        tavern: Tavern, model: ScriptedModel, pid: int) -> None:
    model.enqueue("first", "second")
    await drain(tavern.steps.send(pid, "helo"))
    user = tavern.playthroughs.messages(pid)[-2]
    tavern.timeline.edit_message(pid, user.ref, "hello")
    tavern.timeline.edit_message(pid, user.ref, "hello there")  # an edit of the edit
    await drain(tavern.steps.regenerate(pid))
    assert model.requests[-1].messages[-1] == {"role": "user", "content": "hello there"}
    assert texts(tavern, pid)[-2:] == ["hello there", "second"]
