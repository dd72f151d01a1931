"""`StrategyEditor`: the modal that saves an edited copy of a strategy as a stored version
(issue 5 §8; DESIGN.md Strategies: editing never applies, applying is explicit)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import Input, Label, Select, Static

from tavern_tui.assembly.strategies import BUILTINS, OPTIONS, StrategySpec
from tavern_tui.errors import Conflict
from tavern_tui.tui.typed_first import after_typed_keys
from tavern_tui.tui.widgets.save_cancel import SaveCancelModal, refusal_text

if TYPE_CHECKING:
    from tavern_tui.service import Tavern


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

    @dataclass
    class Saved(Message):
        """The editor's save worker finished: the version written, or the refusal."""

        result: StrategySpec | BaseException

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
            box.border_title = Content(f"Copy {spec.name} v{spec.version}" if spec.builtin
                                else f"Edit {spec.name} v{spec.version}")
            yield Static("Saving stores a new version; it is not applied (Enter in the list applies it).",
                         id="strategy-editor-hint", markup=False)
            with Horizontal(classes="strategy-editor-row"):
                yield Label("Name", classes="strategy-editor-label", markup=False)
                yield Input(self.default_name, id="strategy-name", compact=True)
            with Horizontal(classes="strategy-editor-row"):
                yield Label("Base", classes="strategy-editor-label", markup=False)
                yield Static(f"{spec.base} (read-only)", id="strategy-base", markup=False)
            for option, (values, default) in options.items():
                with Horizontal(classes="strategy-editor-row"):
                    yield Label(option, classes="strategy-editor-label", markup=False)
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

    @after_typed_keys
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
        self.post_message(self.Saved(result))

    def on_strategy_editor_saved(self, message: StrategyEditor.Saved) -> None:
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
