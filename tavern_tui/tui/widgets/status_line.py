"""Provides `StatusLine`: provider label, token estimate and generation state under the chat."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Static

from tavern_tui.tui.labels import compact_count

STATES = ("idle", "streaming", "error", "compacting")
"""The generation states the status line shows."""


class StatusLine(Static):
    """One line: "<provider> · <model>  ·  ~N tokens  ·  swipe n/m  ·  <state>[ — detail]".

    `swipe` is the last message's counter ("swipe 2/3"), empty when it has no alternatives.

    | class | meaning |
    | --- | --- |
    | `-streaming` | a reply is arriving |
    | `-error` | the last step failed; `detail` names the category ("authentication: …") |

    | `-dropping` | the next request leaves the oldest history out to fit (the gauge in `$warning`) |
    | `-overflow` | the next request cannot fit even with all history left out (`$error`) |

    Idle it is muted text on `$panel`; `-streaming` turns it `$primary`, `-error` puts it on `$error`.
    With a `gauge` (issue 16) the token estimate reads "18.2k / 32k tokens" (used / limit).
    """

    DEFAULT_CSS = """
    StatusLine {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text-muted;
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

    def __init__(self, provider: str, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self.set_reactive(StatusLine.provider, provider)

    def on_mount(self) -> None:
        self._render_line()

    def watch_state(self, state: str) -> None:
        for name in STATES:
            self.set_class(state == name, f"-{name}")
        self._render_line()

    def watch_provider(self) -> None:
        self._render_line()

    def watch_tokens(self) -> None:
        self._render_line()

    def watch_detail(self) -> None:
        self._render_line()

    def watch_swipe(self) -> None:
        self._render_line()

    def watch_gauge(self, gauge: dict | None) -> None:
        self.set_class(bool(gauge and gauge.get("dropped_messages")) and not (gauge or {}).get("overflow"),
                       "-dropping")
        self.set_class(bool(gauge and gauge.get("overflow")), "-overflow")
        self._render_line()

    @property
    def line(self) -> str:
        """The text currently shown."""
        parts = [self.provider]
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
        parts.append(self.swipe)
        parts.append(f"{self.state} — {self.detail}" if self.detail else self.state)
        return "  ·  ".join(p for p in parts if p)

    def _render_line(self) -> None:
        self.update(self.line)

