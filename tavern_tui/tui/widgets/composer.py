"""Provides `Composer`, the chat's multi-line message editor (the queued items above it are
`inbox_queue.QueueEditor`'s).

Keys (issue 15; also in the README and the chat's help): Enter sends (queues while a reply
streams), shift+Enter or ctrl+J inserts a newline (a terminal that cannot tell shift+Enter from
Enter still delivers ctrl+J), alt+Enter sends as a steer, ↑ on an empty composer edits the last
queued item (or the last message sent). A paste keeps every line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from textual import events
from textual.binding import Binding
from textual.content import Content
from textual.message import Message
from textual.widgets import TextArea

NEWLINE_KEYS = ("ctrl+j", "shift+enter", "newline")
"""Keys that insert a newline ("newline" is how some terminals' LF arrives)."""

ALT_DIGITS = ("inverted_exclamation_mark", "trade_mark_sign", "pound_sign", "cent_sign", "infinity",
              "section_sign", "pilcrow_sign", "bullet", "ª")
"""The keys Textual reads for alt+1…9 from a terminal that sends Esc and the digit (xterm, tmux,
most Linux terminals): it takes them for macOS's Option characters ¡ ™ £ ¢ ∞ § ¶ • ª
(`textual._ansi_sequences`), so a binding on alt+N never fires there, and a text area takes
the character before any binding on its screen."""

STEER_KEYS = ("alt+enter", "ctrl+t")
"""Keys that send the text as a steer (next step of the running turn): ctrl+T where the terminal
folds alt+Enter into Enter (ESC CR, as tmux and most terminals without the kitty keyboard
protocol send it; Textual then reports plain Enter)."""


class Composer(TextArea, inherit_bindings=False):
    """A multi-line editor: grows with its text up to `max-height`, then scrolls.

    Posts `Composer.Submitted` on Enter (steer False) or alt+Enter (steer True),
    `Composer.EditPrevious` on ↑ when empty or on its first line while an item is being edited,
    and `Composer.MemberKey` on alt+N as a terminal sends it, when empty in a group chat.
    `value` reads and writes the text (what `Input.value` was) and `cursor_position` is the
    cursor's offset in it. Given `hints` (placeholders, longest first), it shows the longest that
    fits its width, so a narrow terminal gets a shorter hint rather than one cut mid-sentence.

    CSS (`DEFAULT_CSS`): auto height between 3 and 8 rows (6 lines of text inside its border).
    """

    # TextArea's keys minus those the chat screen owns: F6 (strategy), F7 (trace) and page
    # up/down (the transcript), which TextArea binds to select-line, select-all and cursor paging.
    BINDINGS = [b for b in TextArea.BINDINGS
                if not isinstance(b, Binding) or not set(b.key.split(",")) & {"f6", "f7", "pageup", "pagedown"}]

    HELP_KEYS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("enter", "Send (while a reply streams: queue the line; on an empty box: send what is queued, "
                  "or have the model speak first)"),
        (" ".join(STEER_KEYS), "Queue the line as a steer (taken at the next step boundary)"),
        (" ".join(k for k in NEWLINE_KEYS if k != "newline"),  # "newline": how some terminals send ctrl+J
         "New line (shift+Enter where the terminal tells it from Enter)"),
        ("↑", "On an empty box: edit the last queued line, or your last sent message"),
    )
    """The keys `_on_key` handles itself (not bindings: they must act in the order typed), for the
    help screen (`help.help_rows`), which lists them first under the composer's group."""

    DEFAULT_CSS = """
    Composer {
        height: auto;
        min-height: 3;
        max-height: 8;
    }
    """

    @dataclass
    class Submitted(Message):
        """Enter (or alt+Enter) on the composer: `text` as typed (not stripped). The composer is
        emptied as this is posted, so keys typed before the screen handles it start the next
        message instead of joining (or being cleared with) this one; a screen that refuses the
        text puts it back."""

        composer: Composer
        text: str
        steer: bool = False

        @property
        def control(self) -> Composer:
            """The composer (for `@on(..., "#id")`)."""
            return self.composer

    @dataclass
    class MemberKey(Message):
        """alt+`number` (1-9) as the terminal sent it (`ALT_DIGITS`), on the empty composer while
        `member_keys` is set (a group chat: member `number` replies now)."""

        composer: Composer
        number: int

        @property
        def control(self) -> Composer:
            """The composer (for `@on(..., "#id")`)."""
            return self.composer

    @dataclass
    class EditPrevious(Message):
        """↑ with nothing typed (or on the first line of a queued item being edited)."""

        composer: Composer

        @property
        def control(self) -> Composer:
            """The composer (for `@on(..., "#id")`)."""
            return self.composer

    def __init__(self, *, placeholder: str = "", hints: Sequence[str] = (), id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__("", soft_wrap=True, tab_behavior="focus", show_line_numbers=False, compact=False,
                         placeholder=placeholder, id=id, classes=classes)
        self.editing_first_line_up = False
        self.member_keys = False
        """When True (a group chat), alt+1…9 as a terminal sends them post `MemberKey` on the empty
        composer instead of typing ¡ ™ £ …; with text typed they stay characters."""
        """When True, ↑ on the first line posts EditPrevious (`QueueEditor` sets it while a queued item is edited)."""
        self._hints: tuple[str, ...] = ()
        if hints:
            self.hints = hints

    @property
    def hints(self) -> tuple[str, ...]:
        """The placeholders to choose from, longest first (markup, as `placeholder`): the one shown
        is the longest that fits the composer's width (the last when none does)."""
        return self._hints

    @hints.setter
    def hints(self, hints: Sequence[str]) -> None:
        self._hints = tuple(hints)
        self._fit_hint()

    def _fit_hint(self) -> None:
        if not self._hints:
            return
        width = self.scrollable_content_region.width
        self.placeholder = next((hint for hint in self._hints if Content.from_markup(hint).cell_length <= width),
                                self._hints[-1])

    def on_resize(self, event: events.Resize) -> None:
        """Show the longest hint that fits the new width."""
        self._fit_hint()

    @property
    def value(self) -> str:
        """The text (as `Input.value`)."""
        return self.text

    @value.setter
    def value(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    @property
    def cursor_position(self) -> int:
        """The cursor's offset in `value` (characters; a newline counts one)."""
        row, column = self.cursor_location
        return sum(len(line) + 1 for line in self.document.lines[:row]) + column

    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        if key == "enter" or key in STEER_KEYS:
            self._handled(event)
            text = self.text
            if text:
                self.clear()
            self.post_message(self.Submitted(self, text, steer=key != "enter"))
            return
        if key in NEWLINE_KEYS:
            self._handled(event)
            self.insert("\n")
            return
        if self.member_keys and key in ALT_DIGITS and not self.text:
            self._handled(event)
            self.post_message(self.MemberKey(self, ALT_DIGITS.index(key) + 1))
            return
        if key == "up" and (not self.text or (self.editing_first_line_up and self.cursor_location[0] == 0)):
            self._handled(event)
            self.post_message(self.EditPrevious(self))
            return
        await super()._on_key(event)

    @staticmethod
    def _handled(event: events.Key) -> None:
        event.stop()
        event.prevent_default()

