"""Each member's step of a group round is a normal step with its own trace; the
trace says which member it was written for (its reply's speaker). A one-character chat's
requests name nobody."""

from __future__ import annotations

from tavern_tui.service import Tavern
from tests.support.loopback import LoopbackServer, sse_chunks_for


async def test_each_request_of_a_round_names_its_member(looped: Tavern, server: LoopbackServer) -> None:
    _group, playthrough = looped.groups.new_group("Glade", ["Seraphina", "Shodan"], strategy="list")
    server.enqueue_sse(sse_chunks_for("Welcome."))
    server.enqueue_sse(sse_chunks_for("Insect."))
    async for _ in looped.groups.play_round(playthrough.id, "Hello."):
        pass
    traces = looped.traces.traces(playthrough.id)
    assert [t.speaker for t in traces] == ["Seraphina", "Shodan"]
    assert [t.to_json()["speaker"] for t in traces] == ["Seraphina", "Shodan"]
    assert looped.traces.trace(traces[1].id)["view"]["speaker"] == "Shodan"

    solo = looped.playthroughs.new_playthrough(looped.library.find_character("Shodan").id)
    server.enqueue_sse(sse_chunks_for("Alone."))
    async for _ in looped.steps.send(solo.id, "Hi."):
        pass
    assert [t.speaker for t in looped.traces.traces(solo.id)] == [None]
