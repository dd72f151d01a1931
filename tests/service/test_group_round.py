"""A group chat round against the loopback server: one line from the person, then one request per
member the turn order picks, each written for its speaker ({{char}} is the speaker) and each
later one seeing the earlier replies; replies stored under their speakers; a swipe of the second
member's reply asks the same member again; manual order queues the line until a member is asked;
every request of the round verifies against its trace."""

from __future__ import annotations

from typing import Any

import pytest

from tavern_tui.engine.step import StepFailed, StepSettled
from tavern_tui.service import Tavern
from tavern_tui.service.groups import LineQueued, MemberTurn
from tests.support.loopback import LoopbackServer, sse_chunks_for


async def _round(service: Tavern, pid: int, text: str = "") -> list[Any]:
    return [update async for update in service.groups.play_round(pid, text)]


async def _glade_round(service: Tavern, server: LoopbackServer, text: str, replies: tuple[str, str]) -> int:
    """A group "Glade" (Seraphina then Shodan, list order) played one round on `text`, the members
    answering `replies`; its playthrough id."""
    _group, playthrough = service.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy="list",
                                                   user_name="Ann")
    for reply in replies:
        server.enqueue_sse(sse_chunks_for(reply))
    await _round(service, playthrough.id, text)
    return playthrough.id


def _system(request: Any) -> str:
    return "\n".join(m["content"] for m in request.json["messages"] if m["role"] == "system")


async def test_one_line_one_request_per_member_each_written_for_its_speaker(looped: Tavern,
                                                                            server: LoopbackServer) -> None:
    _group, playthrough = looped.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy="list",
                                                  user_name="Ann")
    server.enqueue_sse(sse_chunks_for("Welcome to the glade, Ann."))
    server.enqueue_sse(sse_chunks_for("Insect. Another visitor."))
    updates = await _round(looped, playthrough.id, "Hello, both of you.")

    assert [(u.name, u.position, u.count) for u in updates if isinstance(u, MemberTurn)] == [
        ("Seraphina", 1, 2), ("Shodan", 2, 2)]
    first, second = server.requests
    # The default preset's main prompt names {{char}}: the speaker of each request.
    assert "Write Seraphina's next reply" in _system(first) and "Shodan" not in _system(first).split("\n")[0]
    assert "Write Shodan's next reply" in _system(second)
    sent_second = [(m["role"], m["content"]) for m in second.json["messages"] if m["role"] != "system"]
    assert ("user", "Hello, both of you.") in sent_second
    assert any(role == "assistant" and "Welcome to the glade, Ann." in text for role, text in sent_second)

    shown = looped.playthroughs.messages(playthrough.id)[-3:]
    assert [(m.role, m.speaker, m.content) for m in shown] == [
        ("user", "Ann", "Hello, both of you."), ("assistant", "Seraphina", "Welcome to the glade, Ann."),
        ("assistant", "Shodan", "Insect. Another visitor.")]
    ids = {m.name: m.character_id for m in looped.groups.group("Glade").members}
    assert [m.character_id for m in shown] == [None, ids["Seraphina"], ids["Shodan"]]
    verified = looped.traces.verify_all()
    assert len(verified) == 2 and all(v.ok for _, v in verified)


async def test_a_swipe_of_the_second_members_reply_asks_the_same_member(looped: Tavern,
                                                                       server: LoopbackServer) -> None:
    pid = await _glade_round(looped, server, "Hello.", ("Welcome.", "Insect."))
    server.enqueue_sse(sse_chunks_for("Pathetic creature."))
    async for _ in looped.steps.regenerate(pid):
        pass
    assert "Write Shodan's next reply" in _system(server.requests[-1])
    last = looped.playthroughs.messages(pid)[-1]
    assert (last.speaker, last.content) == ("Shodan", "Pathetic creature.")
    swipe = looped.timeline.swipe(pid, -1)  # back to the first variant: still Shodan's
    assert swipe is not None
    previous = looped.playthroughs.messages(pid)[-1]
    assert (previous.speaker, previous.content) == ("Shodan", "Insect.")


async def test_a_swipe_of_a_failed_members_reply_asks_the_member_who_failed(looped: Tavern,
                                                                           server: LoopbackServer) -> None:
    """Shodan's reply fails before its first token (a broken connection: an empty
    `assistant/attempt`, shown as "Shodan error · network"): ctrl+r / `--swipe` asks Shodan
    again, not Seraphina who spoke before it, and the failed attempt stays a swipe away."""
    _group, playthrough = looped.groups.new_group("Duo", ["Seraphina", "Shodan"], strategy="list", user_name="Ann")
    ids = {m.name: m.character_id for m in looped.groups.group("Duo").members}
    server.enqueue_sse(sse_chunks_for("Welcome."))
    for _ in range(4):  # the provider's retries each meet a broken connection
        server.enqueue_sse([], done=False, abort=True)
    with pytest.raises(StepFailed):
        await _round(looped, playthrough.id, "Hello.")
    server.clear()
    failed = looped.playthroughs.messages(playthrough.id)[-1]
    assert (failed.role, failed.speaker, failed.content, failed.character_id, failed.partial) == (
        "assistant", "Shodan", "", ids["Shodan"], True)
    asked = len(server.requests)

    server.enqueue_sse(sse_chunks_for("Pathetic creature."))
    settled = [u async for u in looped.steps.regenerate(playthrough.id) if isinstance(u, StepSettled)]
    assert len(server.requests) == asked + 1
    assert "Write Shodan's next reply" in _system(server.requests[-1])
    assert "Write Seraphina's next reply" not in _system(server.requests[-1])
    assert settled[-1].event.body["character_id"] == ids["Shodan"]
    shown = looped.playthroughs.messages(playthrough.id)[-3:]
    assert [(m.role, m.speaker, m.content, m.character_id) for m in shown] == [
        ("user", "Ann", "Hello.", None), ("assistant", "Seraphina", "Welcome.", ids["Seraphina"]),
        ("assistant", "Shodan", "Pathetic creature.", ids["Shodan"])]
    assert looped.timeline.swipe_state(playthrough.id).position == (2, 2)  # the failed one is swipe 1
    trace = looped.traces.traces(playthrough.id)[-1]
    assert trace.to_json()["speaker"] == "Shodan"


async def test_manual_order_queues_the_line_until_a_member_is_asked(looped: Tavern, server: LoopbackServer) -> None:
    _group, playthrough = looped.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy="manual",
                                                  user_name="Ann")
    updates = await _round(looped, playthrough.id, "Anyone there?")
    assert updates == [LineQueued("Anyone there?")] and server.requests == []
    assert [item.text for item in looped.inbox.pending(playthrough.id)] == ["Anyone there?"]

    server.enqueue_sse(sse_chunks_for("I am always here."))
    spoken = [u async for u in looped.groups.speak(playthrough.id, "shodan")]
    assert [u.name for u in spoken if isinstance(u, MemberTurn)] == ["Shodan"]
    assert "Write Shodan's next reply" in _system(server.requests[0])
    assert looped.inbox.pending(playthrough.id) == []
    shown = looped.playthroughs.messages(playthrough.id)[-2:]
    assert [(m.speaker, m.content) for m in shown] == [("Ann", "Anyone there?"), ("Shodan", "I am always here.")]


async def test_a_projected_group_request_has_sillytaverns_group_prompts_and_names(looped: Tavern,
                                                                                 server: LoopbackServer) -> None:
    # openai.js: the chat opens with new_group_chat_prompt ("[Start a new group chat. Group members:
    # {{group}}]"), ends with group_nudge_prompt ("[Write the next reply only as {{char}}.]"), and
    # names_behavior DEFAULT prefixes every message not the person's with its speaker's name.
    _group, playthrough = looped.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy="list",
                                                  user_name="Ann")
    looped.strategies.apply_strategy(playthrough.id, "projection")
    server.enqueue_sse(sse_chunks_for("Welcome."))
    server.enqueue_sse(sse_chunks_for("Insect."))
    await _round(looped, playthrough.id, "Hello, {{group}}.")
    sent = [(m["role"], m["content"]) for m in server.requests[1].json["messages"]]
    assert ("system", "[Start a new group chat. Group members: Seraphina, Shodan]") in sent
    assert sent[-1] == ("system", "[Write the next reply only as Shodan.]")
    assert ("assistant", "Seraphina: Welcome.") in sent
    assert ("user", "Hello, Seraphina, Shodan.") in sent  # the person's line: {{group}} expanded, not named


def _sent_text(request: Any) -> str:
    return "\n".join(str(m["content"]) for m in request.json["messages"])


async def test_every_members_character_lore_applies_whoever_speaks(looped: Tavern, server: LoopbackServer) -> None:
    # SillyTavern's getCharacterLore reads every member's book in a group: Seraphina's embedded
    # Eldoria book fires on "shadowfang" even when Shodan speaks.
    _group, playthrough = looped.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy="manual",
                                                  user_name="Ann")
    await _round(looped, playthrough.id, "What are the shadowfang beasts?")
    server.enqueue_sse(sse_chunks_for("Irrelevant."))
    _ = [u async for u in looped.groups.speak(playthrough.id, "Shodan")]
    sent = _sent_text(server.requests[0])
    assert "Write Shodan's next reply" in sent
    assert 'Ann: "What are Shadowfangs?"' in sent  # the entry's {{user}} filled in


async def test_join_mode_sends_every_members_card_fields(looped: Tavern, server: LoopbackServer) -> None:
    _group, playthrough = looped.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy="list", mode="join",
                                                  user_name="Ann")
    looped.groups.set_muted("Glade", "Shodan", True)  # muted: its card is left out unless it speaks (mode 1)
    server.enqueue_sse(sse_chunks_for("Welcome."))
    await _round(looped, playthrough.id, "Hello.")
    assert len(server.requests) == 1
    assert "Shodan is a hyper-advanced" not in _sent_text(server.requests[0])
    looped.groups.set_muted("Glade", "Shodan", False)
    server.enqueue_sse(sse_chunks_for("Hello again."))
    server.enqueue_sse(sse_chunks_for("Insect."))
    await _round(looped, playthrough.id, "Hello?")
    joined = _sent_text(server.requests[1])
    # Each member's description with its own name filled in (the card says "{{char}} is a hyper-…").
    assert "[Seraphina's Personality=" in joined and "Shodan is a hyper-advanced artificial-intelligence" in joined


async def test_a_branch_of_a_group_playthrough_plays_the_same_group(looped: Tavern, server: LoopbackServer) -> None:
    group, playthrough = looped.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy="list", user_name="Ann")
    server.enqueue_sse(sse_chunks_for("Welcome."))
    server.enqueue_sse(sse_chunks_for("Insect."))
    await _round(looped, playthrough.id, "Hello.")
    first_reply = looped.playthroughs.messages(playthrough.id)[-2]
    branch = looped.timeline.branch_playthrough(playthrough.id, first_reply.ref)
    assert looped.groups.group_of(branch.id) == looped.groups.group(group.id)
    assert looped.groups.group(group.id).playthroughs == (playthrough.id, branch.id)
    server.enqueue_sse(sse_chunks_for("And you?"))
    server.enqueue_sse(sse_chunks_for("Silence."))
    await _round(looped, branch.id, "Go on.")
    assert [m.speaker for m in looped.playthroughs.messages(branch.id)[-3:]] == ["Ann", "Seraphina", "Shodan"]


async def test_upcoming_names_and_queued_lines_answered_by_the_turn_order(looped: Tavern,
                                                                         server: LoopbackServer) -> None:
    group, playthrough = looped.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy="list", user_name="Ann")
    assert looped.groups.upcoming(playthrough.id) == (looped.groups.group(group.id), ["Seraphina", "Shodan"])
    looped.groups.set_strategy("Glade", "natural")
    assert looped.groups.upcoming(playthrough.id)[1] is None  # a random draw: nothing to show
    looped.groups.set_strategy("Glade", "list")

    looped.inbox.add(playthrough.id, "Typed while another round ran.")
    server.enqueue_sse(sse_chunks_for("Welcome."))
    server.enqueue_sse(sse_chunks_for("Insect."))
    turns = [u.name async for u in looped.groups.play_queued(playthrough.id) if isinstance(u, MemberTurn)]
    assert turns == ["Seraphina", "Shodan"] and looped.inbox.pending(playthrough.id) == []
    shown = looped.playthroughs.messages(playthrough.id)[-3:]
    assert [(m.speaker, m.content) for m in shown] == [
        ("Ann", "Typed while another round ran."), ("Seraphina", "Welcome."), ("Shodan", "Insect.")]


async def test_each_members_greeting_is_in_every_members_request(looped: Tavern, server: LoopbackServer) -> None:
    _group, playthrough = looped.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy="list",
                                                  user_name="Ann")
    looped.strategies.apply_strategy(playthrough.id, "projection")
    server.enqueue_sse(sse_chunks_for("Welcome."))
    server.enqueue_sse(sse_chunks_for("Insect."))
    await _round(looped, playthrough.id, "Hello.")
    greetings = looped.playthroughs.messages(playthrough.id)[:2]
    assert [(g.speaker, g.source) for g in greetings] == [("Seraphina", "opening"), ("Shodan", "opening")]
    for request in server.requests:
        sent = [m["content"] for m in request.json["messages"] if m["role"] == "assistant"]
        # The corpus cards' first_mes: Seraphina's begins "*You wake with a start", Shodan's
        # "*It had been a hard-fought battle"; SillyTavern's getGroupChat posts both, in member order.
        assert sent[0].startswith("Seraphina: *You wake with a start")
        assert sent[1].startswith("Shodan: *It had been a hard-fought battle")


async def test_the_tree_names_each_members_reply(looped: Tavern, server: LoopbackServer) -> None:
    _group, playthrough = looped.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy="list", user_name="Ann")
    server.enqueue_sse(sse_chunks_for("Welcome."))
    server.enqueue_sse(sse_chunks_for("Insect."))
    await _round(looped, playthrough.id, "Hello.")
    variants = looped.timeline.timeline(playthrough.id).variants
    assert [(v.role, v.speaker, v.preview) for v in variants][-3:] == [
        ("user", "Ann", "Hello."), ("assistant", "Seraphina", "Welcome."), ("assistant", "Shodan", "Insect.")]
    assert variants[-1].to_json()["speaker"] == "Shodan"


async def test_a_search_hit_in_a_group_chat_names_the_member_who_wrote_it(looped: Tavern,
                                                                         server: LoopbackServer) -> None:
    pid = await _glade_round(looped, server, "Hello, both of you.",
                             ("Welcome to the glade, Ann.", "Insect. Another visitor."))
    [hit] = looped.chats.search("insect visitor")
    assert (hit.playthrough_id, hit.role, hit.speaker) == (pid, "assistant", "Shodan")
    assert hit.character_name == "Glade"  # the chat is the group's, not its first member's (a trial)
    [hit] = looped.chats.search("welcome glade")
    assert hit.speaker == "Seraphina"
