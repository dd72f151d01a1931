"""A send's request built while the person looks at what they typed (`StepRunner.build_ahead`) is
sent as it is only while nothing it read has changed: the same text, the log at the same version,
nothing committed to the database since (a card edit, another window's message), the same minute.
Otherwise the step builds again, and what it sends shows the change. Requests go to the loopback
OpenAI-compatible server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.engine.step import StepBusy
from tavern_tui.service import Tavern
from tavern_tui.service.steps import ahead as ahead_module
from tests.service.test_compaction_stages import make_service, say
from tests.support.loopback import LoopbackServer, sse_chunks_for


@pytest.fixture
def live(server: LoopbackServer, db_url: str, corpus_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    service, pid, session = make_service(server.base_url, db_url, corpus_dir, tmp_path, history=4)
    yield service, pid, session
    service.close()


def _sent(server: LoopbackServer) -> list[dict[str, str]]:
    """The messages of the newest request the server received."""
    body = server.requests[-1].json
    assert body is not None
    return body["messages"]


def _stages(service: Tavern, pid: int) -> dict[str, float]:
    newest = service.traces.traces(pid)[-1]
    return service.traces.trace(str(newest.id))["timing"]["stages"]


async def test_a_send_of_the_text_built_ahead_sends_that_build(live, server: LoopbackServer) -> None:  # type: ignore[no-untyped-def]
    service, pid, _session = live
    assert service.steps.build_ahead(pid, "Where do we sleep tonight?")
    server.enqueue_sse(sse_chunks_for("At the mill."))
    await say(service, pid, "Where do we sleep tonight?")
    assert service.steps.ahead.taken == 1
    assert _sent(server)[-1] == {"role": "user", "content": "Where do we sleep tonight?"}
    stages = _stages(service, pid)
    # The trace says the build was made before the step and nothing was assembled in it.
    assert stages["ahead"] > 0 and stages["assemble"] == 0.0


async def test_the_build_ahead_is_the_request_the_step_would_send(live, server: LoopbackServer) -> None:  # type: ignore[no-untyped-def]
    service, pid, _session = live
    # The preview is the request a step would send now, built the way a step builds it.
    expected = [{"role": m["role"], "content": m["content"]}
                for m in service.steps.preview(pid, "Where do we sleep tonight?")["messages"]]
    assert service.steps.build_ahead(pid, "Where do we sleep tonight?")
    server.enqueue_sse(sse_chunks_for("At the mill."))
    await say(service, pid, "Where do we sleep tonight?")
    assert service.steps.ahead.taken == 1
    assert [{"role": m["role"], "content": m["content"]} for m in _sent(server)] == expected


async def test_a_card_edited_after_the_build_is_sent_as_edited(live, server: LoopbackServer) -> None:  # type: ignore[no-untyped-def]
    service, pid, _session = live
    character = service.playthroughs.playthrough(pid).character_id
    assert service.steps.build_ahead(pid, "Tell me about yourself.")
    # Another window (or `tavern edit`) changes the card: no event is appended, the database changed.
    service.library.edit_card(character, {"description": "A lighthouse keeper who hates the sea."})
    server.enqueue_sse(sse_chunks_for("Waves."))
    await say(service, pid, "Tell me about yourself.")
    assert service.steps.ahead.taken == 0
    assert any("A lighthouse keeper who hates the sea." in m["content"] for m in _sent(server))


async def test_another_message_or_another_text_builds_again(live, server: LoopbackServer) -> None:  # type: ignore[no-untyped-def]
    service, pid, session = live
    assert service.steps.build_ahead(pid, "First draft")
    server.enqueue_sse(sse_chunks_for("Hm."))
    await say(service, pid, "Second thought")  # the person changed the text after the pause
    assert service.steps.ahead.taken == 0 and _sent(server)[-1]["content"] == "Second thought"
    assert service.steps.build_ahead(pid, "Again")
    # A line another window stored meanwhile is in the request.
    service.store.events.append(session, [NewEvent(EventKind.USER_MESSAGE, "user",
                                                   {"content": "A line from the other window."})])
    server.enqueue_sse(sse_chunks_for("Hm."))
    await say(service, pid, "Again")
    assert service.steps.ahead.taken == 0
    assert [m["content"] for m in _sent(server)[-2:]] == ["A line from the other window.", "Again"]


async def test_the_minute_turning_builds_again(live, server: LoopbackServer,  # type: ignore[no-untyped-def]
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    service, pid, _session = live
    monkeypatch.setattr(ahead_module, "minute_now", lambda: (2026, 12, 7, 12, 59))
    assert service.steps.build_ahead(pid, "What time is it?")
    monkeypatch.setattr(ahead_module, "minute_now", lambda: (2026, 12, 7, 13, 0))  # {{time}} would read 1:00 now
    server.enqueue_sse(sse_chunks_for("One."))
    await say(service, pid, "What time is it?")
    assert service.steps.ahead.taken == 0


def test_a_build_ahead_writes_nothing(live) -> None:  # type: ignore[no-untyped-def]
    service, pid, session = live
    before = (service.store.data_version(), service.store.events.version())
    assert service.steps.build_ahead(pid, "Quiet now.")
    assert (service.store.data_version(), service.store.events.version()) == before
    assert not service.steps.build_ahead(pid, "   ")  # nothing to send: nothing built


async def test_a_build_ahead_after_a_persona_edit_moves_the_pin_when_sent(live, server: LoopbackServer) -> None:  # type: ignore[no-untyped-def]
    service, pid, _session = live
    service.persona.edit_persona(0, add="{{user}} prefers short replies.")
    assert service.steps.build_ahead(pid, "Hello.")  # built after the edit: nothing changed since
    server.enqueue_sse(sse_chunks_for("Hi."))
    await say(service, pid, "Hello.")
    server.enqueue_sse(sse_chunks_for("Yes."))
    await say(service, pid, "Go on.")
    assert service.steps.ahead.taken == 1
    personas = [service.traces.trace(str(t.id))["persona"] for t in service.traces.traces(pid)]
    # As a step built in place (tests/persona: "each edit is one rotation at the next step"): the
    # sent build ahead is the edit's one rotation, and the pin moved with it, so the next step has none.
    assert personas[0]["rotation"] == {"from": 0, "to": 1, "reason": "persona_changed"}
    assert "rotation" not in personas[1]


async def test_a_send_while_another_window_replies_is_refused_before_it_builds(  # type: ignore[no-untyped-def]
        live, server: LoopbackServer) -> None:
    service, pid, session = live
    assert service.steps.build_ahead(pid, "Are you there?")
    played = service.playthroughs.playthrough(pid).updated_at
    held = service.store.claims.claim(session, 60)  # another window's step
    try:
        with pytest.raises(StepBusy, match="a reply is being written in this playthrough"):
            await say(service, pid, "Are you there?")
    finally:
        service.store.claims.release(held.token)
    # Nothing was built, taken or touched.
    assert service.steps.ahead.has(pid, "Are you there?") and service.steps.ahead.taken == 0
    assert service.playthroughs.playthrough(pid).updated_at == played and server.requests == []
