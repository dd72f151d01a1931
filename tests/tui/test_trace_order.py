"""The trace pane lists requests newest first by the time each was sent (its header says so),
and a request whose provider sent no usage shows the app's own token count, marked estimated."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from tavern_tui.engine.stream import ChatRequest, StreamEvent, Usage
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.trace_requests import newest_first
from tavern_tui.views import TraceView
from tests.tui.conftest import ScriptedProvider
from tests.tui.test_app import SIZE, open_seraphina, send
from tests.tui.test_trace_pane import listed, open_trace


class NoUsageOnSecond(ScriptedProvider):
    """A scripted provider whose second request reports no usage (as some servers do)."""

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        async for event in super().stream(request):
            if isinstance(event, Usage) and len(self.requests) == 2:
                continue
            yield event


def _view(trace_id: str, submitted_at: str) -> TraceView:
    return TraceView(trace_id, int(trace_id.split(":")[0]), submitted_at, "p", "m", "s", "normal", 1, {}, [],
                     None, None, None, "ok")


def test_newest_first_follows_the_time_sent_not_the_ids() -> None:
    # Session 3 wrote its requests before session 1's last one: id order is not time order.
    views = [_view("1:5", "2026-12-03T18:00:00+00:00"), _view("1:40", "2026-12-03T18:09:00+00:00"),
             _view("3:2", "2026-12-03T18:04:00+00:00"), _view("3:9", "2026-12-03T18:05:00+00:00")]
    assert [v.id for v in newest_first(views)] == ["1:40", "3:9", "3:2", "1:5"]


async def test_three_requests_newest_first_and_an_estimate_without_usage(
        make_tavern: Callable[..., Tavern]) -> None:
    provider = NoUsageOnSecond()
    for reply in ("First answer.", "Second answer.", "Third answer."):
        provider.enqueue(reply)
    tavern = make_tavern(provider)
    app = TavernApp(tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        for text in ("one", "two", "three"):
            await send(pilot, chat, text)
        screen = await open_trace(pilot)
        assert screen.requests.border_title == "Requests · newest first"
        traces = tavern.traces.traces(chat.playthrough_id)
        assert len(traces) == 3 and traces[1].usage is None and traces[0].usage is not None
        shown = [screen.requests.get_option_at_index(i).id for i in range(screen.requests.option_count)]
        assert shown == [traces[2].id, traces[1].id, traces[0].id]
        assert [t.submitted_at for t in traces] == sorted(t.submitted_at for t in traces)
        lines = listed(screen)
        assert "10+5 tok" in lines[0] and "10+5 tok" in lines[2]  # scripted usage: prompt 10 + completion 5
        # The second request's own count, as its context fit recorded it when it was sent.
        used = tavern.traces.trace(traces[1].id)["context"]["used"]
        assert isinstance(used, int) and used > 100
        assert f"~{used} tok (est.)" in lines[1] and "? tok" not in lines[1]
