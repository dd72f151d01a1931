"""Provides `SettingsScreen`: the endpoint, model, key and the app's other settings, saved to the
config file and applied at once, without a restart (issue 21 item 1).

The API key is never shown: the field is a password field that starts empty ("leave empty to
keep the stored key"); a new key goes to the OS keyring when one is available, else to the config
file (written 0600). "Test connection" asks the endpoint's `GET /models` (in a thread) and says
what it answered; its models fill the model picker.

Esc with unsaved changes only says so; a second Esc within `ESC_AGAIN` seconds discards them (as
the chat's composer keeps a stray Esc from leaving). With nothing changed Esc leaves at once.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from tavern_tui import paths
from tavern_tui.config import BELIEF_EXTRACTORS, Settings, TuiSettings
from tavern_tui.config.store import keyring_available, save_config
from tavern_tui.errors import FormatError
from tavern_tui.providers.base import ProviderSettings, endpoint_problem
from tavern_tui.tui.screens.base import ESC_AGAIN, TavernScreen, TypeAhead
from tavern_tui.tui.typed_first import after_typed_keys
from tavern_tui.tui.widgets.fit_footer import FitFooter
from tavern_tui.tui.widgets.screen_title import ScreenTitle

if TYPE_CHECKING:
    from tavern_tui.providers.probe import EndpointReport
    from tavern_tui.service import Tavern


def overridden_by_environment(settings: Any) -> list[str]:
    """The environment variables set now that differ from the endpoint `settings` saved: the next start
    reads them before the config file (`config`: flags, then environment, then the file)."""
    import os

    provider = settings.provider
    fields = (("TAVERN_API_BASE", provider.base_url), ("TAVERN_MODEL", provider.model))
    return [name for name, saved in fields if os.environ.get(name) not in (None, "", saved)]


class SettingsScreen(TavernScreen[bool]):
    """Edits the settings; dismisses with True when they were saved and applied.

    | id | field |
    | --- | --- |
    | `base-url`, `model`, `model-list`, `api-key`, `timeout` | the endpoint (`[provider]`) |
    | `max-context`, `wi-depth`, `wi-budget`, `wi-recursive` | context size and world info |
    | `strategy`, `extractor`, `tokenizer`, `theme` | the rest (top level and `[tui]`) |
    | `timestamps`, `numbers`, `token-counts`, `impersonate-direct` | the chat's labels and F4 |
    """

    DEFAULT_CSS = """
    SettingsScreen #settings-form { padding: 0 1; }
    SettingsScreen .row { height: auto; margin-bottom: 0; }
    SettingsScreen .row Label { width: 22; padding: 1 1 0 0; text-align: right; }
    SettingsScreen .row Input, SettingsScreen .row Select { width: 1fr; }
    SettingsScreen .section { text-style: bold; color: $primary; margin-top: 1; }
    SettingsScreen #connection { color: $text-muted; padding: 0 0 0 23; height: auto; }
    SettingsScreen #connection.-ok { color: $success; }
    SettingsScreen #connection.-failed { color: $error; }
    SettingsScreen #settings-buttons { height: auto; margin-top: 1; }
    SettingsScreen #settings-buttons Button { margin-right: 2; }
    SettingsScreen Checkbox { margin-left: 22; border: none; padding: 0; }
    """

    BINDINGS = [
        Binding("escape", "cancel", "Back", id="settings.back"),
        Binding("ctrl+s", "save", "Save", id="settings.save", priority=True),
        Binding("ctrl+t", "test_connection", "Test connection", id="settings.test"),
    ]

    def __init__(self, tavern: Tavern) -> None:
        super().__init__(tavern)
        self._models: list[str] = []
        self._opened_theme = ""
        self._opened: dict[str, object] = {}  # the form as it opened (`_values`)
        self._type_ahead = TypeAhead(self, lambda: self.query_one("#base-url", Input))  # keys before the focus

    def compose(self) -> ComposeResult:
        s = self.tavern.settings
        prov = s.provider
        # Names the file without claiming anything was saved to it (saving leaves the screen).
        yield ScreenTitle(f"Settings · config file: {self._config_path()}", id="settings-title", markup=False)
        with VerticalScroll(id="settings-form"):
            yield Static("Endpoint", classes="section", markup=False)
            yield from self._row("Endpoint URL", Input(prov.base_url, placeholder="http://127.0.0.1:8080/v1 "
                                                       "(empty: the offline demo)", id="base-url"))
            yield from self._row("Model", Input(prov.model, placeholder="model id", id="model"))
            yield from self._row("Pick a model", Select[str]([], prompt="Test connection lists the models",
                                                            id="model-list", allow_blank=True))
            # Where the key is kept is read in a worker (`_key_state`): asking the keyring blocks.
            yield from self._row("API key", Input("", password=True, id="api-key", placeholder="type to replace"))
            yield Checkbox("Remove the stored key", id="clear-key")
            yield from self._row("Timeout (s)", Input(f"{prov.timeout:g}", id="timeout", type="number"))
            yield Static("", id="connection", markup=False)
            yield Static("Context and world info", classes="section", markup=False)
            yield from self._row("Context size", Input(str(s.max_context), id="max-context", type="integer",
                                                       placeholder="0: the preset's, the endpoint's or 4095"))
            yield from self._row("World info depth", Input(str(s.world_info.depth), id="wi-depth", type="integer"))
            yield from self._row("World info budget %", Input(f"{s.world_info.budget:g}", id="wi-budget",
                                                              type="number"))
            yield Checkbox("World info recursion", s.world_info.recursive, id="wi-recursive")
            yield Static("Playing", classes="section", markup=False)
            strategy = s.default_strategy
            yield from self._row("Default strategy", Select[str]([(strategy, strategy)], id="strategy",
                                                                value=strategy, allow_blank=False))
            yield from self._row("Belief extractor", Select[str]([(e, e) for e in BELIEF_EXTRACTORS], id="extractor",
                                                                value=s.belief_extractor, allow_blank=False))
            yield from self._row("Tokenizer", Input(s.tokenizer, id="tokenizer",
                                                    placeholder="path of a tokenizer.json (empty: the estimate)"))
            yield from self._row("Theme", Select[str]([(name, name) for name in sorted(self.app.available_themes)],
                                                      id="theme", value=self.app.theme, allow_blank=False))
            yield Checkbox("Show times on messages", s.tui.timestamps, id="timestamps")
            yield Checkbox("Show message numbers", s.tui.message_numbers, id="numbers")
            yield Checkbox("Show token counts per message", s.tui.token_counts, id="token-counts")
            yield Checkbox("F4 posts your impersonated line at once (else it fills the composer)",
                           s.tui.impersonate_direct, id="impersonate-direct")
            with Horizontal(id="settings-buttons"):
                yield Button("Save (ctrl+s)", id="save", variant="primary")
                yield Button("Test connection (ctrl+t)", id="test")
                yield Button("Cancel (Esc)", id="cancel")
        yield FitFooter()

    @staticmethod
    def _row(label: str, widget: Input | Select[str]) -> ComposeResult:
        with Horizontal(classes="row"):
            yield Label(label, markup=False)
            yield widget

    def _config_path(self) -> Path:
        return self.tavern.settings.config_path or paths.config_file()

    async def on_mount(self) -> None:
        self._opened_theme = self.app.theme
        self._opened = self._values()
        await self._type_ahead.mounted()  # the endpoint field gets the focus (and what was typed)
        self.call(self.tavern.strategies.strategies, title="Cannot list the strategies", then=self._strategies)
        self.call(self._key_state, title="Cannot read the keyring", severity="warning",
                  then=lambda text: setattr(self.query_one("#api-key", Input), "placeholder", text))

    async def on_key(self, event: events.Key) -> None:
        """Keys typed before the endpoint URL field had the focus go into it (`TypeAhead`)."""
        await self._type_ahead.take(event)

    def _key_state(self) -> str:
        """The key field's placeholder: whether a key is set and where a new one is kept (in a worker:
        the keyring's backend is found and asked here)."""
        stored = "a key is set (hidden)" if self.tavern.settings.provider.key else "no key set"
        where = "the OS keyring" if keyring_available() else "the config file (owner-only, 0600)"
        return f"{stored}; type to replace, kept in {where}"

    def _strategies(self, specs: list) -> None:
        names = sorted({spec.name for spec in specs} | {self.tavern.settings.default_strategy})
        select = self.query_one("#strategy", Select)
        select.set_options([(Content(name), name) for name in names])
        select.value = self.tavern.settings.default_strategy

    # -- test connection -----------------------------------------------------------------

    def _provider_from_form(self) -> ProviderSettings:
        current = self.tavern.settings.provider
        typed_key = self.query_one("#api-key", Input).value
        key = "" if self.query_one("#clear-key", Checkbox).value else (typed_key or current.key)
        base_url = self.query_one("#base-url", Input).value.strip()
        problem = endpoint_problem(base_url)
        if problem is not None:  # refused here, not at the first send
            raise ValueError(f"Endpoint URL: {problem.split(';')[0]}")
        return ProviderSettings(base_url=base_url,
                                model=self.query_one("#model", Input).value.strip(), api_key=key,
                                timeout=self._number("#timeout", "Timeout", float, current.timeout))

    def action_test_connection(self) -> None:
        """Ask the endpoint in the form for its models (in a thread) and say what it answered."""
        try:
            provider = self._provider_from_form()
        except ValueError as exc:
            self.notify(str(exc), title="Cannot test", severity="warning")
            return
        line = self.query_one("#connection", Static)
        line.set_classes("")
        line.update("asking the endpoint…")
        from tavern_tui.providers.probe import probe_endpoint  # httpx: loaded on first use, not at start-up

        self.call(probe_endpoint, provider, title="Cannot test the connection", then=self._tested)

    def _tested(self, report: EndpointReport) -> None:
        line = self.query_one("#connection", Static)
        line.set_classes("-ok" if report.ok else "-failed")
        line.update(report.message)
        if report.models:
            self._models = report.models
            picker = self.query_one("#model-list", Select)
            picker.set_options([(Content(m), m) for m in report.models])  # not markup
            current = self.query_one("#model", Input).value.strip()
            if current in report.models:
                picker.value = current
            elif not current:
                self.query_one("#model", Input).value = report.models[0]

    @on(Select.Changed, "#model-list")
    def _model_picked(self, event: Select.Changed) -> None:
        if isinstance(event.value, str):
            self.query_one("#model", Input).value = event.value

    @on(Select.Changed, "#theme")
    def _theme_picked(self, event: Select.Changed) -> None:
        if isinstance(event.value, str) and event.value in self.app.available_themes:
            self.app.theme = event.value  # a preview; Cancel puts the old one back

    # -- save ------------------------------------------------------------------------------

    def _number(self, selector: str, label: str, kind: type, default: float) -> float:
        text = self.query_one(selector, Input).value.strip()
        if not text:
            return default
        try:
            value = kind(text)
        except ValueError:
            raise ValueError(f"{label}: expected {'a whole number' if kind is int else 'a number'}, got {text!r}"
                             ) from None
        if value < 0:
            raise ValueError(f"{label}: expected 0 or more, got {text}")
        return value

    def _form(self) -> tuple[Settings, dict, str | None]:
        """(new settings, the config file's changes, the new API key or None) from the form.

        Raises:
            ValueError: a field holds what it cannot (names the field).
        """
        s = self.tavern.settings
        provider = self._provider_from_form()
        typed_key = self.query_one("#api-key", Input).value
        api_key = "" if self.query_one("#clear-key", Checkbox).value else (typed_key or None)
        max_context = int(self._number("#max-context", "Context size", int, s.max_context))
        try:
            world_info = dataclasses.replace(
                s.world_info, depth=int(self._number("#wi-depth", "World info depth", int, s.world_info.depth)),
                budget=self._number("#wi-budget", "World info budget", float, s.world_info.budget),
                recursive=self.query_one("#wi-recursive", Checkbox).value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"World info: {exc}") from None
        strategy = self.query_one("#strategy", Select).value
        extractor = self.query_one("#extractor", Select).value
        theme = self.query_one("#theme", Select).value
        tui = TuiSettings(theme=str(theme) if isinstance(theme, str) else s.tui.theme,
                          timestamps=self.query_one("#timestamps", Checkbox).value,
                          message_numbers=self.query_one("#numbers", Checkbox).value,
                          token_counts=self.query_one("#token-counts", Checkbox).value,
                          impersonate_direct=self.query_one("#impersonate-direct", Checkbox).value)
        new = dataclasses.replace(
            s, provider=provider, max_context=max_context, world_info=world_info,
            default_strategy=strategy if isinstance(strategy, str) else s.default_strategy,
            belief_extractor=extractor if isinstance(extractor, str) else s.belief_extractor,
            tokenizer=self.query_one("#tokenizer", Input).value.strip(), tui=tui)
        changes = {
            "provider": {"base_url": provider.base_url, "model": provider.model, "timeout": provider.timeout},
            "max_context": max_context, "default_strategy": new.default_strategy,
            "belief_extractor": new.belief_extractor, "tokenizer": new.tokenizer,
            "world_info": {"world_info_depth": world_info.depth, "world_info_budget": world_info.budget,
                           "world_info_recursive": world_info.recursive},
            "tui": dataclasses.asdict(tui),
        }
        return new, changes, api_key

    @after_typed_keys
    def action_save(self) -> None:
        """Write the config file (the key to the keyring when there is one) in a thread, then use
        the new settings at once."""
        try:
            new, changes, api_key = self._form()
        except ValueError as exc:
            self.notify(str(exc), title="Not saved", severity="warning")
            return
        path = self._config_path()
        if new.tokenizer and not Path(new.tokenizer).expanduser().is_file():
            self.notify(f"Tokenizer: no file at {new.tokenizer}", title="Not saved", severity="warning")
            return

        def write() -> str:
            try:
                return save_config(path, changes, api_key=api_key)
            except OSError as exc:
                raise FormatError(str(path), f"cannot write: {exc.strerror or exc}") from exc

        async def saved(where: str) -> None:
            await self.tavern.apply_settings(dataclasses.replace(new, config_path=path))
            apply = getattr(self.app, "apply_tui_settings", None)
            if apply is not None:
                apply(new.tui)
            kept = {"keyring": " · key in the OS keyring", "file": " · key in the config file (0600)"}.get(where, "")
            self.notify(f"Saved to {path}{kept}. Now using {self.tavern.provider_label}.", title="Settings")
            overriding = overridden_by_environment(new)
            if overriding:  # the environment comes before the file when tavern starts again
                self.notify(f"{', '.join(overriding)} {'is' if len(overriding) == 1 else 'are'} set in the "
                            "environment and will win over what you saved when tavern starts again (unset to "
                            "use the file).", title="Settings", severity="warning", timeout=12)
            self.dismiss(True)

        self.call(write, title="Cannot save the settings", then=saved)

    @on(Button.Pressed, "#save")
    def _save_pressed(self) -> None:
        self.action_save()

    @on(Button.Pressed, "#test")
    def _test_pressed(self) -> None:
        self.action_test_connection()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self._discard()  # the button says what it does: no second press

    def _values(self) -> dict[str, object]:
        """Every field's value by id (the model picker only fills the model field: left out)."""
        fields: dict[str, object] = {}
        for widget in self.query("Input, Checkbox, Select"):
            if widget.id and widget.id != "model-list" and isinstance(widget, Input | Checkbox | Select):
                fields[widget.id] = widget.value
        return fields

    def unsaved(self) -> bool:
        """Whether the form differs from the settings it opened with."""
        return self._values() != self._opened

    def action_cancel(self) -> None:
        """Leave without saving. With unsaved changes the first Esc only says so; a second one
        within `ESC_AGAIN` seconds discards them."""
        asks = f"Esc again within {ESC_AGAIN:.0f} s discards your changes (ctrl+s saves)."
        if not self.esc_warns(self.unsaved(), asks):
            self._discard()

    def _discard(self) -> None:
        """Leave without saving (a previewed theme is put back)."""
        if self.app.theme != self._opened_theme:
            self.app.theme = self._opened_theme
        self.dismiss(False)
