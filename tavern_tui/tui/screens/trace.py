"""Provides `TraceScreen`: the requests a playthrough sent, each as it was sent, verified from the log."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from textual import getters, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Collapsible, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import WorkerCancelled, WorkerFailed

from tavern_tui.assembly.attribution import describe
from tavern_tui.engine.trace import Verification
from tavern_tui.errors import TavernError
from tavern_tui.tui.labels import clip, event_label, plural, relative_time
from tavern_tui.tui.screens.base import TavernScreen
from tavern_tui.tui.screens.trace_facts import facts_content
from tavern_tui.tui.screens.trace_requests import duration, moment_of, newest_first, request_tokens
from tavern_tui.tui.widgets.fit_footer import FitFooter, ProviderSource, ScreenKeys
from tavern_tui.tui.widgets.screen_title import ScreenTitle
from tavern_tui.views import PlaythroughView, TraceView

if TYPE_CHECKING:
    from tavern_tui.service import Tavern

HISTORY_LABEL = "HISTORY — what was sent"
REQUESTS_LABEL = "Requests · newest first"
"""The detail panel's title: what it shows was sent and is read back from the log (the
strategy pane's "PREVIEW — not sent" is its opposite)."""

OPEN_BODIES = 2
"""How many of the last messages start expanded; the others start collapsed."""

OWN_SECTIONS = 60
"""The newest messages of a request that get a section each; earlier ones share one section, so a
long chat's request mounts a bounded number of widgets."""

DETAIL_DELAY = 0.05
"""Seconds the cursor rests on a request before its detail is built (holding ↓ builds one)."""

MODEL_WIDTH = 18
"""Characters of a model's name that fit the list beside the time and the mark."""

MARKS = {True: ("✓ verified", "bold $success"), False: ("✗ mismatch", "bold $error"), None: ("· unchecked", "dim")}
"""A request's verification mark (True: every body rebuilt to the bytes sent; None: not checked)."""

OUTCOME_STYLES = {"ok": "", "failed": "$error", "stopped": "$warning", "open": "italic"}
"""How a request's outcome is styled in the list."""


def request_prompt(view: TraceView, verified: bool | None, now: datetime) -> Content:
    """A request's list lines: when, the model and its verification mark; then (in a group chat)
    the member it was written for ("for Shodan"), tokens, latency, strategy (and the generation
    when not a plain send) and outcome."""
    moment = moment_of(view.submitted_at)
    when = relative_time(moment, now) if moment is not None else "?"
    mark, mark_style = MARKS[verified]
    strategy = view.strategy.removeprefix("preset-")  # the list is narrow: "slots-first" says it
    kind = strategy if view.generation in ("", "normal") else f"{strategy} · {view.generation}"
    facts = f"{request_tokens(view)} · {duration(view.latency_ms)} · {kind} · "
    second = (("\n  ", "dim"), (f"for {view.speaker}", "bold"), (f" · {facts}", "dim")) if view.speaker else (
        (f"\n  {facts}", "dim"),)
    return Content.assemble(
        (when, "bold"), "  ", clip(view.model or view.provider or "?", MODEL_WIDTH), "  ", (mark, mark_style),
        *second,
        (view.outcome, OUTCOME_STYLES.get(view.outcome, "") or "dim"))


def verification_line(verification: Verification | None) -> Content:
    """"✓ verified: 3 messages rebuilt from the log, hashes as sent" or what did not match."""
    if verification is None:
        return Content.styled("· unchecked (v verifies)", "dim")
    if verification.ok:
        return Content.assemble(("✓ verified", "bold $success"),
                                f": {plural(len(verification.checks), 'message')} rebuilt from the log, "
                                "each hashing as sent")
    return Content.assemble(("✗ mismatch", "bold $error"), f": {mismatch_summary(verification)}")


def mismatch_summary(verification: Verification) -> str:
    """"message 2 changed, message 4 missing" (1-based positions)."""
    return ", ".join(f"message {c.position + 1} {c.status}" for c in verification.checks if c.status != "ok")


def _role_style(role: str) -> str:
    return {"user": "$speaker-user", "assistant": "$speaker-character"}.get(role, "$speaker-system")


def message_title(position: int, sent: Mapping[str, Any], body: Mapping[str, Any] | None, status: str) -> Content:
    """A message section's title: "3. user · input · 42 chars", or its check's status (names
    and sources are literal text, never markup)."""
    role = str(sent.get("role", "?"))
    parts = [f"{position + 1}. {role}", str(sent.get("source", "?"))]
    if body is not None and body.get("name"):
        parts.append(str(body["name"]))
    head = (" · ".join(parts), f"bold {_role_style(role)}")
    if status == "ok" and body is not None:
        return Content.assemble(head, "  ", (f"{len(str(body.get('content', '')))} chars", "dim"))
    return Content.assemble(head, "  ", (f"({'changed since sent' if status == 'changed' else 'missing'})",
                                         "bold $error"))


def message_body(body: Mapping[str, Any] | None, status: str,
                 parts: Sequence[Mapping[str, Any]] | None = None) -> Content:
    """A message's body as sent, or why it cannot be shown; then its parts (where each stretch
    came from, offsets and tokens: `assembly.attribution`) when it is built from more than one."""
    if status == "changed":
        return Content.styled("(changed since sent) the stored body no longer hashes as it was sent; "
                              "it is not shown in its place", "$error")
    if status != "ok" or body is None:
        return Content.styled("(missing) the referenced body is gone from the log", "$error")
    content = str(body.get("content", ""))
    shown = Content(content) if content else Content.styled("(empty)", "dim italic")
    if not parts or len(parts) < 2:
        return shown
    lines = [Content.styled(f"  · {p['start']}-{p['end']} ~{p['tokens']} tok  {describe(dict(p))}", "dim")
             for p in parts]
    return Content("\n").join([shown, Content.styled("parts", "bold"), *lines])


class RequestList(OptionList):
    """The requests, newest first; Enter jumps the chat to the reply the highlighted one produced."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select", "Jump to reply", id="trace.jump")]


class TraceScreen(TavernScreen[bool]):
    """The requests one playthrough sent (F7 in the chat): history, read back from the log.

    Left, the requests newest first (when, model, tokens, latency, strategy, outcome and a mark:
    ✓ verified, ✗ mismatch, · unchecked). Right, labelled "HISTORY — what was sent", the
    highlighted request: each message as sent (role · source, its body rebuilt from the log by
    `tavern.traces.verify_trace`; a body that no longer hashes as sent is marked, never shown in its
    place), the last two expanded, then the world-info decisions, the config requested and
    effective, attempts, usage, timing and resources. Showing a request verifies it.

    Keys: ↑/↓ move, `v` verifies the highlighted request again, Enter jumps the chat to the reply
    it produced, Tab moves to the messages, Esc goes back.

    Dismisses with True when the chat moved to another message (it reloads then), else False.
    Every service call runs in a thread worker (`TavernScreen.call`); `loaded` turns True when
    the list is shown.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="trace.back"),
        Binding("v", "verify", "Verify", id="trace.verify"),
        Binding("tab", "app.focus_next", "Next pane", id="trace.next_pane"),
        Binding("shift+tab", "app.focus_previous", "Previous pane", show=False),
    ]

    COMMANDS: ClassVar[set[ProviderSource]] = {ScreenKeys}  # the palette lists this screen's keys

    requests = getters.query_one("#requests", RequestList)
    detail = getters.query_one("#trace-detail", VerticalScroll)

    def __init__(self, tavern: Tavern, playthrough_id: int, *, select: str | None = None) -> None:
        super().__init__(tavern, playthrough_id)
        self.playthrough_id: int = playthrough_id
        self.select = select
        """The trace id to highlight first (a message's own request, from the chat's message
        cursor); None: the newest."""
        self.loaded = False
        """The list of requests has been shown (tests wait on it)."""
        self.views: dict[str, TraceView] = {}
        """The requests by trace id."""
        self.verified: dict[str, Verification] = {}
        """Verifications done while the screen is open (the list's marks)."""
        self._traces: dict[str, dict[str, Any]] = {}
        self.shown_id: str | None = None
        """The request the detail panel shows."""
        self._wanted: str | None = None
        self._timer: Timer | None = None
        self._lock = asyncio.Lock()

    def compose(self) -> ComposeResult:
        yield ScreenTitle("", id="trace-title", markup=False)
        with Horizontal(id="trace-panes"):
            requests = RequestList(id="requests", classes="pane", markup=False)
            requests.border_title = REQUESTS_LABEL
            yield requests
            with VerticalScroll(id="trace-detail") as detail:
                detail.border_title = HISTORY_LABEL
                yield Static("", id="trace-empty", markup=False)
        # At 80 columns the keys did not fit: the least used go first (the palette lists them).
        yield FitFooter(drop=("quit", "app.focus_next"))

    def on_mount(self) -> None:
        def read() -> tuple[PlaythroughView, list[TraceView], str]:
            view = self.tavern.playthroughs.playthrough(self.playthrough_id)
            group = self.tavern.groups.group_of(self.playthrough_id)
            return view, self.tavern.traces.traces(self.playthrough_id), group.name if group else view.character_name

        self.call(read, title="Cannot show the requests", then=lambda found: self._show_list(*found),
                  failed=lambda _: self.dismiss(False))

    def _show_list(self, view: PlaythroughView, traces: list[TraceView], name: str) -> None:
        """Show the requests; `name` is what the playthrough plays (a group's name, else its character's)."""
        self.views = {t.id: t for t in traces}
        self.query_one("#trace-title", Static).update(
            f"Requests · {name} #{view.id} · {plural(len(traces), 'request')} sent · "
            "history read back from the log")
        ordered = newest_first(traces)
        self.requests.set_options(self._option(t) for t in ordered)
        self.requests.focus()
        if traces:
            index = next((i for i, t in enumerate(ordered) if t.id == self.select), 0)
            self.requests.highlighted = index
        else:
            self.query_one("#trace-empty", Static).update(
                "No requests yet: what each step sends is recorded here once the chat sends one.")
        self.loaded = True

    @property
    def _now(self) -> Callable[[], datetime]:
        return getattr(self.app, "now", lambda: datetime.now(UTC))

    def _option(self, view: TraceView) -> Option:
        verification = self.verified.get(view.id)
        return Option(request_prompt(view, None if verification is None else verification.ok, self._now()),
                      id=view.id)

    def mark(self, trace_id: str) -> str:
        """The highlighted request's mark as listed: "✓ verified", "✗ mismatch", "· unchecked"."""
        verification = self.verified.get(trace_id)
        return MARKS[None if verification is None else verification.ok][0]

    @property
    def current(self) -> TraceView | None:
        """The request under the list's cursor."""
        option = self.requests.highlighted_option
        return None if option is None or option.id is None else self.views.get(option.id)

    # -- verification ---------------------------------------------------------------------

    def _verified(self, trace_id: str, verification: Verification) -> None:
        """Keep a verification and refresh the request's mark."""
        self.verified[trace_id] = verification
        view = self.views.get(trace_id)
        if view is not None:
            self.requests.replace_option_prompt(trace_id, self._option(view).prompt)

    def action_verify(self) -> None:
        """Verify the highlighted request now from the log (in a worker); say the verdict."""
        view = self.current
        if view is None:
            return
        self.call(self.tavern.traces.verify_trace, view.id, title="Cannot verify",
                  then=lambda verification: self._say_verdict(view, verification))

    async def _say_verdict(self, view: TraceView, verification: Verification) -> None:
        self._verified(view.id, verification)
        if verification.ok:
            self.notify(f"verified: {plural(len(verification.checks), 'message')}", title=f"Request {view.id}")
        else:
            self.notify(f"mismatch: {mismatch_summary(verification)}", title=f"Request {view.id}",
                        severity="warning")
        self.shown_id = None  # the bodies may have changed since they were shown
        self._wanted = view.id
        await self._show_wanted()

    # -- detail ---------------------------------------------------------------------------

    @on(OptionList.OptionHighlighted, "#requests")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._wanted = event.option.id
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(DETAIL_DELAY, self._show_wanted)

    async def _show_wanted(self) -> None:
        """Show the wanted request (verifying it the first time)."""
        async with self._lock:
            trace_id = self._wanted
            if trace_id is None or trace_id == self.shown_id or trace_id not in self.views:
                return
            known, checked = self._traces.get(trace_id), self.verified.get(trace_id)

            def read() -> tuple[dict[str, Any], Verification | TavernError]:
                trace = known or self.tavern.traces.trace(trace_id)
                try:
                    return trace, checked or self.tavern.traces.verify_trace(trace_id)
                except TavernError as exc:  # the request is still shown, unverified
                    return trace, exc

            try:
                trace, outcome = await self.call(read, title="Cannot show the request", group="trace-detail").wait()
            except (WorkerFailed, WorkerCancelled):
                return  # said by the call's handler
            self._traces[trace_id] = trace
            verification: Verification | None = None
            if isinstance(outcome, TavernError):
                self.notify(str(outcome), title="Cannot verify", severity="error")
            else:
                verification = outcome
                self._verified(trace_id, verification)
            widgets = self._detail_widgets(self.views[trace_id], trace, verification)
            with self.app.batch_update():
                await self.detail.remove_children()
                await self.detail.mount_all(widgets)
            speaker = self.views[trace_id].speaker  # a group chat: the member it was written for
            self.detail.border_subtitle = f"request at {event_label(trace_id)}{f' · for {speaker}' if speaker else ''}"
            self.detail.scroll_home(animate=False)
            self.shown_id = trace_id

    def _detail_widgets(self, view: TraceView, trace: Mapping[str, Any],
                        verification: Verification | None) -> list[Widget]:
        moment = moment_of(view.submitted_at)
        when = relative_time(moment, self._now()) if moment is not None else "?"
        reply = f" → reply {view.reply}" if view.reply else ""
        head = Content.assemble(
            (f"{view.provider} · {view.model}", "bold"), f" · {view.strategy} · {view.generation} · sent {when} · ",
            (view.outcome, OUTCOME_STYLES.get(view.outcome, "")), reply, "\n", verification_line(verification))
        widgets: list[Widget] = [Static(head, classes="trace-head", markup=False)]

        sent: Sequence[Mapping[str, Any]] = (trace.get("record") or {}).get("messages") or []
        bodies: Sequence[Mapping[str, Any] | None] = verification.messages if verification else [None] * len(sent)
        statuses = [c.status for c in verification.checks] if verification else ["unchecked"] * len(sent)
        widgets.append(Static(Content.assemble(("messages  ", "bold"), plural(len(sent), "message"),
                                               " as sent, oldest first"), classes="trace-label", markup=False))
        attributed: Sequence[Any] = (trace.get("attribution") or {}).get("messages") or []
        earlier = max(0, len(sent) - OWN_SECTIONS)
        if earlier:
            lines = Content("\n\n").join(
                Content.assemble(message_title(i, sent[i], bodies[i], statuses[i]), "\n",
                                 message_body(bodies[i], statuses[i]))
                for i in range(earlier))
            widgets.append(Collapsible(Static(lines, classes="trace-body", markup=False),
                                       title=f"1.–{earlier}. earlier messages", collapsed=True,
                                       classes="trace-message"))
        for i in range(earlier, len(sent)):
            status = statuses[i]
            body = bodies[i]
            if status == "unchecked":
                body_content = Content.styled("(not verified: the body is shown once verified)", "dim")
                title = Content(f"{i + 1}. {sent[i].get('role', '?')} · {sent[i].get('source', '?')}")
            else:
                body_content = message_body(body, status, attributed[i] if i < len(attributed) else None)
                title = message_title(i, sent[i], body, status)
            widgets.append(Collapsible(Static(body_content, classes="trace-body", markup=False), title=title,
                                       collapsed=i < len(sent) - OPEN_BODIES, classes="trace-message"))
        widgets.append(Static(facts_content(view, trace), classes="trace-facts", markup=False))
        return widgets

    @property
    def detail_text(self) -> str:
        """The detail panel's text as shown, titles and bodies (collapsed ones too), plain."""
        texts: list[str] = []
        for widget in self.detail.query(Static):
            content = widget.content
            texts.append(content.plain if isinstance(content, Content) else str(content))
        return "\n".join(texts)

    # -- jump -----------------------------------------------------------------------------

    @on(OptionList.OptionSelected, "#requests")
    def _jump(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        view = self.views.get(event.option.id or "")
        if view is None:
            return
        if view.reply is None:
            self.notify("This request produced no reply to jump to.", title="Nothing to jump to",
                        severity="warning")
            return
        session, _, seq = view.reply.partition(":")
        try:
            ref = (int(session), int(seq))
        except ValueError as exc:
            self.notify(str(exc), title="Cannot jump to the reply", severity="error")
            return
        self.call(self.tavern.timeline.select_variant, self.playthrough_id, ref, title="Cannot jump to the reply",
                  then=lambda _: self.dismiss(True))

    def action_back(self) -> None:
        """Return to the chat unchanged."""
        self.dismiss(False)
