"""Provides `MemberStrip`: the one line above a group chat's composer naming its members, who is
muted, and who would speak next."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label

from tavern_tui.tui.widgets.member_colours import STRATEGY_NAMES, member_class, member_css
from tavern_tui.views import GroupView


def next_line(group: GroupView, upcoming: list[str] | None) -> str:
    """What the strip says about the next round of an empty line: the turn order by name, and for
    list and pooled order the members who would speak ("list order · next: Seraphina, Shodan").
    Natural order draws at random (no guess is shown); manual order waits to be asked (ctrl+b, which
    works in every terminal; alt+N does not reach an app in tmux)."""
    name = STRATEGY_NAMES.get(group.strategy, group.strategy)
    if group.strategy == "manual":
        return f"{name} · ctrl+b asks a member"
    if group.strategy == "natural" or upcoming is None:
        return name
    return f"{name} · next: {', '.join(upcoming) if upcoming else 'nobody'}"


class MemberStrip(Horizontal):
    """A group chat's members on one line, numbered as alt+1…alt+9 ask them, each in its speaker
    colour (`MEMBER_PALETTE`); a muted one dimmed and marked "muted". On the right: the turn order
    and who speaks next (`next_line`). Hidden outside a group chat.

    | child class | part |
    | --- | --- |
    | `member` with `member-1` … `member-5` | a member's number and name, in its colour |
    | `-muted` | a muted member (`$text-disabled`, struck through) |
    | `next` | the turn order and the next speakers (`$text-muted`) |
    """

    DEFAULT_CSS = """
    MemberStrip {
        height: 1;
        padding: 0 1;
        display: none;
        &.-group { display: block; }
    }
    MemberStrip .member { width: auto; margin-right: 2; text-style: bold; }
    """ + member_css("MemberStrip .{cls}") + """
    MemberStrip .member.-muted { color: $text-disabled; text-style: strike; }
    MemberStrip .next { width: 1fr; color: $text-muted; text-align: right; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.group: GroupView | None = None
        self.upcoming: list[str] | None = None
        """The members an empty line would have speak next (None: not known, or natural order)."""

    def compose(self) -> ComposeResult:
        if self.group is None:
            return
        for position, member in enumerate(self.group.members):
            label = f"{position + 1} {member.name}" + (" (muted)" if member.muted else "")
            yield Label(label, classes=f"member {member_class(position)}" + (" -muted" if member.muted else ""),
                        markup=False)
        yield Label(next_line(self.group, self.upcoming), classes="next", markup=False)

    async def show(self, group: GroupView | None, upcoming: list[str] | None = None) -> None:
        """Show `group`'s members (hidden when None) and `upcoming`, the next speakers' names."""
        self.group, self.upcoming = group, upcoming
        self.set_class(group is not None, "-group")
        await self.recompose()

    def text(self) -> str:
        """The strip's line as plain text (what tests and the help read)."""
        return "  ".join(str(label.content) for label in self.query(Label))
