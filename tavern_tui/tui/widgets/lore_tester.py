"""Provides `LoreTester`: type text and see, live, which world-info entries fire and why."""

from __future__ import annotations

import threading
from collections.abc import Callable

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.timer import Timer
from textual.widgets import Input, Static
from textual.worker import get_current_worker

from tavern_tui.assembly.worldinfo import insertion_order
from tavern_tui.errors import TavernError
from tavern_tui.lore.result import ActivationResult
from tavern_tui.tui.lore_labels import totals_line
from tavern_tui.tui.messages import WorldInfoTested
from tavern_tui.tui.widgets.decision_list import DecisionList

Runner = Callable[[str], ActivationResult]
"""Runs one activation for the typed text (a dry run; nothing is stored)."""

DEBOUNCE = 0.15
"""Seconds of quiet typing before the activation runs."""

TESTER = "lore-tester"
"""Worker group of the activation runs (a new run cancels the one before)."""

# Activations share the service's key-index cache, which is not safe to mutate from two threads;
# a cancelled run cannot be interrupted, so runs take turns instead.
_ACTIVATION_LOCK = threading.Lock()


class LoreTester(Vertical):
    """The tester: an input, the totals line and every decision, fired ones first in prompt order.

    The screen sets what to run (`set_runner`); typing reruns it after `DEBOUNCE`. Each run goes
    to a thread worker that only posts `WorldInfoTested`; results of superseded runs are dropped.

    | child id / class | part |
    | --- | --- |
    | `#tester-input` | the one-line, borderless input on `$boost` |
    | `#tester-totals` | the bold totals line; `$wi-over-budget` with `-over-budget` (the budget stopped an entry) |
    | `#tester-scroll` | the scrolling decision lines |

    Its frame is the app's `.pane` rule (the screen gives it the class).
    """

    DEFAULT_CSS = """
    LoreTester {
        height: 1fr;
        min-height: 10;
    }

    LoreTester #tester-input {
        border: none;
        height: 1;
        padding: 0 1;
        background: $boost;
    }

    LoreTester #tester-totals {
        height: 1;
        padding: 0 1;
        color: $text;
        text-style: bold;
    }

    LoreTester #tester-totals.-over-budget { color: $wi-over-budget; }

    LoreTester #tester-scroll {
        height: 1fr;
        padding: 0 1;
        scrollbar-size-vertical: 1;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._runner: Runner | None = None
        self._idle_text = ""
        self._pending: Timer | None = None
        self.run_count = 0
        """Runs started so far; the number of the one whose result is wanted."""
        self.result: ActivationResult | None = None
        """The last result shown."""
        self.result_text: str | None = None
        """The text the shown result was tested with."""

    def compose(self) -> ComposeResult:
        yield Input(placeholder="Type a message to see which entries fire…", id="tester-input")
        yield Static("", id="tester-totals", markup=False)
        with VerticalScroll(id="tester-scroll"):
            yield DecisionList(id="decisions")

    @property
    def totals(self) -> str:
        """The totals line as shown ("3 fired · 792 of 1024 budget tokens")."""
        return str(self.query_one("#tester-totals", Static).content)

    @property
    def decisions(self) -> DecisionList:
        """The decision lines."""
        return self.query_one("#decisions", DecisionList)

    def set_runner(self, runner: Runner | None, idle_text: str = "") -> None:
        """Test with `runner` from now on (None: nothing to test; `idle_text` says why) and rerun."""
        self._runner = runner
        self._idle_text = idle_text
        self.rerun()

    def rerun(self) -> None:
        """Run the activation now on the current text (after a book or binding changed)."""
        if self._pending is not None:
            self._pending.stop()
            self._pending = None
        self.run_count += 1
        if self._runner is None:
            self.result = self.result_text = None
            self._show_totals(self._idle_text, over=False)
            self.decisions.show([])
            return
        self._activate(self.run_count, self.query_one("#tester-input", Input).value, self._runner)

    @on(Input.Changed, "#tester-input")
    def _typed(self, event: Input.Changed) -> None:
        event.stop()
        if self._pending is not None:
            self._pending.stop()
        self._pending = self.set_timer(DEBOUNCE, self.rerun)

    @work(thread=True, exclusive=True, group=TESTER, exit_on_error=False, description="test world info")
    def _activate(self, run: int, text: str, runner: Runner) -> None:
        worker = get_current_worker()
        with _ACTIVATION_LOCK:
            if worker.is_cancelled:
                return
            try:
                self.post_message(WorldInfoTested(run, text, result=runner(text)))
            except TavernError as exc:
                self.post_message(WorldInfoTested(run, text, error=str(exc)))
            except Exception as exc:  # a broken book must not take the pane down; say what happened
                self.post_message(WorldInfoTested(run, text, error=f"{type(exc).__name__}: {exc}"))

    def on_world_info_tested(self, message: WorldInfoTested) -> None:
        """Show the newest run's decisions; results of older runs are ignored."""
        if message.run != self.run_count:
            return
        self.result_text = message.text
        if message.result is None:
            self.result = None
            self._show_totals(f"The test failed: {message.error}", over=True)
            self.decisions.show([])
            return
        self.result = message.result
        self._show_totals(totals_line(message.result), over=message.result.overflowed)
        self.decisions.show(insertion_order(message.result), "No entries to test.")

    def _show_totals(self, line: str, *, over: bool) -> None:
        totals = self.query_one("#tester-totals", Static)
        totals.update(line)
        totals.set_class(over, "-over-budget")
