"""`TavernScreen.call`: a screen's service calls run in thread workers, one at a time in the order
made, and a call cancelled before it ran never holds up the ones after it.

Rule: issue 14 part 3 (one concurrency rule; harlequin's thread workers). The stall this guards
against was seen by a trial run: two exclusive reads in one tick (the home screen's playthrough
list) left the first cancelled before its worker started, and every later call of the screen
waited for it forever.
"""

from __future__ import annotations

import asyncio
import threading

from textual.app import App

from tavern_tui.tui.screens.base import TavernScreen


class _Host(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.calls = TavernScreen(tavern=None)  # type: ignore[arg-type]

    def on_mount(self) -> None:
        self.push_screen(self.calls)


async def test_a_call_cancelled_before_it_ran_does_not_stall_the_queue() -> None:
    app = _Host()
    release = threading.Event()
    ran: list[str] = []
    shown: list[str] = []
    loop_thread = threading.get_ident()
    threads: set[int] = set()

    def step(name: str, block: bool = False) -> str:
        threads.add(threading.get_ident())
        if block:
            release.wait(5)
        ran.append(name)
        return name

    async with app.run_test() as pilot:
        screen = app.calls
        screen.call(step, "first", True, title="first", then=shown.append)
        # Two exclusive reads in one tick: the second cancels the first before its worker starts.
        screen.call(step, "read 1", title="read", group="reads", exclusive=True, then=shown.append)
        screen.call(step, "read 2", title="read", group="reads", exclusive=True, then=shown.append)
        screen.call(step, "last", title="last", then=shown.append)
        await pilot.pause(0.2)
        assert ran == []  # all wait for the first call, which is still running
        release.set()
        await asyncio.wait_for(screen.settled(), timeout=5)
        await pilot.pause()

    assert ran == ["first", "read 2", "last"]  # in order; the cancelled read never ran
    assert shown == ["first", "read 2", "last"]
    assert loop_thread not in threads
