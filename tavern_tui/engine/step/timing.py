"""Provides the stages a step times (`STAGES`), their one-line text, and the stopwatch.

Rules: DESIGN.md "One step" (each stage timed in the trace, done once per step).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

STAGES = ("claim", "assemble", "pre_step", "request", "prepare", "refresh", "admit", "record", "first_byte", "stream")
"""The stages a step's `timing.stages` names, in order (milliseconds each): the lease, recovery and
inbox claim; assembling the request; the pre-step hooks on the proposed input; the request
hooks on the call config; preparing the call (the provider validates the config and binds
its adapter); re-reading the runtime context; admitting the input (and system/context); writing the request's
records, header and trace record; waiting for the first token after the request went out; streaming
from the first token to the last. Recorded with every settled reply and attempt so `tavern trace show`
and the trace pane can say where a slow step spent its time (seed 000 "One step")."""


def stages_text(stages: Mapping[str, Any]) -> str:
    """A step's `timing.stages` as one line, "claim 2 ms · assemble 15 ms · …", in `STAGES` order
    (names not in it after them); "" for none."""
    names = [n for n in STAGES if n in stages] + sorted(n for n in stages if n not in STAGES)
    return " · ".join(f"{name.replace('_', ' ')} {float(stages[name]):.0f} ms" for name in names
                      if isinstance(stages[name], (int, float)))


class Stopwatch:
    """Milliseconds between successive `lap(name)` calls, on a monotonic clock."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        """Record the time since the previous lap (or the start) as `name`."""
        now = time.perf_counter()
        self.laps[name] = round((now - self._last) * 1000, 1)
        self._last = now
