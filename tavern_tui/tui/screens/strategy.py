"""Provides `StrategyScreen`: a playthrough's assembly strategy and preset, with a preview of the
request the next step would send, and `StrategyEditor`, the modal that saves an edited copy of a
strategy (issue 5 §8; DESIGN.md Strategies: editing never applies, applying is explicit)."""

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
from textual.widgets import Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from tavern_tui.assembly.strategies import BUILTINS, OPTIONS, StrategySpec
from tavern_tui.errors import Conflict, TavernError
from tavern_tui.service import PlaythroughView, Tavern
from tavern_tui.tui.labels import clip, plural
from tavern_tui.tui.widgets.fit_footer import FitFooter, ProviderSource, ScreenKeys
from tavern_tui.tui.widgets.save_cancel import SaveCancelModal, refusal_text
from tavern_tui.tui.widgets.screen_title import ScreenTitle
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

HINT = ("Only Enter changes the playthrough: it applies a strategy, binds a preset. c saves an edited "
        "copy (never applied). The preview shows the highlighted strategy with the bound preset.")
"""The lines under the lists."""

LINE_WIDTH = NAME_WIDTH + 12
"""Characters of a list line that fit the list pane."""

STRATEGY_NOTES: Mapping[str, str] = {
    "compat": "card + world info in one system part",
    "preset-roles-first": "preset prompts keep their roles",
    "preset-slots-first": "preset as one system section",
    "projection": "SillyTavern's request from the preset",
}
"""A short line under the built-in strategies; a saved one shows its options instead."""

PreviewKey = tuple[str, int, int | None]
"""What a preview depends on here: (strategy name, its listed version, bound preset id)."""

# Previews run world-info activation, whose key-index cache is not safe to mutate from two
# threads; a superseded run cannot be interrupted, so runs take turns.
_PREVIEW_LOCK = threading.Lock()


@dataclass
class PreviewReady(Message):
    """A preview worker finished: the service's preview dict, or the error's text."""

    key: PreviewKey
    result: dict[str, Any] | str


def strategy_label(spec: StrategySpec) -> str:
    """A strategy as the list and the notifications name it: "lean · v2 · preset-slots-first"
    ("compat · v1 · built in" for a built-in one)."""
    return f"{clip(spec.name, NAME_WIDTH)} · v{spec.version} · {'built in' if spec.builtin else spec.base}"


def options_note(spec: StrategySpec) -> str:
    """A strategy's options on one line ("examples=omit"), or its built-in note."""
    if spec.builtin:
        return STRATEGY_NOTES.get(spec.name, "")
    return ", ".join(f"{key}={value}" for key, value in spec.options.items()) or "no options"


def applied_note(spec: StrategySpec, applied: StrategySpec | None) -> str:
    """How `spec` (as listed) stands against the playthrough's applied snapshot: "● applied",
    "● v1 applied · v2 saved, not applied" (an older version of it applies), or ""."""
    if applied is None or applied.name != spec.name:
        return ""
    if applied.version == spec.version:
        return "● applied"
    return f"● v{applied.version} applied · v{spec.version} saved, not applied"


def strategy_prompt(spec: StrategySpec, applied: StrategySpec | None) -> Content:
    """A strategy's list line (name · version · base), how it stands against the applied one
    (`applied_note`) and its note or options under it."""
    name, _, rest = strategy_label(spec).partition(" · ")
    status = applied_note(spec, applied)
    note = options_note(spec)
    return Content.assemble(
        (name, "bold"), (" " + clip(f"· {rest}", LINE_WIDTH - len(name) - 1), "dim"),
        (f"\n  {clip(status, LINE_WIDTH - 2)}" if status else "", "bold $wi-bound"),
        (f"\n  {clip(note, LINE_WIDTH - 2)}" if note else "", "dim"))


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


@dataclass
class StrategySaved(Message):
    """The editor's save worker finished: the version written, or the refusal."""

    result: StrategySpec | BaseException


class StrategyEditor(SaveCancelModal[StrategySpec | None]):
    """Saves an edited copy of a strategy as a stored version (issue 5 §8; DESIGN.md Strategies).

    Shows a name (for a built-in strategy "<name> copy"; for a saved one its own name, which
    saves its next version; another saved name saves that one's next version), the base
    (read-only), one choice per option of the base (`OPTIONS`) set to the strategy's values, and
    what Save would write ("saves lean v2"). Saving never applies: the playthrough keeps its
    strategy until Enter in the list applies another.

    Keys: Tab moves between the fields, Ctrl+S saves (in a thread worker), Esc cancels. A refusal
    (a built-in or empty name) or a `Conflict` (the name gained a version since the pane read it)
    is shown here with nothing written, and the editor stays open. Dismisses with the version
    written, or None.
    """

    ERROR_ID: ClassVar[str] = "strategy-editor-error"  # `begin_save` / `save_refused` show refusals here

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="strategy_editor.cancel"),
        Binding("ctrl+s", "save", "Save", id="strategy_editor.save", priority=True),
    ]

    # An option's choices open in the editor's flow, under its row, pushing the rows and lines
    # below down while open (as a pop-up over them they hid the next option and the "Saves …"
    # line). Ids in the selectors outrank the rows' height in app.tcss.
    CSS = """
    StrategyEditor #strategy-editor-box .strategy-editor-row {
        height: auto;
    }
    StrategyEditor #strategy-editor-box Select > SelectOverlay {
        overlay: none;
        border: none;
        border-left: outer $primary;
        max-height: 8;
    }
    """

    def __init__(self, tavern: Tavern, spec: StrategySpec, known: Mapping[str, int]) -> None:
        """`spec`: the strategy copied; `known`: each saved name's newest version as the pane
        read it (what a save under that name expects to follow)."""
        super().__init__()
        self.tavern = tavern
        self.spec = spec
        self.known = dict(known)
        self.saving = False
        """A save is running (Esc and Ctrl+S wait for it)."""
        self._saving_name = ""

    @property
    def default_name(self) -> str:
        """The name the editor starts with: "<name> copy" for a built-in, else the same name."""
        return f"{self.spec.name} copy" if self.spec.builtin else self.spec.name

    def compose(self) -> ComposeResult:
        spec = self.spec
        options = OPTIONS.get(spec.base, {})
        with Vertical(id="strategy-editor-box", classes="modal-box") as box:
            box.border_title = (f"Copy {spec.name} v{spec.version}" if spec.builtin
                                else f"Edit {spec.name} v{spec.version}")
            yield Static("Saving stores a new version; it is not applied (Enter in the list applies it).",
                         id="strategy-editor-hint", markup=False)
            with Horizontal(classes="strategy-editor-row"):
                yield Label("Name", classes="strategy-editor-label")
                yield Input(self.default_name, id="strategy-name", compact=True)
            with Horizontal(classes="strategy-editor-row"):
                yield Label("Base", classes="strategy-editor-label")
                yield Static(f"{spec.base} (read-only)", id="strategy-base", markup=False)
            for option, (values, default) in options.items():
                with Horizontal(classes="strategy-editor-row"):
                    yield Label(option, classes="strategy-editor-label")
                    yield Select([(str(value), value) for value in values], value=spec.options.get(option, default),
                                 allow_blank=False, id=f"option-{option}", compact=True)
            if not options:
                yield Static(f"{spec.base} has no options: a copy only gives it another name.",
                             id="strategy-no-options", markup=False)
            yield Static("", id="strategy-saves-as", markup=False)
            yield from self.compose_save_cancel(buttons_id="strategy-editor-buttons", keys_id="strategy-editor-keys")

    def on_mount(self) -> None:
        self._show_saves_as()
        self.query_one("#strategy-name", Input).focus()

    @property
    def name_text(self) -> str:
        """The name as typed (stripped)."""
        return self.query_one("#strategy-name", Input).value.strip()

    @property
    def options(self) -> dict[str, Any]:
        """The options as chosen."""
        return {option: self.query_one(f"#option-{option}", Select).value
                for option in OPTIONS.get(self.spec.base, {})}

    @property
    def error_text(self) -> str:
        """The refusal shown, "" when none."""
        return str(self.query_one("#strategy-editor-error", Static).content)

    @property
    def saves_as_text(self) -> str:
        """What Save would write, as shown."""
        return str(self.query_one("#strategy-saves-as", Static).content)

    @on(Input.Changed, "#strategy-name")
    def _name_changed(self) -> None:
        self._show_saves_as()

    def _show_saves_as(self) -> None:
        name = self.name_text
        current = self.known.get(name, 0)
        if not name:
            line = "Type a name."
        elif name in BUILTINS:
            line = f"{name} is built in and read-only: choose another name."
        elif current:
            line = f"Saves {name} v{current + 1} (the next version of {name} v{current})."
        else:
            line = f"Saves {name} v1 (a new strategy)."
        self.query_one("#strategy-saves-as", Static).update(line)

    def action_save(self) -> None:
        """Save the version in a worker, expecting the name's newest version as the pane read it."""
        if not self.begin_save():
            return
        name = self._saving_name = self.name_text
        self._run_save(name, self.options, self.known.get(name, 0))

    @work(thread=True, exclusive=True, group="strategy-save", exit_on_error=False, description="save the strategy")
    def _run_save(self, name: str, options: dict[str, Any], expected: int) -> None:
        result: StrategySpec | BaseException
        try:
            result = self.tavern.strategies.save_strategy(name, self.spec.base, options, expected_version=expected)
        except Exception as exc:  # a refusal stays on screen; anything else must not leave the editor stuck
            result = exc
        self.post_message(StrategySaved(result))

    def on_strategy_saved(self, message: StrategySaved) -> None:
        """Close with the saved version; otherwise show why nothing was written and stay open."""
        result = message.result
        if isinstance(result, StrategySpec):
            self.save_done(result)
            return
        if isinstance(result, Conflict):
            shown = (f"{self._saving_name} gained a version since this pane read it (v{result.expected}, now "
                     f"v{result.current}). Cancel and copy it again, or save under another name.")
        else:
            shown = refusal_text(result)
        self.save_refused(f"Not saved, nothing was written: {shown}")



class StrategyScreen(Screen[None]):
    """How one playthrough's requests are assembled (F6 in the chat; issue 5 §8; DESIGN.md
    Strategies).

    Shows the strategies (`Tavern.strategies.strategies()`: the built-in ones, then the newest version of
    each saved one, each as "name · vN · base" with its note or options), marking the snapshot
    applied to this playthrough by name and version ("● applied", or "● v1 applied · v2 saved,
    not applied" when a newer version of it was saved since); the presets ("SillyTavern
    default", i.e. none bound, then the imported ones; the bound one marked "● bound"); and a
    preview of the request the next step would send with the highlighted strategy and the bound
    preset: each message (role · source, content cut to 400 characters), the call config, the
    token estimate and the builder's adjustments. The preview is labelled "PREVIEW — not sent":
    nothing is sent or stored to make it.

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

    COMMANDS: ClassVar[set[ProviderSource]] = {ScreenKeys}

    FOOTER_DROP = ("quit", "app.focus_next")
    """The keys the footer hides first on a narrow terminal; they still work."""

    strategies = getters.query_one("#strategies", StrategyList)
    preset_list = getters.query_one("#presets", PresetList)
    preview_body = getters.query_one("#preview-body", Static)

    def __init__(self, tavern: Tavern, playthrough_id: int) -> None:
        super().__init__()
        self.tavern = tavern
        self.playthrough_id = playthrough_id
        self.playthrough: PlaythroughView | None = None
        self.applied: StrategySpec | None = None
        """The strategy snapshot the playthrough's steps use (`Tavern.strategies.applied_strategy`)."""
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
                strategies = StrategyList(id="strategies", classes="pane")
                strategies.border_title = "Strategy"
                yield strategies
                presets = PresetList(id="presets", classes="pane")
                presets.border_title = "Preset"
                yield presets
                yield Static(HINT, id="strategy-hint", markup=False)
            with VerticalScroll(id="preview") as preview:
                preview.border_title = PREVIEW_LABEL
                yield Static("", id="preview-body", markup=False)
        yield FitFooter(drop=self.FOOTER_DROP)

    def on_mount(self) -> None:
        if not self._load():
            self.dismiss()
            return
        self.strategies.focus()
        self._request_preview()

    # -- lists ----------------------------------------------------------------------------

    def _load(self, highlight: str | None = None) -> bool:
        """(Re)read the playthrough, its applied strategy, the strategies and the presets; rebuild
        both lists and the title, keeping each list's highlight (on first load: on the applied
        strategy and the bound preset; `highlight`: on that strategy)."""
        try:
            view = self.tavern.playthroughs.playthrough(self.playthrough_id)
            applied = self.tavern.strategies.applied_strategy(self.playthrough_id)
            specs = list(self.tavern.strategies.strategies())  # read now: saved strategies come and go
            presets = self.tavern.presets.presets()
        except TavernError as exc:
            self.notify(str(exc), title="Cannot show the strategy", severity="error")
            return False
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
        try:
            self.tavern.strategies.apply_strategy(self.playthrough_id, spec.name, spec.version)
        except TavernError as exc:
            self.notify(str(exc), title="Cannot apply the strategy", severity="error")
            return
        self.notify(f"Applied {label} to #{self.playthrough_id}: the next steps use it.", title="Strategy")
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
            self.tavern.presets.bind_preset(self.playthrough_id, preset_id)
        except TavernError as exc:
            self.notify(str(exc), title="Cannot bind the preset", severity="error")
            return
        self.notify(f"Bound {name} to #{self.playthrough_id}: the next steps and the preview use it.",
                    title="Preset")
        self._load()
        self._request_preview()

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
        if self._load(highlight=spec.name):
            self.strategies.focus()
            self._request_preview()

    # -- preview --------------------------------------------------------------------------

    def _request_preview(self) -> None:
        """Show the preview of the highlighted strategy with the bound preset, building it in
        a thread worker unless it was built before."""
        spec = self.highlighted_spec
        if spec is None or self.playthrough is None:
            return
        key = (spec.name, spec.version, self.playthrough.preset_id)
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
                result = self.tavern.steps.preview(self.playthrough_id, "", strategy=key[0])
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
        panel.border_subtitle = f"{key[0]} v{key[1]} · {self.preset_name(key[2])}"
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
