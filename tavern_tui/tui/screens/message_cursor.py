"""Provides `MessageCursor`: a cursor onto any message of the chat and what can be done to it
(issue 21 item 3), kept apart from the chat screen so the transcript can change under it.

alt+↑ / alt+↓ move the cursor over the mounted message boxes (the first alt+↑ takes the newest)
and give the transcript the focus, so the action keys are plain letters: `e` edit, `d` delete
(hide, after a confirm), `b` new playthrough from here, `c` continue from here (roll back to it),
`[` / `]` the previous / next variant at that depth (a swipe there), `x` opens or closes its
sections (a tool call's arguments and result, reasoning), `y` copy the text (Textual's
clipboard, OSC 52), `t` the trace on the message's own request (`own_request`). Esc leaves the
cursor; the composer gets the focus back. While a reply streams the cursor moves over the settled
messages and `y` / `x` work; the keys that change the chat or open a pane say they wait for it.

Mixed into the chat screen: its eleven keys are the screen's own actions (the screen's other
parts are controls it holds, `chat.host`). The narrow interface to the chat:
`screen.transcript.boxes` (the mounted `MessageBox`es, each with `.view`), `screen.transcript`
(focusable), `screen.prompt`, `screen.playthrough_id`, `screen.tavern`, `screen.call` and
`screen.reload()`. Nothing here keeps a box beyond a key press: the cursor is the box's stored
ref, found again among the mounted boxes each time.
"""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.widgets import Collapsible

from tavern_tui.tui.messages import PlaythroughChosen
from tavern_tui.tui.modals.confirm import ConfirmScreen
from tavern_tui.tui.modals.edit_message import EditMessageScreen
from tavern_tui.tui.screens.trace import TraceScreen
from tavern_tui.views import MessageView

_GROUP = Binding.Group("Message")

CURSOR_BINDINGS = [
    Binding("alt+up", "cursor_move(-1)", "Message ↑", id="chat.cursor_up", show=False, group=_GROUP,
            priority=True, tooltip="Put the message cursor on the message above"),
    Binding("alt+down", "cursor_move(1)", "Message ↓", id="chat.cursor_down", show=False, group=_GROUP,
            priority=True, tooltip="Put the message cursor on the message below"),
    Binding("e", "cursor_edit", "Edit message", id="chat.cursor_edit", show=False, group=_GROUP),
    Binding("d", "cursor_delete", "Delete message", id="chat.cursor_delete", show=False, group=_GROUP,
            tooltip="Hide it from the chat (the original stays in the tree)"),
    Binding("b", "cursor_branch", "Branch from here", id="chat.cursor_branch", show=False, group=_GROUP,
            tooltip="A new playthrough that starts with the messages up to this one"),
    Binding("c", "cursor_continue", "Continue from here", id="chat.cursor_continue", show=False, group=_GROUP,
            tooltip="Roll back to this message; what followed stays a branch"),
    Binding("left_square_bracket", "cursor_swipe(-1)", "Previous variant", id="chat.cursor_swipe_left",
            show=False, group=_GROUP),
    Binding("right_square_bracket", "cursor_swipe(1)", "Next variant", id="chat.cursor_swipe_right",
            show=False, group=_GROUP),
    Binding("y", "cursor_copy", "Copy message", id="chat.cursor_copy", show=False, group=_GROUP,
            tooltip="Copy its text to the clipboard (OSC 52)"),
    Binding("x", "cursor_expand", "Expand / collapse", id="chat.cursor_expand", show=False, group=_GROUP,
            tooltip="Open or close the message's sections: a tool call's arguments and result, reasoning, "
                    "a summary's originals"),
    Binding("t", "cursor_trace", "Message's request", id="chat.cursor_trace", show=False, group=_GROUP,
            tooltip="The trace, on the request that wrote this message (that swipe)"),
    Binding("escape", "cursor_leave", "Leave the message cursor", id="chat.cursor_leave", show=False,
            group=_GROUP),
]
"""The cursor's keys; the chat lists them in its BINDINGS, before its own Esc."""

CURSOR_ACTIONS = frozenset(b.action.split("(", 1)[0] for b in CURSOR_BINDINGS)

CURSOR_HINT = ("e edit · d delete · b branch · c continue here · [ ] variants · y copy · x expand · t request · "
               "Esc leaves")
"""Said the first time a chat's cursor is put on a message (its keys are not in the footer), short and
briefly: the toast stands over the transcript's foot, where the message under the cursor often is
(a trial at 80x24: 8 lines over it). F1 lists each key in full."""


def variant_ref(tavern: Any, playthrough_id: int, ref: tuple[int, int]) -> tuple[int, int]:
    """The variant (tree node) a shown message is: itself, or for an edited message the variant
    on the active path that the chat shows under the edit's ref. Call it in a worker."""
    view = tavern.timeline.timeline(playthrough_id)
    if ref in view.siblings:
        return ref
    for candidate in reversed(view.path):
        try:
            if tavern.timeline.shown_ref(playthrough_id, candidate) == ref:
                return candidate
        except Exception:  # noqa: BLE001, S112 - a variant the head hides: not this one
            continue
    return ref


def own_request(tavern: Any, playthrough_id: int, ref: tuple[int, int], role: str) -> str | None:
    """The trace id ("session:seq") of the request a shown message came from: the request whose
    reply is the message's variant (`variant_ref`: an edited message counts as the variant it
    rewrote); for a person's line (role user, no request wrote it), the first request sent after
    it in its session, which carried it. None when there is none. Call it in a worker."""
    variant = variant_ref(tavern, playthrough_id, ref)
    traces = tavern.traces.traces(playthrough_id)
    wanted = f"{variant[0]}:{variant[1]}"
    for trace in traces:
        if trace.reply == wanted:
            return str(trace.id)
    if role == "user":
        after = [t for t in traces if t.session_id == variant[0] and _seq(t.id) > variant[1]]
        if after:
            return str(min(after, key=lambda t: _seq(t.id)).id)
    return None


def _seq(trace_id: str) -> int:
    return int(trace_id.partition(":")[2] or 0)


class MessageCursor:
    """Mixed into the chat screen (before `TavernScreen`): the cursor state and its actions."""

    cursor_ref: tuple[int, int] | None = None
    """The ref of the message under the cursor, or None (no cursor)."""

    _cursor_hinted = False  # the cursor's keys were said in this chat (`CURSOR_HINT`)

    # -- the narrow interface ---------------------------------------------------------------

    def _cursor_boxes(self) -> list[Any]:
        return [b for b in self.transcript.boxes if b.view is not None]  # type: ignore[attr-defined]

    def cursor_box(self) -> Any | None:
        """The mounted box under the cursor, or None."""
        return next((b for b in self._cursor_boxes() if b.view.ref == self.cursor_ref), None)

    @property
    def cursor_message(self) -> MessageView | None:
        """The stored message under the cursor, or None."""
        box = self.cursor_box()
        return None if box is None else box.view

    def cursor_allows(self, action: str) -> bool:
        """`check_action` for the cursor's keys: the moves always, the letters only while the
        cursor is on a message. While a reply streams the cursor moves over the settled messages
        (the streaming one has no stored view yet) and copies or opens them; the keys that change
        the chat say they wait for the reply to settle rather than letting the letter land in the
        composer (`_settled_message`)."""
        if action == "cursor_move":
            return bool(self._cursor_boxes())
        return self.cursor_box() is not None

    def _settled_message(self) -> MessageView | None:
        """The message under the cursor for a key that changes the chat or opens another pane;
        None (said, while a reply streams: the step is still writing the chat) or no cursor."""
        message = self.cursor_message
        if message is not None and getattr(self, "generating", False):
            self.notify("That works once the reply has settled (Esc leaves the cursor, Esc again stops the reply).",  # type: ignore[attr-defined]
                        title="A reply is streaming", timeout=4)
            return None
        return message

    def _show_cursor(self, box: Any | None) -> None:
        for other in self.transcript.boxes:  # type: ignore[attr-defined]
            other.set_class(other is box, "-cursor")
        if box is None:
            self.cursor_ref = None
            self.prompt.focus()  # type: ignore[attr-defined]
            return
        if self.cursor_ref is None and not self._cursor_hinted:  # the keys are not in the footer: said once a chat
            self._cursor_hinted = True
            self.notify(CURSOR_HINT, title="Message cursor", timeout=5)  # type: ignore[attr-defined]
        self.cursor_ref = box.view.ref
        self.transcript.focus()  # type: ignore[attr-defined]
        self.transcript.scroll_to_widget(box, animate=False)  # type: ignore[attr-defined]

    # -- actions ------------------------------------------------------------------------------

    def action_cursor_move(self, step: int) -> None:
        """alt+↑ / alt+↓: the message above / below (the first alt+↑ takes the newest settled one)."""
        boxes = self._cursor_boxes()
        if not boxes:
            return
        current = self.cursor_box()
        if current is None:
            index = len(boxes) - 1 if step < 0 else 0
        else:
            index = boxes.index(current) + step
            if index >= len(boxes):  # past the newest: back to the composer
                self._show_cursor(None)
                return
            index = max(0, index)
        self._show_cursor(boxes[index])

    def action_cursor_leave(self) -> None:
        """Esc: no cursor; the composer has the focus again."""
        self._show_cursor(None)

    def action_cursor_copy(self) -> None:
        """Copy the message's text (Textual's `copy_to_clipboard`, OSC 52: works over ssh and tmux
        with `set-clipboard on`)."""
        message = self.cursor_message
        if message is not None:
            self.app.copy_to_clipboard(message.content)  # type: ignore[attr-defined]
            self.notify(f"Copied {len(message.content):,} characters of {message.speaker}'s message.",  # type: ignore[attr-defined]
                        timeout=3)

    def action_cursor_edit(self) -> None:
        """Rewrite the message (a surface replacement; the original stays in the log)."""
        message = self._settled_message()
        if message is None:
            return
        pid, tavern = self.playthrough_id, self.tavern  # type: ignore[attr-defined]
        at = self._cursor_boxes().index(self.cursor_box())

        def save(edited: str | None) -> None:
            if edited is not None and edited != message.content:  # the cursor stays on the edited message
                self.call(tavern.timeline.edit_message, pid, message.ref, edited,  # type: ignore[attr-defined]
                          title="Cannot edit", then=lambda _: self._cursor_done(keep_at=at))

        self.app.push_screen(EditMessageScreen(message.speaker, message.content), save)  # type: ignore[attr-defined]

    def action_cursor_delete(self) -> None:
        """Ask, then hide the message from the chat (the original stays in the tree)."""
        message = self._settled_message()
        if message is None:
            return
        pid, tavern = self.playthrough_id, self.tavern  # type: ignore[attr-defined]
        preview = message.content if len(message.content) <= 200 else message.content[:199] + "…"

        def answered(yes: bool | None) -> None:
            if yes:
                self.call(tavern.timeline.delete_message, pid, message.ref,  # type: ignore[attr-defined]
                          title="Cannot delete", then=lambda _: self._cursor_done())

        self.app.push_screen(ConfirmScreen(  # type: ignore[attr-defined]
            f"Delete this message from the chat?\n\n{message.speaker}: “{preview}”\n\n"
            "It is hidden from the chat; the original stays in the tree (F5).", confirm="Delete"), answered)

    def action_cursor_continue(self) -> None:
        """Continue from this message: the chat rolls back to it; what followed stays a branch."""
        message = self._settled_message()
        if message is None:
            return
        pid, tavern, ref = self.playthrough_id, self.tavern, message.ref  # type: ignore[attr-defined]
        self.call(lambda: tavern.timeline.rollback(pid, variant_ref(tavern, pid, ref)),  # type: ignore[attr-defined]
                  title="Cannot continue from there", then=lambda _: self._cursor_done())

    def action_cursor_branch(self) -> None:
        """A new playthrough starting with the messages up to this one; it opens in place of this chat."""
        message = self._settled_message()
        if message is None:
            return

        def branched(created: Any) -> None:
            self.notify(f"Playthrough #{created.id} starts here (#{self.playthrough_id} is unchanged).",  # type: ignore[attr-defined]
                        title="New playthrough")
            self.dismiss()  # type: ignore[attr-defined]
            self.app.post_message(PlaythroughChosen(created.id))  # type: ignore[attr-defined]

        pid, tavern, ref = self.playthrough_id, self.tavern, message.ref  # type: ignore[attr-defined]
        self.call(lambda: tavern.timeline.branch_playthrough(pid, variant_ref(tavern, pid, ref)),  # type: ignore[attr-defined]
                  title="Cannot branch", then=branched)

    def action_cursor_swipe(self, step: int) -> None:
        """Show the previous / next variant at this depth (a swipe of any message, not only the last)."""
        message = self._settled_message()
        if message is None:
            return
        pid, tavern, ref = self.playthrough_id, self.tavern, message.ref  # type: ignore[attr-defined]

        def pick() -> tuple[int, int] | None:
            ref_here = variant_ref(tavern, pid, ref)
            siblings = tavern.timeline.timeline(pid).siblings.get(ref_here)
            if not siblings or len(siblings) < 2:
                return None
            index = siblings.index(ref_here) + step
            if not 0 <= index < len(siblings):
                return None
            tavern.timeline.select_variant(pid, siblings[index])
            return siblings[index]

        def picked(chosen: tuple[int, int] | None) -> None:
            if chosen is None:
                self.notify("No other variant there.", timeout=2)  # type: ignore[attr-defined]
            else:
                self._cursor_done(keep=chosen)

        self.call(pick, title="Cannot show another variant", then=picked)  # type: ignore[attr-defined]

    def action_cursor_expand(self) -> None:
        """Open the message's collapsed sections (a tool line's arguments and result, its
        reasoning, a summary's originals), or close them when any is open."""
        box = self.cursor_box()
        if box is None:
            return
        sections = list(box.query(Collapsible))
        if not sections:
            self.notify("Nothing to expand in this message.", timeout=2)  # type: ignore[attr-defined]
            return
        collapse = any(not section.collapsed for section in sections)
        for section in sections:
            section.collapsed = collapse

    def action_cursor_trace(self) -> None:
        """Open the trace on this message's own request: the one that produced the reply (that
        swipe, or for an edited reply the variant it rewrote), for a line of the person's the
        request it was first sent in. A message no request made or carried (a greeting, a line
        not sent yet) says so and opens on the newest request."""
        message = self._settled_message()
        if message is None:
            return
        pid, tavern, ref, role = self.playthrough_id, self.tavern, message.ref, message.role  # type: ignore[attr-defined]
        self.call(lambda: own_request(tavern, pid, ref, role), title="Cannot find the message's request",  # type: ignore[attr-defined]
                  then=lambda found: self._open_trace(found, message))

    def _open_trace(self, trace_id: str | None, message: MessageView) -> None:
        if trace_id is None:
            self.notify(f"No request wrote or sent {message.speaker}'s message (a greeting, or not sent yet): "  # type: ignore[attr-defined]
                        "showing the newest request.", title="Trace", timeout=5)
        self.app.push_screen(TraceScreen(self.tavern, self.playthrough_id, select=trace_id),  # type: ignore[attr-defined]
                             self._trace_closed)  # type: ignore[attr-defined]

    def _cursor_done(self, keep: tuple[int, int] | None = None, keep_at: int | None = None) -> None:
        """After an action: re-read the chat; the cursor stays on `keep` when given, or on the
        message at `keep_at` among those shown (an edited message, shown under a new ref), else
        it goes."""
        if keep_at is not None:
            self.call(self.read_state, title="Cannot read the chat",  # type: ignore[attr-defined]
                      then=lambda state: self._shown_with_cursor(state, keep_at))
            return
        if keep is None:
            self._show_cursor(None)
        else:
            self.cursor_ref = keep
        self.reload()  # type: ignore[attr-defined]

    async def _shown_with_cursor(self, state: Any, index: int) -> None:
        """Show the chat as re-read, then the cursor on the message at `index` (none if it is gone)."""
        await self.show_state(state)  # type: ignore[attr-defined]
        boxes = self._cursor_boxes()
        self._show_cursor(boxes[index] if 0 <= index < len(boxes) else None)
