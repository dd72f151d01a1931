"""A regex search's limits measure the work it does, not how busy the machine is
(`lore.regex_budget.bounded`): a search that ran out of wall-clock time while its thread was mostly
off the CPU runs again; one that used its time working does not; the step is charged CPU time."""

from __future__ import annotations

import threading
import time

import pytest

from tavern_tui.lore.regex_budget import DESCHEDULED_RETRIES, bounded, step_budget


def _burn(seconds: float) -> None:
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def test_a_search_that_timed_out_while_waiting_for_a_core_runs_again() -> None:
    calls: list[float] = []

    def search(timeout: float) -> str:
        calls.append(timeout)
        if len(calls) == 1:
            raise TimeoutError("regex timed out")  # at once: no CPU used, the thread was not running
        return "match"

    assert bounded(0.05, search) == "match"
    assert calls == [0.05, 0.05]


def test_a_search_that_timed_out_while_working_is_not_run_again() -> None:
    calls: list[float] = []

    def search(timeout: float) -> str:
        calls.append(timeout)
        _burn(timeout)  # backtracking: the whole limit spent on the CPU
        raise TimeoutError("regex timed out")

    with pytest.raises(TimeoutError):
        bounded(0.02, search)
    assert len(calls) == 1


def test_a_search_descheduled_every_time_gives_up_after_the_retries() -> None:
    calls: list[float] = []

    def search(timeout: float) -> str:
        calls.append(timeout)
        raise TimeoutError("regex timed out")

    with pytest.raises(TimeoutError):
        bounded(0.05, search)
    assert len(calls) == 1 + DESCHEDULED_RETRIES


def test_the_step_is_charged_cpu_time_not_time_spent_waiting() -> None:
    with step_budget(0.05) as budget:
        bounded(0.05, lambda timeout: threading.Event().wait(0.1))  # 100 ms off the CPU
        assert budget.spent < 0.02 and not budget.exhausted
        bounded(0.05, lambda timeout: _burn(0.06))  # 60 ms of work
        assert budget.exhausted
