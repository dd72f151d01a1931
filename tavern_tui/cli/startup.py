"""Provides the start-up collector policy of the `tavern` process: the cyclic garbage collector
is off while the modules load and the service opens, then the objects alive at that point are
frozen out of it and it runs again.

Why: importing SQLAlchemy, Textual and the app creates a few hundred thousand long-lived objects;
with the collector on, CPython runs ~320 collections during that (two of them over the whole heap),
~130 ms of a ~750 ms start to the home screen (measured with `gc.callbacks` on the benchmark
database), and none of it frees anything. Freezing what exists once the service is open keeps
later collections (a long chat, the TUI) from re-scanning the modules' objects. CPython documents
the pattern for `gc.freeze` ("disable gc early in the parent process, freeze before fork");
here there is no fork, only the start.
"""

from __future__ import annotations

import gc

_held = False


def hold_collector() -> None:
    """Turn the collector off until `release_collector` (the process entry point calls this
    first). A no-op when it is already off (someone else decided)."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release_collector() -> None:
    """Freeze the objects alive now out of the collector and turn it back on, if
    `hold_collector` turned it off; otherwise nothing. Called once the service is open (every
    command that reads the database), and when the entry point returns."""
    global _held
    if _held:
        _held = False
        gc.freeze()
        gc.enable()
