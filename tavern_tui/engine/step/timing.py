"""Provides the stages a step times (`STAGES`), their one-line text, the stopwatch, and the
timing of a request from the moment it goes out (`StreamTiming`).

Rules: DESIGN.md "One step" (each stage timed in the trace, done once per step).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

STAGES = ("ahead", "gather", "claim", "assemble", "pre_step", "request", "prepare", "refresh", "admit", "record",
          "first_byte", "stream")
"""The stages a step's `timing.stages` names, in order (milliseconds each): the whole build when it
was made before the step began, while the person looked at what they typed (`Prebuilt.ahead_ms`;
its `gather` is then only the check that nothing changed since, and its `assemble` 0); what was read for the
build made ahead, in a worker before the step opened (the playthrough, MVU's initialisation, the
batch, the assembler's inputs, the history; only when the step sends that build: `Prebuilt`);
the lease, recovery and inbox claim; assembling the request; the pre-step hooks on the proposed input; the request
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


class StreamTiming:
    """A request's `timing` from the moment it goes out (built then): `{"submitted", "stages",
    "first_byte", "last_byte"}`, the times ISO 8601 and `stages` the stage milliseconds
    (`STAGES`): the ones given, then `first_byte` (from the request going out to the first text or
    reasoning, or to the tool calls of a reply that has neither) and `stream` (from there to the
    last byte). A step's stream stage (`stream.Reply`)
    and a request outside a step (`aside.stream_text`) keep their timing with it, so both read the
    same in the trace.

    Args:
        stages: the stages timed before the request went out (copied).
        now: wall-clock UTC time (`StepOptions.now`).
    """

    def __init__(self, stages: Mapping[str, float], now: Callable[[], datetime]) -> None:
        self.now = now
        self.timing: dict[str, Any] = {"submitted": now().isoformat()}
        self.stages: dict[str, float] = dict(stages)
        self.timing["stages"] = self.stages
        self.sent_at = time.perf_counter()  # first_byte and stream count from here

    def first_byte(self) -> None:
        """The first text, reasoning or tool calls arrived now (later calls change nothing)."""
        if "first_byte" in self.timing:
            return
        self.timing["first_byte"] = self.now().isoformat()
        self.stages["first_byte"] = round((time.perf_counter() - self.sent_at) * 1000, 1)

    def finish(self) -> None:
        """The stream ended now: the `stream` stage (when a first byte came) and `last_byte`."""
        if "first_byte" in self.stages:
            self.stages["stream"] = round((time.perf_counter() - self.sent_at) * 1000 - self.stages["first_byte"], 1)
        self.timing["last_byte"] = self.now().isoformat()
