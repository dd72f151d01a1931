"""Runs the named benchmarks and prints figures with their ratio to the target.

    python -m benchmarks                 # all
    python -m benchmarks event_append    # one
    python -m benchmarks --json out.json

Targets come from shared/research/performance-anchors.md §7 (B2-B9) and issue 22 (cold_start,
cli_start, transcript_window, stream_render, turn_overhead: see their module docstrings). A ratio below 1.0
means inside the target.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.checkpoint_cost import checkpoint_cost
from benchmarks.fuzz import fuzz
from benchmarks.prompt_build import prompt_build
from benchmarks.transcript_bench import stream_render, transcript_window, turn_overhead
from benchmarks.ui_start import cli_start, cold_start
from benchmarks.wi_activation import wi_activation
from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.engine.log import derive_messages, inspect, page, tail
from tavern_tui.store.store import Store

Result = dict[str, object]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _body(i: int) -> dict[str, object]:
    return {"content": ("Seraphina turns the page. " * 24)[: 400 + i % 200]}


def event_append(workdir: Path, n: int = 5000) -> Result:
    """B3: one transaction per event through EventLog, WAL + NORMAL. Target ≥ 5,000 events/s, p99 ≤ 2 ms."""
    store = Store(f"sqlite:///{workdir / 'append.db'}")
    sid = store.events.create_session()
    kinds = [(EventKind.USER_MESSAGE, "user"), (EventKind.ASSISTANT_MESSAGE, "assistant")]
    latencies = []
    start = time.perf_counter()
    for i in range(n):
        kind, role = kinds[i % 2]
        t0 = time.perf_counter()
        store.events.append(sid, [NewEvent(kind, role, _body(i))])
        latencies.append((time.perf_counter() - t0) * 1000)
    elapsed = time.perf_counter() - start
    wal = workdir / "append.db-wal"
    store.close()
    rate = n / elapsed
    p99 = _pct(latencies, 0.99)
    return {"events": n, "events_per_s": round(rate), "p50_ms": round(_pct(latencies, 0.5), 3), "p99_ms": round(p99, 3),
            "wal_bytes": wal.stat().st_size if wal.exists() else 0,
            "ratio_rate": round(5000 / rate, 2), "ratio_p99": round(p99 / 2.0, 2)}


def session_open_query(workdir: Path, sessions: int = 200, per_session: int = 500, iterations: int = 50) -> Result:
    """B4: last 50 visible messages of a 5-deep fork in a 100k-event database. Target p95 ≤ 3 ms.

    Measures `engine.log.tail` (one bounded query: per ancestor an index scan from its fork
    point backwards) and, for comparison, `page`, which derives the whole surface and slices it.
    """
    store = Store(f"sqlite:///{workdir / 'open.db'}")
    log = store.events
    roots = []
    for _s in range(sessions - 5):
        sid = log.create_session()
        log.append(sid, [NewEvent(EventKind.USER_MESSAGE if i % 2 == 0 else EventKind.ASSISTANT_MESSAGE,
                                  "user" if i % 2 == 0 else "assistant", _body(i)) for i in range(per_session)])
        roots.append(sid)
    parent = roots[0]
    for _depth in range(5):  # a chain of forks, each forking near its parent's end and adding 20 events
        child = log.create_session(parent_id=parent, fork_seq=log.head_seq(parent) - 10)
        log.append(child, [NewEvent(EventKind.USER_MESSAGE, "user", _body(i)) for i in range(20)])
        parent = child
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        result = tail(log, inspect(log, parent), 50)
        times.append((time.perf_counter() - t0) * 1000)
    assert len(result) == 50
    full = derive_messages(log, parent)
    assert [m.ref for m in result] == [m.ref for m in full[-50:]], "the bounded read differs from the full surface"
    whole = []
    for _ in range(5):
        t0 = time.perf_counter()
        page(log, inspect(log, parent), offset=-50, limit=50)
        whole.append((time.perf_counter() - t0) * 1000)
    store.close()
    p95 = _pct(times, 0.95)
    return {"events_in_db": (sessions - 5) * per_session + 100, "fork_depth": 5, "surface_messages": len(full),
            "p50_ms": round(statistics.median(times), 2), "p95_ms": round(p95, 2),
            "full_derive_ms": round(statistics.median(whole), 2), "ratio_p95": round(p95 / 3.0, 2)}


def _long_chat(messages: int) -> bytes:
    """A SillyTavern chat of `messages` lines (person first); every 10th reply and the last carry 3 swipes."""
    lines = [json.dumps({"user_name": "Ann", "character_name": "Seraphina", "chat_metadata": {}})]
    for i in range(messages):
        user = i % 2 == 0  # the person first, so an even count ends on a reply
        text = f"{i}: " + str(_body(i)["content"])
        line: dict[str, object] = {"name": "Ann" if user else "Seraphina", "is_user": user, "is_system": False,
                                   "send_date": "2024-07-12T01:31:37.000Z", "mes": text}
        if not user and (i % 20 == 1 or i == messages - 1):
            line.update(swipes=[text, text + " (b)", text + " (c)"], swipe_id=0)
        lines.append(json.dumps(line))
    return ("\n".join(lines) + "\n").encode("utf-8")


def swipe_switch(workdir: Path, messages: int = 5000, runs: int = 20) -> Result:
    """B8 (second half): in a 5,000-message playthrough, create a fork (rollback at the last
    message) and switch swipes of the last reply, reading what the chat repaints (its last 20
    messages and the counter): warm (the tree cached since the last append, the usual case of
    swiping back and forth) and cold (the first swipe after a new reply reads the whole tree).
    `tree_ms` is the branch-tree pane's data with previews. Targets: fork ≤ 5 ms, switch ≤ 100 ms."""
    from tavern_tui.config import Settings
    from tavern_tui.service import Tavern

    tavern = Tavern(Settings(db_url=f"sqlite:///{workdir / 'swipe.db'}"))
    card = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "cards" / "seraphina_chara_ccv3.png"
    tavern.imports.import_paths([card])
    t0 = time.perf_counter()
    result = tavern.chat_files.import_chat_bytes(_long_chat(messages), "long.jsonl")
    import_ms = (time.perf_counter() - t0) * 1000
    pid = result.id or 0
    log = tavern.store.events
    head = tavern.playthroughs.playthrough(pid).session_id
    forks = []
    for i in range(runs):
        t0 = time.perf_counter()
        log.create_session(head, messages - 1 - i, pid)
        forks.append((time.perf_counter() - t0) * 1000)
    switches = []
    for i in range(runs):
        t0 = time.perf_counter()
        state = tavern.timeline.swipe(pid, -1 if i % 4 < 2 else 1)
        shown = tavern.playthroughs.messages(pid, last=20)
        switches.append((time.perf_counter() - t0) * 1000)
    assert state is not None and state.position[1] == 3 and len(shown) == 20
    cold = []
    for i in range(5):
        tavern.timeline._timelines.clear()  # as after a new reply: the tree is read again
        t0 = time.perf_counter()
        tavern.timeline.swipe(pid, -1 if i % 2 else 1)
        tavern.playthroughs.messages(pid, last=20)
        cold.append((time.perf_counter() - t0) * 1000)
    tree = []
    for _ in range(3):
        tavern.timeline._timelines.clear()
        t0 = time.perf_counter()
        tavern.timeline.timeline(pid)
        tree.append((time.perf_counter() - t0) * 1000)
    tavern.close()
    fork_p95, switch_p95 = _pct(forks, 0.95), _pct(switches, 0.95)
    return {"messages": messages, "import_ms": round(import_ms), "fork_p95_ms": round(fork_p95, 2),
            "switch_p50_ms": round(statistics.median(switches), 1), "switch_p95_ms": round(switch_p95, 1),
            "switch_cold_max_ms": round(max(cold), 1),
            "tree_ms": round(statistics.median(tree)), "ratio_fork": round(fork_p95 / 5.0, 2),
            "ratio_switch": round(switch_p95 / 100.0, 2), "ratio_switch_cold": round(max(cold) / 100.0, 2)}


def fork_create(workdir: Path, n: int = 200) -> Result:
    """B8 (first half): creating a fork is one row, no copying. Target ≤ 5 ms per fork."""
    store = Store(f"sqlite:///{workdir / 'fork.db'}")
    log = store.events
    root = log.create_session()
    log.append(root, [NewEvent(EventKind.USER_MESSAGE, "user", _body(i)) for i in range(5000)])
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        log.create_session(parent_id=root, fork_seq=2500 + i)
        times.append((time.perf_counter() - t0) * 1000)
    store.close()
    p95 = _pct(times, 0.95)
    return {"forks": n, "p50_ms": round(statistics.median(times), 3), "p95_ms": round(p95, 3),
            "ratio_p95": round(p95 / 5.0, 2)}


def chat_open(workdir: Path, exchanges: int = 60, runs: int = 5) -> Result:
    """B5 (first half): open a chat of 121 messages in the headless app (120x40), `runs` times
    in one app (the first open is the process's first, the rest reopen it). Target
    time-to-interactive ≤ 300 ms.

    Timed as B5 times it (`transcript_bench._open_interactive`, the same helper): from pushing
    the `ChatScreen` to the transcript's boxes mounted, the composer focused and a key sent
    through the driver (as a terminal's arrives) being in the composer - the person can read
    and type. Not timed: the chat's background work after first paint (the world-info warm-up,
    the token gauge), which `settled_*` adds: until every worker the screen started is done and
    the app is idle (what this benchmark measured before 2026-12-07, ~370 ms median, because it
    ended on `pilot.pause()`, which waits for the app to go idle).

    `painted_*` (reported, not the target) ends at the first frame the app writes with the
    newest message laid out on the screen (`App._display`, `_Frames`): the key can reach the
    composer before that frame, while the transcript's first layout pass is still pending."""
    import asyncio

    from benchmarks.transcript_bench import _open_interactive
    from tavern_tui.config import Settings
    from tavern_tui.providers.demo import DemoProvider
    from tavern_tui.service import Tavern
    from tavern_tui.tui.app import TavernApp
    from tavern_tui.tui.screens.chat import ChatScreen

    demo = DemoProvider(delay=0)
    tavern = Tavern(Settings(db_url=f"sqlite:///{workdir / 'chat.db'}"), provider=demo)
    corpus = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "cards" / "seraphina_chara_ccv3.png"
    character = tavern.imports.import_paths([corpus])[0].id or 0
    playthrough = tavern.playthroughs.new_playthrough(character)
    reply = ("*She nods slowly.* " + "The forest hums, and the light through the leaves is green and gold. " * 4
             + "\n\n**Rest.**")

    async def fill() -> None:
        for i in range(exchanges):
            demo.enqueue(reply)
            async for _ in tavern.steps.send(playthrough.id, f"message {i}: " + "I look around the glade. " * 5):
                pass

    async def measure() -> tuple[list[float], list[float], list[float]]:
        app = TavernApp(tavern)

        def laid_out() -> bool:  # the newest message placed on the screen by a layout pass
            screen = app.screen
            boxes = screen.transcript.boxes if isinstance(screen, ChatScreen) else []
            return bool(boxes) and bool(boxes[-1].region)

        times, settles, paints = [], [], []
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            frames = _Frames(app)
            for _ in range(runs):
                painted = frames.when(laid_out)
                start = time.perf_counter()
                _screen, tti, settled = await _open_interactive(app, pilot, playthrough.id)
                times.append(tti)
                settles.append(settled)
                paints.append((await asyncio.wait_for(painted, 30) - start) * 1000)
                app.pop_screen()
                await pilot.pause()
        return times, settles, paints

    asyncio.run(fill())
    times, settles, paints = asyncio.run(measure())
    tavern.close()
    median = statistics.median(times)
    return {"messages": 2 * exchanges + 1, "median_ms": round(median), "max_ms": round(max(times)),
            "first_ms": round(times[0]), "painted_median_ms": round(statistics.median(paints)),
            "painted_max_ms": round(max(paints)), "settled_median_ms": round(statistics.median(settles)),
            "ratio_median": round(median / 300, 2)}


class _Frames:
    """Watches the frames the app writes (`App._display`, wrapped on the instance): `when(test)`
    is resolved with the time of the first frame written while `test()` holds. Nothing polls:
    the benchmark awaits it, so the event loop stays idle between frames as a terminal's does
    (1 ms polling took the GIL from the swipe's worker: +20-40 ms)."""

    def __init__(self, app: Any) -> None:
        self._waiting: list[tuple[Callable[[], object], Any]] = []
        orig = app._display

        def display(*args: Any, **kwargs: Any) -> Any:
            result = orig(*args, **kwargs)
            now = time.perf_counter()
            for test, painted in self._waiting:
                if not painted.done() and test():
                    painted.set_result(now)
            self._waiting = [(t, f) for t, f in self._waiting if not f.done()]
            return result

        app._display = display

    def when(self, test: Callable[[], object]) -> Any:
        """An asyncio future resolved with the time (perf_counter) of the first frame written
        from now on while `test()` is true."""
        import asyncio

        painted = asyncio.get_running_loop().create_future()
        self._waiting.append((test, painted))
        return painted


def swipe_repaint(workdir: Path, messages: int = 5000, runs: int = 8) -> Result:
    """B8 (repaint): in the headless app (120x40) on a 5,000-message playthrough, press
    ctrl+right/ctrl+left on the last reply and time until the screen is painted with the other
    variant. Target ≤ 100 ms (the max).

    Timed: from the key entering through the driver, as a terminal's does (`transcript_bench._key`,
    not `pilot.press`, whose idle waits sleep 40-60 ms after the work is done), through the
    swipe's worker (the swipe, then the chat re-reading what it shows) and the last box showing
    the other variant, to the first frame the app writes after that (`App._display`: the
    compositor has drawn it). The chat is opened as B5 opens it (`_open_interactive`: its
    warm-up done); after each swipe its workers finish and the app goes idle before the next
    key, so each swipe is timed alone. `first_ms` is the first swipe (the service reads the
    playthrough's tree then)."""
    import asyncio

    from benchmarks.transcript_bench import _key, _open_interactive
    from tavern_tui.config import Settings
    from tavern_tui.providers.demo import DemoProvider
    from tavern_tui.service import Tavern
    from tavern_tui.tui.app import TavernApp

    tavern = Tavern(Settings(db_url=f"sqlite:///{workdir / 'repaint.db'}"), provider=DemoProvider(delay=0))
    card = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "cards" / "seraphina_chara_ccv3.png"
    tavern.imports.import_paths([card])
    pid = tavern.chat_files.import_chat_bytes(_long_chat(messages), "long.jsonl").id or 0

    async def measure() -> list[float]:
        app = TavernApp(tavern)
        times = []
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            screen, _tti, _settled = await _open_interactive(app, pilot, pid)
            frames = _Frames(app)
            for i in range(runs):
                before = screen.transcript.boxes[-1].view
                painted = frames.when(lambda before=before: screen.transcript.boxes[-1].view != before)
                start = time.perf_counter()
                _key(pilot, "ctrl+right" if i % 4 < 2 else "ctrl+left")  # starts at 1/3
                times.append((await asyncio.wait_for(painted, 30) - start) * 1000)
                await app.workers.wait_for_complete()
                await pilot.pause()
        return times

    times = asyncio.run(measure())
    tavern.close()
    median = statistics.median(times)
    return {"messages": messages, "median_ms": round(median), "max_ms": round(max(times)),
            "first_ms": round(times[0]), "ratio_median": round(median / 100, 2),
            "ratio_max": round(max(times) / 100, 2)}


def trace_verify(workdir: Path, requests: int = 1000) -> Result:
    """Issue 6: `trace verify --all` over 1,000 recorded requests (50 playthroughs of 20 steps,
    so each request references its whole history). Target under 1 s."""
    import asyncio

    from tavern_tui.config import Settings
    from tavern_tui.providers.demo import DemoProvider
    from tavern_tui.service import Tavern

    demo = DemoProvider(delay=0)
    tavern = Tavern(Settings(db_url=f"sqlite:///{workdir / 'trace.db'}"), provider=demo)
    card = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "cards" / "seraphina_chara_ccv3.png"
    character = tavern.imports.import_paths([card])[0].id or 0

    async def fill() -> None:
        per = 20
        for _ in range(requests // per):
            pid = tavern.playthroughs.new_playthrough(character).id
            for i in range(per):
                demo.enqueue("*She listens.* " * 8)
                async for _ in tavern.steps.send(pid, f"message {i}: I look around. " * 3):
                    pass

    t0 = time.perf_counter()
    asyncio.run(fill())
    fill_s = time.perf_counter() - t0
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        results = tavern.traces.verify_all()
        times.append(time.perf_counter() - t0)
    tavern.close()
    assert len(results) == requests and all(r.ok for _, r in results)
    messages = sum(len(r.checks) for _, r in results)
    best = min(times)
    return {"requests": requests, "messages_checked": messages, "fill_s": round(fill_s, 1),
            "verify_all_s": round(best, 3), "ratio": round(best / 1.0, 2)}


BENCHMARKS: dict[str, Callable[[Path], Result]] = {
    "event_append": event_append,
    "session_open_query": session_open_query,
    "fork_create": fork_create,
    "swipe_switch": swipe_switch,
    "swipe_repaint": swipe_repaint,
    "trace_verify": trace_verify,
    "chat_open": chat_open,
    "wi_activation": wi_activation,
    "checkpoint_cost": checkpoint_cost,
    "fuzz": fuzz,
    "prompt_build": prompt_build,
    "cold_start": cold_start,
    "cli_start": cli_start,
    "transcript_window": transcript_window,
    "stream_render": stream_render,
    "turn_overhead": turn_overhead,
}


def main(argv: list[str] | None = None) -> int:
    """Run the chosen benchmarks (all by default) and print one line of figures each."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"one of {', '.join(BENCHMARKS)} (default: all)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    names = args.names or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    results: dict[str, Result] = {}
    print(f"# {platform.python_implementation()} {platform.python_version()} on {platform.machine()}")
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            results[name] = BENCHMARKS[name](Path(tmp))
        print(f"{name:<20} " + "  ".join(f"{k}={v}" for k, v in results[name].items()), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
