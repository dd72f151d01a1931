"""Provides `CardScreen` (ctrl+k on the home screen): a character's whole card, every field,
creator notes and tags shown (marked "not sent": spec_v2 keeps them out of prompts); Enter edits
a field as a new revision of the card (the imported file stays); a archives or brings the
character back (issue 20 item 5)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static, TextArea
from textual.widgets.option_list import Option

from tavern_tui.tui.labels import clip
from tavern_tui.tui.screens.base import TavernScreen
from tavern_tui.tui.typed_first import after_typed_keys
from tavern_tui.tui.widgets.fit_footer import FitFooter
from tavern_tui.tui.widgets.screen_title import ScreenTitle
from tavern_tui.views import CARD_TEXT_FIELDS, PROMPT_FIELDS, CardView

if TYPE_CHECKING:
    from tavern_tui.service import Tavern

FIELD_LABELS = {"name": "Name", "description": "Description", "personality": "Personality", "scenario": "Scenario",
                "first_mes": "First message", "mes_example": "Example messages", "creator_notes": "Creator notes",
                "system_prompt": "System prompt", "post_history_instructions": "Post-history instructions",
                "creator": "Creator", "character_version": "Version", "tags": "Tags",
                "alternate_greetings": "Alternate greetings", "character_book": "Lorebook"}
"""How the card screen names each field (the card's own key is shown beside it)."""

ROWS = (*CARD_TEXT_FIELDS, "alternate_greetings", "tags", "character_book")
"""The rows of the field list, in spec order."""


def field_text(card: CardView, field: str) -> str:
    """A field's value as the screen shows and edits it: text as is, tags comma-separated,
    alternate greetings as a JSON list, the lorebook as a line about it."""
    if field == "tags":
        return ", ".join(card.tags)
    if field == "alternate_greetings":
        return json.dumps(list(card.alternate_greetings), ensure_ascii=False, indent=1)
    if field == "character_book":
        return ("(none)" if card.book is None else
                f"{card.book[0]}: {card.book[1]} entries. Enter opens it in the world-book pane to edit its entries.")
    return card.fields.get(field, "")


class FieldEditor(ModalScreen[str | None]):
    """A multi-line editor of one card field: ctrl+s answers the text (empty is allowed), Esc None."""

    DEFAULT_CSS = """
    FieldEditor { align: center middle; background: $background 60%; }
    FieldEditor #field-box { width: 90%; height: 70%; border: round $accent; padding: 0 1; background: $surface; }
    FieldEditor #field-text { height: 1fr; }
    FieldEditor #field-hint { color: $text-muted; height: 1; }
    """

    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="field.save", priority=True),
        Binding("escape", "cancel", "Cancel", id="field.cancel"),
    ]

    def __init__(self, title: str, text: str, hint: str) -> None:
        super().__init__()
        self._title, self._text, self._hint = title, text, hint

    def compose(self) -> ComposeResult:
        with Vertical(id="field-box") as box:
            box.border_title = Content(self._title)  # a str is markup
            yield TextArea(self._text, id="field-text", soft_wrap=True)
            yield Static(self._hint, id="field-hint", markup=False)

    def on_mount(self) -> None:
        area = self.query_one(TextArea)
        area.focus()
        area.move_cursor(area.document.end)  # typing goes after what is there

    @after_typed_keys
    def action_save(self) -> None:
        """Answer the text (unchanged text counts as a cancel)."""
        text = self.query_one(TextArea).text
        self.dismiss(None if text == self._text else text)

    def action_cancel(self) -> None:
        """No change."""
        self.dismiss(None)


class CardScreen(TavernScreen[None]):
    """One character's card: the fields (left) and the highlighted one in full (right).

    Args:
        character_id: the character shown.
    """

    DEFAULT_CSS = """
    CardScreen #card-panes { height: 1fr; }
    CardScreen #card-fields { width: 36; }
    CardScreen.-narrow #card-fields { width: 34; }
    CardScreen #card-value-box { width: 1fr; }
    CardScreen #card-note { height: auto; color: $text-muted; padding: 0 1; }
    CardScreen #card-value { padding: 0 1; }
    """

    BINDINGS = [
        Binding("escape", "back", "Back", id="card.back"),
        Binding("e", "edit_field", "Edit", id="card.edit", tooltip="Edit the highlighted field (a new revision)"),
        Binding("a", "archive", "Archive", id="card.archive",
                tooltip="Hide the character from the lists (nothing is deleted), or bring it back"),
    ]

    def __init__(self, tavern: Tavern, character_id: int) -> None:
        super().__init__(tavern)
        self.character_id = character_id
        self.card: CardView | None = None
        """The card as last read."""

    def compose(self) -> ComposeResult:
        yield ScreenTitle("", id="card-title", markup=False)
        with Horizontal(id="card-panes"):
            fields = OptionList(id="card-fields", classes="pane", markup=False)
            fields.border_title = "Fields"
            yield fields
            with Vertical(id="card-value-box", classes="pane"):
                yield Static("", id="card-note", markup=False)
                with VerticalScroll(id="card-scroll"):
                    yield Static("", id="card-value", markup=False)
        yield FitFooter()

    def on_mount(self) -> None:
        self.query_one("#card-fields", OptionList).focus()
        self._read()

    def _read(self, keep: str | None = None) -> None:
        self.call(self.tavern.library.card_view, self.character_id, title="Cannot read the card",
                  then=lambda card: self._show(card, keep), failed=lambda _: self.dismiss())

    def _show(self, card: CardView, keep: str | None) -> None:
        self.card = card
        c = card.character
        revision = f" · revision {c.revision}" if c.revision else " · as imported"
        self.query_one("#card-title", Static).update(
            f"{c.name} · {c.spec} {card.spec_version} · from {c.source_name}{revision}"
            + (" · archived" if c.archived else "") + " · Enter or e edits a field")
        listing = self.query_one("#card-fields", OptionList)
        options = []
        for field in ROWS:
            prompt = Text(FIELD_LABELS[field], style="bold")
            if field not in PROMPT_FIELDS and field not in ("name", "character_book"):
                prompt.append(" · not sent", style="dim italic")
            value = field_text(card, field)
            # One line of preview, cut to the list's width (the value pane shows it whole).
            prompt.append("\n" + (clip(value, 26 if self.has_class("-narrow") else 28) or "(empty)"), style="dim")
            options.append(Option(prompt, id=field))
        listing.set_options(options)
        listing.highlighted = ROWS.index(keep) if keep in ROWS else 0
        self._show_field()

    @property
    def field(self) -> str | None:
        """The field under the list's cursor."""
        option = self.query_one("#card-fields", OptionList).highlighted_option
        return option.id if option is not None else None

    @on(OptionList.OptionHighlighted, "#card-fields")
    def _show_field(self) -> None:
        field = self.field
        if self.card is None or field is None:
            return
        notes = {
            "creator_notes": "Shown to you, never sent to the model (spec_v2).",
            "tags": "For finding characters (type #tag on the home screen); never sent.",
            "creator": "Never sent.", "character_version": "Never sent.",
            "name": "{{char}} in every prompt.",
            "alternate_greetings": "Swipes of the first message (a JSON list of texts when edited).",
            "character_book": "The card's own lorebook: it applies in every chat with this character.",
        }
        self.query_one("#card-note", Static).update(f"{FIELD_LABELS[field]} ({field}) · "
                                                    + notes.get(field, "Sent to the model as part of the card."))
        self.query_one("#card-value", Static).update(field_text(self.card, field) or "(empty)")

    @on(OptionList.OptionSelected, "#card-fields")
    def _selected(self) -> None:
        self.action_edit_field()

    def action_edit_field(self) -> None:
        """Edit the highlighted field; ctrl+s stores the card as a new revision."""
        field, card = self.field, self.card
        if field is None or card is None:
            return
        if field == "character_book":
            if card.book is None:
                self.notify("This card has no lorebook of its own.", title="Lorebook", severity="warning")
                return
            from tavern_tui.tui.screens.lore import LoreScreen

            # The world-book pane on this card's own book: a saved entry is a new revision of the card.
            self.app.push_screen(LoreScreen(self.tavern, character_id=self.character_id),
                                 lambda _: self._read(keep="character_book"))
            return
        hint = {"tags": "comma-separated · ctrl+s saves (a new revision) · Esc cancels",
                "alternate_greetings": "a JSON list of texts · ctrl+s saves (a new revision) · Esc cancels"}.get(
            field, "ctrl+s saves (a new revision; the imported file stays) · Esc cancels")
        revision = card.character.revision

        def edited(text: str | None) -> None:
            if text is None:
                return
            try:
                value = self._parse(field, text)
            except ValueError as exc:
                self.notify(str(exc), title="Not saved", severity="error")
                return
            self.call(self.tavern.library.edit_card, self.character_id, {field: value}, expected_revision=revision,
                      title="Cannot save the card", then=lambda view: self._saved(view.revision, field))

        self.app.push_screen(FieldEditor(f"{card.character.name} · {FIELD_LABELS[field]}", field_text(card, field),
                                         hint), edited)

    @staticmethod
    def _parse(field: str, text: str) -> object:
        if field == "tags":
            return [t.strip() for t in text.split(",") if t.strip()]
        if field == "alternate_greetings":
            try:
                value = json.loads(text or "[]")
            except json.JSONDecodeError as exc:
                raise ValueError(f"alternate greetings: not a JSON list ({exc.msg}, line {exc.lineno})") from exc
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError("alternate greetings: a JSON list of texts, e.g. [\"Hello\", \"Hi\"]")
            return value
        return text

    def _saved(self, revision: int, field: str) -> None:
        self.notify(f"{FIELD_LABELS[field]} saved: the card is at revision {revision}; chats use it from "
                    "their next step.", title="Card")
        self._read(keep=field)

    def action_archive(self) -> None:
        """Archive the character (after a yes) or bring it back."""
        card = self.card
        if card is None:
            return
        if card.character.archived:
            self.call(self.tavern.library.archive_character, self.character_id, False,
                      title="Cannot unarchive the character", then=lambda _: self._archived(False))
            return
        from tavern_tui.tui.modals.confirm import ConfirmScreen

        def answered(yes: bool | None) -> None:
            if yes:
                self.call(self.tavern.library.archive_character, self.character_id, True,
                          title="Cannot archive the character", then=lambda _: self._archived(True))

        self.app.push_screen(ConfirmScreen(f"Archive {card.character.name}?\n\nThe character leaves the lists; "
                                           "nothing is deleted (its card, chats and drafts stay). ctrl+u on the "
                                           "home screen lists archived ones.", confirm="Archive"), answered)

    def _archived(self, archived: bool) -> None:
        name = self.card.character.name if self.card else "The character"
        self.notify(f"{name} " + ("archived." if archived else "is back in the lists."), title="Archive")
        self._read(keep=self.field)

    def action_back(self) -> None:
        """Back to the home screen (it re-reads the lists)."""
        self.dismiss(None)
