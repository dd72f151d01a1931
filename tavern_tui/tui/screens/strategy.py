"""Provides `StrategyScreen`: a playthrough's assembly strategy and preset, with a preview of the
request the next step would send."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from tavern_tui import service_presets
from tavern_tui.errors import TavernError
from tavern_tui.service import PlaythroughView, Tavern
from tavern_tui.tui.labels import clip, plural
from tavern_tui.views import PresetView

PREVIEW_LABEL = "PREVIEW — not sent"
"""The preview panel's title: what it shows is computed, never sent nor stored."""

DEFAULT_PRESET_NAME = "SillyTavern default"
"""How the preset list names "no preset bound" (SillyTavern's built-in default preset)."""

CONTENT_LIMIT = 400
"""Characters of a message's content the preview shows before cutting it with "…"."""

NAME_WIDTH = 28
"""Characters of a strategy's or preset's name that fit the list pane beside its mark."""

NOTE_WIDTH = 38
"""Characters of the line under a strategy or preset that fit the list pane (after the indent)."""

HINT = ("Only Enter changes the playthrough: it applies a strategy, binds a preset. The preview "
        "shows the highlighted strategy with the bound preset.")
"""The lines under the lists."""

STRATEGY_NOTES: Mapping[str, str] = {
    "compat": "card + world info in one system part",
    "projection": "SillyTavern's request from the preset",
    "preset-slots-first": "preset as one system section",
}
"""A short line under the strategies this screen knows; others are listed by name only."""

PreviewKey = tuple[str, int | None]
"""What a preview depends on here: (strategy, bound preset id)."""

# Previews run world-info activation, whose key-index cache is not safe to mutate from two
# threads; a superseded run cannot be interrupted, so runs take turns.
_PREVIEW_LOCK = threading.Lock()


@dataclass
class PreviewReady(Message):
    """A preview worker finished: the service's preview dict, or the error's text."""

    key: PreviewKey
    result: dict[str, Any] | str


def strategy_prompt(name: str, applied: bool) -> Content:
    """A strategy's list line: its name, "● applied" when it is, and a note under it."""
    note = STRATEGY_NOTES.get(name)
    return Content.assemble((clip(name, NAME_WIDTH), "bold"), ("  ● applied" if applied else "", "bold $wi-bound"),
                            (f"\n  {clip(note, NOTE_WIDTH)}" if note else "", "dim"))


def preset_prompt(preset: PresetView | None, bound: bool) -> Content:
    """A preset's list line (None: the built-in default): name, "● bound", its prompt counts."""
    if preset is None:
        name, summary = DEFAULT_PRESET_NAME, "built in"
    else:
        name = preset.name
        summary = f"{plural(preset.prompts, 'prompt')} · {preset.enabled} sent"
    return Content.assemble((clip(name, NAME_WIDTH), "bold"), ("  ● bound" if bound else "", "bold $wi-bound"),
                            (f"\n  {clip(summary, NOTE_WIDTH)}", "dim"))


def _role_style(role: str) -> str:
    return {"user": "$speaker-user", "assistant": "$speaker-character"}.get(role, "$speaker-system")


def preview_content(preview: Mapping[str, Any], preset_name: str) -> Content:
    """The preview panel's text: a summary line, each message ("role · source" then its content,
    cut to `CONTENT_LIMIT` characters), the call config, the token total and the adjustments."""
    messages: Sequence[Mapping[str, Any]] = preview.get("messages", [])
    tokens: Mapping[str, Any] = preview.get("tokens", {})
    parts: list[Content] = [Content.assemble(
        (f"{preview.get('strategy', '?')}", "bold"), f" with {preset_name} · ",
        f"{plural(len(messages), 'message')} · ~{tokens.get('total', '?')} tokens",
        ("  (the next request if nothing is typed)", "dim"))]
    for message in messages:
        role = str(message.get("role", "?"))
        header = [role, str(message.get("source", "?"))]
        if message.get("name"):
            header.append(str(message["name"]))
        content = str(message.get("content", ""))
        if len(content) > CONTENT_LIMIT:
            content = content[:CONTENT_LIMIT].rstrip() + "…"
        parts.append(Content(""))
        parts.append(Content.styled(" · ".join(header), f"bold {_role_style(role)}"))
        parts.append(Content(content) if content else Content.styled("(empty)", "dim italic"))
    parts.append(Content(""))
    config: Mapping[str, Any] = preview.get("config") or {}
    parts.append(Content.assemble(("config  ", "bold"), ", ".join(f"{k}={v}" for k, v in config.items())
                                  or ("none (the provider's defaults)", "dim")))
    detail = ", ".join(f"{k} {v}" for k, v in tokens.items() if k != "total")
    parts.append(Content.assemble(("tokens  ", "bold"), f"~{tokens.get('total', '?')} in total",
                                  (f" ({detail})" if detail else "", "dim")))
    world_info = preview.get("world_info")
    if isinstance(world_info, Mapping) and "fired" in world_info:
        fired = world_info["fired"]
        count = len(fired) if isinstance(fired, Sequence) else fired
        parts.append(Content.assemble(("world info  ", "bold"), f"{count} fired"))
    adjustments: Sequence[str] = preview.get("adjustments") or []
    parts.append(Content.assemble(("adjustments  ", "bold"), "" if adjustments else ("none", "dim")))
    parts.extend(Content(f"  · {adjustment}") for adjustment in adjustments)
    return Content("\n").join(parts)


class StrategyList(OptionList):
    """The strategies; Enter applies the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select", "Apply strategy", id="strategy.apply")]


class PresetList(OptionList):
    """The presets (the built-in default first); Enter binds the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select", "Bind preset", id="strategy.bind")]


class StrategyScreen(Screen[None]):
    """How one playthrough's requests are assembled (F6 in the chat).

    Shows the strategies this version knows (the applied one marked "● applied"), the presets
    ("SillyTavern default", i.e. none bound, then the imported ones; the bound one marked
    "● bound"), and a preview of the request the next step would send with the highlighted
    strategy and the bound preset: each message (role · source, content cut to 400 characters),
    the call config, the token estimate and the builder's adjustments. The preview is labelled
    "PREVIEW — not sent": nothing is sent or stored to make it.

    Keys: ↑/↓ move in a list (moving changes nothing), Enter on a strategy applies it, Enter on a
    preset binds it, Tab moves between the lists and the preview, Esc goes back to the chat
    (which re-reads its title).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="strategy.back"),
        Binding("tab", "app.focus_next", "Next pane", id="strategy.next_pane"),
        Binding("shift+tab", "app.focus_previous", "Previous pane", show=False),
    ]

    strategies = getters.query_one("#strategies", StrategyList)
    preset_list = getters.query_one("#presets", PresetList)
    preview_body = getters.query_one("#preview-body", Static)

    def __init__(self, tavern: Tavern, playthrough_id: int) -> None:
        super().__init__()
        self.tavern = tavern
        self.playthrough_id = playthrough_id
        self.playthrough: PlaythroughView | None = None
        self.preset_views: list[PresetView] = []
        self.previews: dict[PreviewKey, dict[str, Any] | str] = {}
        """Previews built so far (an error's text for a failed one); the chat does not change
        while this screen is open, so one per strategy and preset is enough."""
        self.shown_key: PreviewKey | None = None
        """What the preview panel shows now."""
        self._wanted: PreviewKey | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="strategy-title", markup=False)
        with Horizontal(id="strategy-panes"):
            with Vertical(id="strategy-side"):
                strategies = StrategyList(id="strategies")
                strategies.border_title = "Strategy"
                yield strategies
                presets = PresetList(id="presets")
                presets.border_title = "Preset"
                yield presets
                yield Static(HINT, id="strategy-hint", markup=False)
            with VerticalScroll(id="preview") as preview:
                preview.border_title = PREVIEW_LABEL
                yield Static("", id="preview-body", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        if not self._load():
            self.dismiss()
            return
        self.strategies.focus()
        self._request_preview()

    # -- lists ----------------------------------------------------------------------------

    def _load(self) -> bool:
        """(Re)read the playthrough and the presets, rebuild both lists and the title, keeping
        each list's highlight (on first load: on the applied strategy and the bound preset)."""
        try:
            view = self.tavern.playthrough(self.playthrough_id)
            presets = self.tavern.presets()
        except TavernError as exc:
            self.notify(str(exc), title="Cannot show the strategy", severity="error")
            return False
        first = self.playthrough is None
        self.playthrough, self.preset_views = view, presets
        self.query_one("#strategy-title", Static).update(
            f"Strategy & preset · {view.title} · applied: {view.strategy} · preset: {self.preset_name(view.preset_id)}")

        names = list(service_presets.STRATEGIES)  # read now: the known strategies may grow
        if view.strategy not in names:
            names.append(view.strategy)
        strategy_at = self.strategies.highlighted
        self.strategies.set_options(Option(strategy_prompt(name, name == view.strategy), id=name) for name in names)
        self.strategies.highlighted = names.index(view.strategy) if first or strategy_at is None else strategy_at

        preset_at = self.preset_list.highlighted
        choices: list[PresetView | None] = [None, *presets]
        self.preset_list.set_options(
            Option(preset_prompt(p, (p.id if p else None) == view.preset_id), id=str(p.id) if p else "default")
            for p in choices)
        ids = [p.id if p else None for p in choices]
        bound = ids.index(view.preset_id) if view.preset_id in ids else 0
        self.preset_list.highlighted = bound if first or preset_at is None else preset_at
        return True

    def preset_name(self, preset_id: int | None) -> str:
        """A preset's name as read with the list ("SillyTavern default" for None)."""
        if preset_id is None:
            return DEFAULT_PRESET_NAME
        return next((p.name for p in self.preset_views if p.id == preset_id), f"preset #{preset_id}")

    @property
    def highlighted_strategy(self) -> str | None:
        """The strategy under the strategy list's cursor."""
        option = self.strategies.highlighted_option
        return option.id if option is not None else None

    @on(OptionList.OptionHighlighted, "#strategies")
    def _strategy_highlighted(self) -> None:
        self._request_preview()

    @on(OptionList.OptionSelected, "#strategies")
    def _strategy_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        name = event.option.id
        if name is None or self.playthrough is None:
            return
        if name == self.playthrough.strategy:
            self.notify(f"{name} is already applied to #{self.playthrough_id}.", title="Strategy")
            return
        try:
            self.tavern.apply_strategy(self.playthrough_id, name)
        except TavernError as exc:
            self.notify(str(exc), title="Cannot apply the strategy", severity="error")
            return
        self.notify(f"Applied {name} to #{self.playthrough_id}: the next steps use it.", title="Strategy")
        self._load()

    @on(OptionList.OptionSelected, "#presets")
    def _preset_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if self.playthrough is None or event.option.id is None:
            return
        preset_id = None if event.option.id == "default" else int(event.option.id)
        name = self.preset_name(preset_id)
        if preset_id == self.playthrough.preset_id:
            self.notify(f"{name} is already bound to #{self.playthrough_id}.", title="Preset")
            return
        try:
            self.tavern.bind_preset(self.playthrough_id, preset_id)
        except TavernError as exc:
            self.notify(str(exc), title="Cannot bind the preset", severity="error")
            return
        self.notify(f"Bound {name} to #{self.playthrough_id}: the next steps and the preview use it.",
                    title="Preset")
        self._load()
        self._request_preview()

    # -- preview --------------------------------------------------------------------------

    def _request_preview(self) -> None:
        """Show the preview of the highlighted strategy with the bound preset, building it in
        a thread worker unless it was built before."""
        strategy = self.highlighted_strategy
        if strategy is None or self.playthrough is None:
            return
        key = (strategy, self.playthrough.preset_id)
        self._wanted = key
        if key == self.shown_key:
            return
        if key in self.previews:
            self._show_preview(key)
        else:
            self.query_one("#preview", VerticalScroll).border_subtitle = "building…"
            self._build_preview(key)

    @work(thread=True, exclusive=True, group="preview", exit_on_error=False, description="preview the request")
    def _build_preview(self, key: PreviewKey) -> None:
        # Reads the whole history (and runs world info): off the UI thread; only posts a Message.
        worker = get_current_worker()
        with _PREVIEW_LOCK:
            if worker.is_cancelled:
                return
            result: dict[str, Any] | str
            try:
                result = self.tavern.preview(self.playthrough_id, "", strategy=key[0])
            except TavernError as exc:
                result = str(exc)
            except Exception as exc:  # a broken preset must not take the screen down; say what happened
                result = f"{type(exc).__name__}: {exc}"
        self.post_message(PreviewReady(key, result))

    def on_preview_ready(self, message: PreviewReady) -> None:
        """Keep the built preview; show it if its strategy and preset are still the wanted ones."""
        self.previews[message.key] = message.result
        if isinstance(message.result, str):
            self.notify(message.result, title=f"Cannot preview {message.key[0]}", severity="error")
        if message.key == self._wanted:
            self._show_preview(message.key)

    def _show_preview(self, key: PreviewKey) -> None:
        result = self.previews[key]
        panel = self.query_one("#preview", VerticalScroll)
        panel.border_subtitle = f"{key[0]} · {self.preset_name(key[1])}"
        if isinstance(result, str):
            self.preview_body.update(Content.assemble(("No preview: ", "bold $error"), result))
        else:
            self.preview_body.update(preview_content(result, self.preset_name(key[1])))
        self.shown_key = key
        panel.scroll_home(animate=False)

    @property
    def preview_text(self) -> str:
        """The preview panel's text as shown (plain)."""
        content = self.preview_body.content
        return content.plain if isinstance(content, Content) else str(content)

    def action_back(self) -> None:
        """Return to the chat."""
        self.dismiss()
