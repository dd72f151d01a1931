"""The write cost of stream checkpoints (issue 23 item 1): a streaming step writes one coalesced
`stream/checkpoint` at most every `CHECKPOINT_EVERY` (0.1 s) seconds, never one per token.

Measured: one checkpoint append through `EventLog` (SQLite, WAL + synchronous=NORMAL, the text
of 0.25 s of a fast stream: ~60 tokens, ~300 characters) into a session that already holds a
long chat, and what that costs per second of streaming. Target: ≤ 1 % of the stream's time
(10 ms of writes per streamed second), so checkpointing never slows what the person sees.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.engine.step import CHECKPOINT_EVERY
from tavern_tui.store.store import Store


def checkpoint_cost(workdir: Path, checkpoints: int = 2000, history: int = 5000) -> dict[str, object]:
    """p50/p99 of one checkpoint append and the share of a streamed second spent writing them."""
    store = Store(f"sqlite:///{workdir / 'checkpoint.db'}")
    sid = store.events.create_session()
    store.events.append(sid, [NewEvent(EventKind.USER_MESSAGE if i % 2 == 0 else EventKind.ASSISTANT_MESSAGE,
                                       "user" if i % 2 == 0 else "assistant", {"content": "A line of chat. " * 20})
                              for i in range(history)])
    store.events.append(sid, [NewEvent(EventKind.REQUEST_HEADER, None, {"provider": "bench"})])
    piece = "The lantern light wavers across the old maps. " * 6 + "And "  # ~0.25 s of a fast stream
    times = []
    for _ in range(checkpoints):
        t0 = time.perf_counter()
        store.events.append(sid, [NewEvent(EventKind.STREAM_CHECKPOINT, None, {"content": piece, "reasoning": ""})])
        times.append((time.perf_counter() - t0) * 1000)
    store.close()
    ordered = sorted(times)
    p50, p99 = statistics.median(times), ordered[int(0.99 * (len(ordered) - 1))]
    per_second = (1 / CHECKPOINT_EVERY) * statistics.fmean(times)  # ms of writes per streamed second
    return {"checkpoints": checkpoints, "history_events": history, "chars_each": len(piece),
            "interval_s": CHECKPOINT_EVERY, "p50_ms": round(p50, 3), "p99_ms": round(p99, 3),
            "write_ms_per_streamed_s": round(per_second, 2), "share_of_stream_pct": round(per_second / 10, 3),
            "ratio": round(per_second / 10.0, 3)}
