"""Provides `StatusLine`: provider label, token estimate and generation state under the chat.

The widget never calls the services. It owns the token gauge's debounce: the screen says the
gauge is stale (`gauge_stale`), and after `TOKEN_DELAY` s of quiet the widget posts
`StatusLine.GaugeWanted`; the screen computes the gauge in a worker and hands it back
(`show_gauge`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from textual.message import Message
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Static

from tavern_tui.tui.labels import clip, compact_count

STATES = ("idle", "streaming", "error", "compacting")
"""The generation states the status line shows."""

PASSING = frozenset({"streaming", "compacting"})
"""States whose detail is progress that the next moment replaces (never kept as a notice)."""

TOKEN_DELAY = 0.3
"""Seconds of quiet after the last `StatusLine.gauge_stale` before the widget asks for a new token
estimate: computing it reads the whole history, so a burst (swipes, a reload) repaints first and
is counted once."""


SEPARATOR = "  ·  "
"""Between the status line's parts."""

PROVIDER_SEPARATOR = " · "
"""Between the provider's kind and its model in the label (`Tavern.provider_label`)."""


def _joined(parts: list[str]) -> str:
    return SEPARATOR.join(p for p in parts if p)


class StatusLine(Static):
    """One line: "<provider> · <model>  ·  [OOC  ·  ]~N tokens  ·  swipe n/m  ·  <state>[ — detail]".

    `swipe` is the last message's counter ("swipe 2/3"), empty when it has no alternatives.
    `ooc`: the playthrough's out-of-character talk is on (`PlaythroughView.ooc`; the roleplay
    policy is not sent), shown as "OOC"; the screen sets it from the view its worker read.

    | class | meaning |
    | --- | --- |
    | `-streaming` | a reply is arriving |
    | `-error` | the last step failed; `detail` names the category ("authentication: …") |

    | `-dropping` | the next request leaves the oldest history out to fit (the gauge in `$warning`) |
    | `-overflow` | the next request cannot fit even with all history left out (`$error`) |

    Idle it is muted text on `$panel`; `-streaming` turns it `$primary`, `-error` puts it on `$error`.
    With a `gauge` (issue 16) the token estimate reads "18.2k / 32k tokens" (used / limit).
    `gauge_stale` marks the estimate out of date; `GaugeWanted` asks the screen for a new one once
    `TOKEN_DELAY` s pass with no further call, and `show_gauge` shows what the screen computed.

    A line too long for the terminal ends with "…"; its detail (or the full text `say` was given
    for a shortened detail) is then kept in the app's notifications (ctrl+l) through the app's
    `record_notice`, once per text, unless the app already holds that text (a toast said it).
    """

    DEFAULT_CSS = """
    StatusLine {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text-muted;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }

    StatusLine.-streaming { color: $primary; }
    StatusLine.-error { color: $text; background: $error 40%; }
    StatusLine.-dropping { color: $warning; }
    StatusLine.-overflow { color: $text; background: $error 40%; }
    """

    provider: reactive[str] = reactive("")
    tokens: reactive[int | None] = reactive(None)
    state: reactive[str] = reactive("idle")
    detail: reactive[str] = reactive("")
    swipe: reactive[str] = reactive("")
    gauge: reactive[dict | None] = reactive(None)
    ooc: reactive[bool] = reactive(False)

    @dataclass
    class GaugeWanted(Message):
        """The token estimate shown is out of date and `TOKEN_DELAY` s passed with no further
        `gauge_stale`: the screen should compute the context gauge off the event loop (it reads
        the whole history) and hand it to `status_line.show_gauge`. A burst of stale calls posts
        one."""

        status_line: StatusLine
        """The status line that wants the gauge."""

        @property
        def control(self) -> StatusLine:
            """The status line (for `@on(..., "#id")`)."""
            return self.status_line

    def __init__(self, provider: str, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self.set_reactive(StatusLine.provider, provider)
        self._whole = ("", "")  # (a shortened detail, the full text it stands for)
        self._kept = ""  # the last text put in the notifications
        self._gauge_timer: Timer | None = None  # a `GaugeWanted` waiting for quiet (`TOKEN_DELAY`)

    def on_mount(self) -> None:
        self._render_line()

    def on_resize(self) -> None:
        self._render_line()  # what fits changed (`fitted`); a cut detail is then kept

    def say(self, state: str, detail: str, whole: str = "") -> None:
        """Show `state` with `detail`; `whole` is the full text a shortened detail stands for."""
        self._whole = (detail, whole)
        self.state, self.detail = state, detail

    def gauge_stale(self) -> None:
        """Mark the token estimate out of date: `GaugeWanted` is posted once `TOKEN_DELAY` s pass
        with no further call (each call restarts the wait). What is shown stays until then."""
        if self._gauge_timer is not None:
            self._gauge_timer.stop()
        self._gauge_timer = self.set_timer(TOKEN_DELAY, self._want_gauge)

    @property
    def gauge_pending(self) -> bool:
        """Whether a marked-stale gauge is waiting for its quiet moment (`gauge_stale`)."""
        return self._gauge_timer is not None

    def _want_gauge(self) -> None:
        self._gauge_timer = None
        self.post_message(self.GaugeWanted(self))

    def show_gauge(self, gauge: dict[str, Any] | None) -> None:
        """Show the context gauge the service computed (`context_gauge`: `tokens`, `used`, `limit`
        in tokens, …), or none (`None`, when it could not be computed)."""
        self.tokens = gauge["tokens"] if gauge else None
        self.gauge = gauge

    @property
    def whole(self) -> str:
        """The full text behind the detail shown, when `say` was given one ("" otherwise)."""
        return self._whole[1] if self._whole[0] == self.detail else ""

    def watch_state(self, state: str) -> None:
        # One style update for the whole change (a `set_class` per state restyled the line twice
        # as a send began, ~1.5 ms of the event loop before the request went out).
        changing = [f"-{name}" for name in STATES if self.has_class(f"-{name}") != (state == name)]
        if changing:
            self.toggle_class(*changing)
        self._render_line()

    def watch_provider(self) -> None:
        self._render_line()

    def watch_tokens(self) -> None:
        self._render_line()

    def watch_detail(self) -> None:
        self._render_line()

    def watch_swipe(self) -> None:
        self._render_line()

    def watch_ooc(self) -> None:
        self._render_line()

    def watch_gauge(self, gauge: dict | None) -> None:
        self.set_class(bool(gauge and gauge.get("dropped_messages")) and not (gauge or {}).get("overflow"),
                       "-dropping")
        self.set_class(bool(gauge and gauge.get("overflow")), "-overflow")
        self._render_line()

    @property
    def line(self) -> str:
        """The whole line (what a wide enough terminal shows; `fitted` is what this one shows)."""
        return _joined(self._parts())

    def fitted(self, width: int) -> str:
        """The line within `width` cells (0: unknown, the whole line): the state must show, so
        the provider label gives way first (its kind before the model: "fast-model" rather
        than "openai-compatible ·…"; then clipped, then left out), then the gauge's "oldest
        left out" says only "left out"; what still does not fit is cut at the end with "…"
        (by the CSS), the state's detail first."""
        parts = self._parts()
        joined = _joined(parts)
        if width <= 0 or cell_len(joined) <= width:
            return joined
        room = width - cell_len(_joined(parts[1:])) - len(SEPARATOR)
        model = parts[0].split(PROVIDER_SEPARATOR, 1)[-1]
        parts[0] = clip(model, room) if room >= 8 else ""
        if not parts[0]:
            parts[2] = parts[2].replace(" oldest left out)", " left out)")
        return _joined(parts)

    def _parts(self) -> list[str]:
        """[provider, "OOC" or "", gauge or tokens or "", swipe, state with detail]."""
        parts = [self.provider, "OOC" if self.ooc else ""]
        gauge = self.gauge
        if gauge and gauge.get("limit"):
            text = f"{compact_count(gauge.get('used') or 0)} / {compact_count(gauge['limit'])} tokens"
            if gauge.get("overflow"):
                text += f" — over by {gauge.get('over', 0):,}: cannot send"
            elif gauge.get("dropped_messages"):
                text += f" ({gauge['dropped_messages']:,} oldest left out)"
            parts.append(text)
        elif self.tokens is not None:
            parts.append(f"~{self.tokens:,} tokens")
        else:
            parts.append("")
        parts.append(self.swipe)
        parts.append(f"{self.state} — {self.detail}" if self.detail else self.state)
        return parts

    def _render_line(self) -> None:
        # No layout: one row whatever the text (height 1, full width, cut with "…"), and a
        # layout pass re-arranges the whole screen (a long transcript's every box) each time.
        self.update(self.fitted(self.content_size.width), layout=False)
        # After the handler that set it: a toast it raises next is then already a notice.
        self.call_after_refresh(self._keep_if_cut)

    def _keep_if_cut(self) -> None:
        """Keep a settled detail the line cannot show whole in the app's notifications."""
        text = self.whole or self.detail
        width = self.content_size.width
        if not text or self.state in PASSING or width <= 0 or text == self._kept:
            return
        if cell_len(self.fitted(width)) <= width and not self.whole:
            return
        record = getattr(self.app, "record_notice", None)
        notices = getattr(self.app, "notices", [])
        self._kept = text
        if record is not None and not any(text in n.text for n in notices[-10:]):
            record("error" if self.state == "error" else "information", "Status line", text)

