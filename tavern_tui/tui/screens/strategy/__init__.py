"""Provides `StrategyScreen`: a playthrough's assembly strategy and preset, with a preview of the
request the next step would send, and `StrategyEditor`, the modal that saves an edited copy of a
strategy (issue 5 §8; DESIGN.md Strategies: editing never applies, applying is explicit)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from tavern_tui.assembly.strategies import StrategySpec
from tavern_tui.errors import TavernError
from tavern_tui.tui.screens.base import TavernScreen
from tavern_tui.tui.screens.strategy.editor import StrategyEditor
from tavern_tui.tui.screens.strategy.labels import (
    DEFAULT_PRESET_NAME,
    HINT,
    PREVIEW_LABEL,
    SHORT_HINT,
    preset_prompt,
    preview_content,
    strategy_prompt,
)
from tavern_tui.tui.screens.strategy.lists import PresetList, StrategyList
from tavern_tui.tui.widgets.fit_footer import FitFooter, ProviderSource, ScreenKeys
from tavern_tui.tui.widgets.screen_title import ScreenTitle
from tavern_tui.views import PlaythroughView, PresetView, distinct_labels

if TYPE_CHECKING:
    from tavern_tui.service import Tavern

PreviewKey = tuple[str, int, int | None]
"""What a preview depends on here: (strategy name, its listed version, bound preset id)."""

# Previews run world-info activation, whose key-index cache is not safe to mutate from two
# threads; a superseded run cannot be interrupted, so runs take turns.
_PREVIEW_LOCK = threading.Lock()


class StrategyScreen(TavernScreen[None]):
    """How one playthrough's requests are assembled (F6 in the chat; issue 5 §8; DESIGN.md
    Strategies).

    Shows the strategies (`tavern.strategies.strategies()`: the built-in ones, then the newest version of
    each saved one, each as "name · vN · base" with its note or options), marking the snapshot
    applied to this playthrough by name and version ("● applied", or "● v1 applied · v2 saved,
    not applied" when a newer version of it was saved since); the presets ("SillyTavern
    default", i.e. none bound, then the imported ones; the bound one marked "● bound"); and a
    preview of the request the next step would send with the highlighted strategy and the bound
    preset: each message (role · source, content cut to 400 characters), the call config, the
    token estimate and the builder's adjustments. The preview is labelled "PREVIEW — not sent":
    nothing is sent or stored to make it. Under 100 columns the lists sit above the preview and
    take two thirds of the height, so each shows a few options at 80x24; the hint under them is
    one short line there.

    Keys: ↑/↓ move in a list (moving changes nothing), Enter on a strategy applies the version
    listed, Enter on a preset binds it, c copies the highlighted strategy into `StrategyEditor`
    (saving a version never applies it), Tab moves between the lists and the preview, Esc goes
    back to the chat (which re-reads its title).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="strategy.back"),
        Binding("c", "copy", "Copy & edit", id="strategy.copy"),
        Binding("tab", "app.focus_next", "Next pane", id="strategy.next_pane"),
        Binding("shift+tab", "app.focus_previous", "Previous pane", show=False),
    ]

    # Under 100 columns (`-narrow`) app.tcss stacks the lists above the preview; these rules give
    # the lists two thirds of the height and the hint one row, so at 80x24 each list shows a few
    # options (the preview shrinks and scrolls). Two ids outrank app.tcss's narrow rules.
    CSS = """
    StrategyScreen.-narrow #strategy-panes #strategy-side { height: 2fr; }
    StrategyScreen.-narrow #strategy-panes #preview { height: 1fr; min-height: 4; }
    StrategyScreen #strategy-side #strategy-hint-short {
        display: none;
        height: auto;
        padding: 0 1;
        color: $text-muted;
    }
    StrategyScreen.-narrow #strategy-side #strategy-hint-short { display: block; }
    StrategyScreen.-narrow #strategy-side #strategy-hint { display: none; }
    """

    COMMANDS: ClassVar[set[ProviderSource]] = {ScreenKeys}

    FOOTER_DROP = ("quit", "app.focus_next")
    """The keys the footer hides first on a narrow terminal; they still work."""

    @dataclass
    class PreviewReady(Message):
        """A preview worker finished: the service's preview dict, or the error's text."""

        key: PreviewKey
        result: dict[str, Any] | str

    strategies = getters.query_one("#strategies", StrategyList)
    preset_list = getters.query_one("#presets", PresetList)
    preview_body = getters.query_one("#preview-body", Static)

    def __init__(self, tavern: Tavern, playthrough_id: int) -> None:
        super().__init__(tavern, playthrough_id)
        self.playthrough_id: int = playthrough_id
        self.playthrough: PlaythroughView | None = None
        self.applied: StrategySpec | None = None
        """The strategy snapshot the playthrough's steps use (`tavern.strategies.applied_strategy`)."""
        self.specs: list[StrategySpec] = []
        """The strategies listed, in list order (the applied snapshot last if it is not listed)."""
        self.preset_views: list[PresetView] = []
        self.previews: dict[PreviewKey, dict[str, Any] | str] = {}
        """Previews built so far (an error's text for a failed one); the chat does not change
        while this screen is open, so one per strategy version and preset is enough."""
        self.shown_key: PreviewKey | None = None
        """What the preview panel shows now."""
        self._wanted: PreviewKey | None = None

    def compose(self) -> ComposeResult:
        yield ScreenTitle("", id="strategy-title", markup=False)
        with Horizontal(id="strategy-panes"):
            with Vertical(id="strategy-side"):
                strategies = StrategyList(id="strategies", classes="pane", markup=False)
                strategies.border_title = "Strategy"
                yield strategies
                presets = PresetList(id="presets", classes="pane", markup=False)
                presets.border_title = "Preset"
                yield presets
                yield Static(HINT, id="strategy-hint", markup=False)
                yield Static(SHORT_HINT, id="strategy-hint-short", markup=False)  # in its place when narrow
            with VerticalScroll(id="preview") as preview:
                preview.border_title = PREVIEW_LABEL
                yield Static("", id="preview-body", markup=False)
        yield FitFooter(drop=self.FOOTER_DROP)

    def on_mount(self) -> None:
        def shown() -> None:
            self.strategies.focus()
            self._request_preview()

        self._load(then=shown, failed=lambda _: self.dismiss())

    # -- lists ----------------------------------------------------------------------------

    def _load(self, highlight: str | None = None, then: Callable[[], object] | None = None,
              failed: Callable[[BaseException], object] | None = None) -> None:
        """(Re)read the playthrough, its applied strategy, the strategies and the presets in a
        worker; then rebuild both lists and the title, keeping each list's highlight (on first
        load: on the applied strategy and the bound preset; `highlight`: on that strategy), and
        call `then`."""
        def read() -> tuple[PlaythroughView, StrategySpec, list[StrategySpec], list[PresetView]]:
            return (self.tavern.playthroughs.playthrough(self.playthrough_id),
                    self.tavern.strategies.applied_strategy(self.playthrough_id),
                    list(self.tavern.strategies.strategies()),  # read now: saved strategies come and go
                    self.tavern.presets.presets())

        def loaded(found: tuple[PlaythroughView, StrategySpec, list[StrategySpec], list[PresetView]]) -> None:
            self._show_lists(*found, highlight=highlight)
            if then is not None:
                then()

        self.call(read, title="Cannot show the strategy", then=loaded, failed=failed)

    def _show_lists(self, view: PlaythroughView, applied: StrategySpec, specs: list[StrategySpec],
                    presets: list[PresetView], highlight: str | None) -> None:
        first = self.playthrough is None
        self.playthrough, self.applied, self.preset_views = view, applied, presets
        self.query_one("#strategy-title", Static).update(
            f"Strategy & preset · {view.title} · applied: {applied.name} v{applied.version} · "
            f"preset: {self.preset_name(view.preset_id)}")

        if applied.name not in {spec.name for spec in specs}:
            specs.append(applied)
        self.specs = specs
        names = [spec.name for spec in specs]
        strategy_at = self.strategies.highlighted
        self.strategies.set_options(Option(strategy_prompt(spec, applied), id=spec.name) for spec in specs)
        if highlight in names:
            self.strategies.highlighted = names.index(highlight)
        elif first or strategy_at is None:
            self.strategies.highlighted = names.index(applied.name)
        else:
            self.strategies.highlighted = min(strategy_at, len(names) - 1)

        preset_at = self.preset_list.highlighted
        choices: list[PresetView | None] = [None, *presets]
        labels = distinct_labels(presets)  # presets sharing a name show their file and id
        self.preset_list.set_options(
            Option(preset_prompt(p, (p.id if p else None) == view.preset_id, labels.get(p.id) if p else None),
                   id=str(p.id) if p else "default")
            for p in choices)
        ids = [p.id if p else None for p in choices]
        bound = ids.index(view.preset_id) if view.preset_id in ids else 0
        self.preset_list.highlighted = bound if first or preset_at is None else preset_at

    def preset_name(self, preset_id: int | None) -> str:
        """A preset's name as read with the list ("SillyTavern default" for None)."""
        if preset_id is None:
            return DEFAULT_PRESET_NAME
        return next((p.name for p in self.preset_views if p.id == preset_id), f"preset #{preset_id}")

    def listed(self, name: str) -> StrategySpec | None:
        """The version of strategy `name` the list shows."""
        return next((spec for spec in self.specs if spec.name == name), None)

    @property
    def highlighted_spec(self) -> StrategySpec | None:
        """The strategy version under the strategy list's cursor."""
        option = self.strategies.highlighted_option
        return self.listed(option.id) if option is not None and option.id is not None else None

    @property
    def highlighted_strategy(self) -> str | None:
        """The name of the strategy under the strategy list's cursor."""
        option = self.strategies.highlighted_option
        return option.id if option is not None else None

    def is_applied(self, spec: StrategySpec) -> bool:
        """`spec` is the very version applied to this playthrough."""
        return self.applied is not None and (self.applied.name, self.applied.version) == (spec.name, spec.version)

    @on(OptionList.OptionHighlighted, "#strategies")
    def _strategy_highlighted(self) -> None:
        self._request_preview()

    @on(OptionList.OptionSelected, "#strategies")
    def _strategy_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        spec = self.listed(event.option.id) if event.option.id is not None else None
        if spec is None or self.playthrough is None:
            return
        label = f"{spec.name} v{spec.version}"
        if self.is_applied(spec):
            self.notify(f"{label} is already applied to #{self.playthrough_id}.", title="Strategy")
            return
        def applied(_: object) -> None:
            self.notify(f"Applied {label} to #{self.playthrough_id}: the next steps use it.", title="Strategy")
            self._load()

        self.call(self.tavern.strategies.apply_strategy, self.playthrough_id, spec.name, spec.version,
                  title="Cannot apply the strategy", then=applied)

    @on(OptionList.OptionHighlighted, "#presets")
    def _preset_highlighted(self) -> None:
        self._request_preview()  # a highlighted preset is previewed, not bound (issue 20 item 3)

    @property
    def highlighted_preset(self) -> int | None:
        """The id of the preset under the preset list's cursor (None: the built-in default)."""
        option = self.preset_list.highlighted_option if self.preset_list.option_count else None
        if option is None:  # not listed yet: the bound one
            return self.playthrough.preset_id if self.playthrough is not None else None
        return None if option.id in (None, "default") else int(option.id)

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
        def bound(_: object) -> None:
            self.notify(f"Bound {name} to #{self.playthrough_id}: the next steps and the preview use it.",
                        title="Preset")
            self._load(then=self._request_preview)

        self.call(self.tavern.presets.bind_preset, self.playthrough_id, preset_id, title="Cannot bind the preset",
                  then=bound)

    # -- copy & edit ----------------------------------------------------------------------

    def action_copy(self) -> None:
        """Open `StrategyEditor` on the highlighted strategy (a built-in one as "<name> copy")."""
        spec = self.highlighted_spec
        if spec is None:
            return
        known = {s.name: s.version for s in self.specs if not s.builtin}
        self.app.push_screen(StrategyEditor(self.tavern, spec, known), self._saved)

    def _saved(self, spec: StrategySpec | None) -> None:
        """After the editor: list and highlight the saved version (not applied) and preview it."""
        if spec is None:
            return
        self.notify(f"Saved {spec.name} v{spec.version} — not applied; press Enter to apply", title="Strategy")
        def shown() -> None:
            self.strategies.focus()
            self._request_preview()

        self._load(highlight=spec.name, then=shown)

    # -- preview --------------------------------------------------------------------------

    def _request_preview(self) -> None:
        """Show the preview of the highlighted strategy with the highlighted preset (neither is
        bound by it), building it in a thread worker unless it was built before."""
        spec = self.highlighted_spec
        if spec is None or self.playthrough is None:
            return
        key = (spec.name, spec.version, self.highlighted_preset)
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
        # The service previews a strategy's newest version: the one listed.
        worker = get_current_worker()
        with _PREVIEW_LOCK:
            if worker.is_cancelled:
                return
            result: dict[str, Any] | str
            try:
                # The highlighted preset, in memory only: a preview binds nothing.
                bound = self.playthrough.preset_id if self.playthrough is not None else None
                result = self.tavern.steps.preview_selection(self.playthrough_id, "", strategy=key[0],
                                                             preset=False if key[2] == bound else key[2])
            except TavernError as exc:
                result = str(exc)
            except Exception as exc:  # a broken preset must not take the screen down; say what happened
                result = f"{type(exc).__name__}: {exc}"
        self.post_message(self.PreviewReady(key, result))

    def on_strategy_screen_preview_ready(self, message: StrategyScreen.PreviewReady) -> None:
        """Keep the built preview; show it if its strategy and preset are still the wanted ones."""
        self.previews[message.key] = message.result
        if isinstance(message.result, str):
            self.notify(message.result, title=f"Cannot preview {message.key[0]}", severity="error")
        if message.key == self._wanted:
            self._show_preview(message.key)

    def _show_preview(self, key: PreviewKey) -> None:
        result = self.previews[key]
        panel = self.query_one("#preview", VerticalScroll)
        panel.border_subtitle = Content(f"{key[0]} v{key[1]} · {self.preset_name(key[2])}")
        if isinstance(result, str):
            self.preview_body.update(Content.assemble(("No preview: ", "bold $error"), result))
        else:
            self.preview_body.update(preview_content(result, self.preset_name(key[2])))
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
