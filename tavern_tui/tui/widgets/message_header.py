"""Provides `MessageHeader`, a message's one-line header: speaker, mark, and extras on the right.

One widget draws the three parts (component classes colour them), where a row of three labels
in a container would be four widgets: every layout pass of the chat screen visits each mounted
widget, and a reply that streams in lays the screen out about ten times a second, so the
header's widget count is paid per message per pass (performance-anchors §7 B5/B6).
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from tavern_tui.tui.widgets.member_colours import member_css


class MessageHeader(Widget):
    """The header row of a `MessageBox`: the speaker's name (bold, in the role's or the group
    member's colour), one space, the mark (italic; its colour says stopped / error / writing),
    and the extras (message number, time, tokens) right-aligned in the rest of the row.

    | component class | part |
    | --- | --- |
    | `message-header--speaker` | the speaker's name (`$speaker-character`, `-user`, `-system`, member colours) |
    | `message-header--mark` | the mark (`$mark-origin`; `$mark-stopped` / `$mark-error` when cut off) |
    | `message-header--extras` | the right-hand extras (`$text-muted`) |

    The colours follow the enclosing box's classes (`-user`, `-stopped`, `member-2` …): a class
    change restyles the component classes, which repaints the header.
    """

    COMPONENT_CLASSES = {"message-header--speaker", "message-header--mark", "message-header--extras"}

    DEFAULT_CSS = """
    MessageHeader { height: 1; }
    MessageHeader > .message-header--speaker { text-style: bold; color: $speaker-character; }
    MessageHeader > .message-header--mark { color: $mark-origin; text-style: italic; }
    MessageHeader > .message-header--extras { color: $text-muted; }
    """
    """The parts' default look; `BOX_CSS` (in the box's own stylesheet, as its selectors start
    with the box) colours them by the box's classes."""

    BOX_CSS = """
    MessageBox.-user MessageHeader > .message-header--speaker { color: $speaker-user; }
    MessageBox.-system MessageHeader > .message-header--speaker { color: $speaker-system; }
    """ + member_css("MessageBox.{cls} MessageHeader > .message-header--speaker") + """
    MessageBox.-stopped MessageHeader > .message-header--mark { color: $mark-stopped; text-style: bold; }
    MessageBox.-error MessageHeader > .message-header--mark { color: $mark-error; text-style: bold; }
    MessageBox.-streaming MessageHeader > .message-header--mark { color: $text-muted; text-style: italic; }
    """
    """Rules for `MessageBox.DEFAULT_CSS`: a widget's default CSS is scoped to it (Textual
    prefixes each selector that does not start with its own name), so rules that start with
    the box belong to the box's."""

    speaker: reactive[str] = reactive("")
    """The speaker's name as shown."""
    mark: reactive[str] = reactive("")
    """The mark after the name ("" for none)."""
    extras: reactive[str] = reactive("")
    """The right-hand extras ("" for none)."""

    def __init__(self, speaker: str, mark: str = "", *, classes: str = "message-header") -> None:
        super().__init__(classes=classes)
        self.set_reactive(MessageHeader.speaker, speaker)
        self.set_reactive(MessageHeader.mark, mark)

    def render(self) -> Text:
        """The row: name, a space, the mark, then the extras padded to the right edge (the
        name and mark win when the row is too narrow for all three)."""
        row = Text.assemble((self.speaker, self.get_component_rich_style("message-header--speaker")),
                            " ",
                            (self.mark, self.get_component_rich_style("message-header--mark")),
                            no_wrap=True, overflow="crop", end="")
        if self.extras:
            gap = self.size.width - cell_len(row.plain) - cell_len(self.extras)
            if gap >= 1:
                row.append(" " * gap)
                row.append(self.extras, self.get_component_rich_style("message-header--extras"))
        return row
