"""Once the service is open, the opening thread imports what the first chat needs, so the first
Enter on a character does not pay the chat screen's import (~0.25 s); `finish` waits for it,
a module that cannot be imported is logged and left to its screen, and a failed opening imports
nothing."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest

from tavern_tui.config import Settings
from tavern_tui.tui.opening import FIRST_CHAT, OpeningTavern


def test_the_chat_screen_is_imported_by_the_opening_thread_after_the_service_opens() -> None:
    script = textwrap.dedent("""
        import sys, threading
        from tavern_tui.config import Settings
        from tavern_tui.tui.opening import FIRST_CHAT, OpeningTavern
        assert FIRST_CHAT == ("tavern_tui.tui.screens.chat", "tavern_tui.persona.safety")
        gate = threading.Event()
        service = object()

        def open_service():
            gate.wait()
            return service

        opening = OpeningTavern(Settings(db_url="sqlite://"), open_service, warm=FIRST_CHAT)
        opening.start()
        assert not set(FIRST_CHAT) & set(sys.modules)  # not before the service is open
        gate.set()
        assert opening.wait() is service
        opening.finish()
        assert set(FIRST_CHAT) <= set(sys.modules)
        print("ok", sys.modules["tavern_tui.tui.screens.chat"].ChatScreen.__name__)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "ChatScreen"]


def test_a_module_that_cannot_be_imported_is_logged_and_the_opening_still_serves(
        caplog: pytest.LogCaptureFixture) -> None:
    service = object()
    opening = OpeningTavern(Settings(db_url="sqlite://"), lambda: service, warm=("tavern_tui.no_such_module",))
    with caplog.at_level(logging.ERROR, logger="tavern_tui.tui.opening"):
        opening.start()
        opening.finish()
    assert opening.wait() is service
    assert any("tavern_tui.no_such_module" in r.getMessage() for r in caplog.records)


def test_a_failed_opening_imports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    imported: list[str] = []
    monkeypatch.setattr("tavern_tui.tui.opening.importlib.import_module", imported.append)

    def broken() -> object:
        raise RuntimeError("the database is not there")

    opening = OpeningTavern(Settings(db_url="sqlite://"), broken, warm=FIRST_CHAT)  # type: ignore[arg-type]
    opening.start()
    opening.finish()
    with pytest.raises(RuntimeError, match="not there"):
        opening.wait()
    assert imported == []
