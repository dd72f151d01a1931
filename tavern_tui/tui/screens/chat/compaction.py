"""Provides `Compaction`, the chat screen's compaction: F10 summarises the oldest messages into
one summary node, F12 edits a summary, and a summary's originals are read when its box asks
(`MessageBox.OriginalsWanted`, on first expand) and handed back to it.

Mixed into `ChatScreen` (before `TavernScreen`); a `MessagePump`, so its `@on` handler is
collected. The compaction runs in the reply's worker group (`GENERATION`): one at a time with a
reply, and Esc stops it. The narrow interface to the chat: `tavern`, `playthrough_id`,
`transcript`, `status`, `generating`, `call`, `focused` and `_reload`.
"""

from __future__ import annotations

from textual import on, work
from textual.message_pump import MessagePump

from tavern_tui.tui.labels import summary_title
from tavern_tui.tui.modals.choose import ChooseScreen
from tavern_tui.tui.modals.edit_message import EditMessageScreen
from tavern_tui.tui.screens.chat.reply import GENERATION
from tavern_tui.tui.widgets.message_box import MessageBox


class Compaction(MessagePump):
    """Mixed into the chat screen: compacting the playthrough and editing its summaries."""

    def action_compact(self) -> None:
        """Summarise the oldest messages (all but the newest ten) into one summary node; the
        status line shows the progress; the transcript and the gauge follow."""
        if self.generating:
            return
        self.generating = True
        self.status.detail, self.status.state = "asking the model for a summary…", "compacting"
        self._compact()

    @work(exclusive=True, group=GENERATION, exit_on_error=False, description="compact the playthrough")
    async def _compact(self) -> None:
        # On the loop: the provider streams here (its client lives on this loop); the
        # service's reads and writes run in threads.
        state = {"part": ""}

        def progress(chars: int) -> None:
            self.status.detail = f"summary{state['part']}: {chars:,} chars"

        def on_part(done_messages: int, total: int) -> None:
            state["part"] = f" {done_messages:,}/{total:,}" if done_messages else ""

        try:
            done = await self.tavern.compaction.compact(self.playthrough_id, progress=progress, on_part=on_part)
        except Exception as exc:  # noqa: BLE001 - any failure is shown; nothing was stored
            self.status.state, self.status.detail = "error", f"compaction: {exc}"
            self.notify(str(exc), title="Cannot compact", severity="error", timeout=10)
        else:
            self.status.state, self.status.detail = "idle", ""
            self.notify(f"{done.covers} messages replaced by a summary (the originals stay in the log).",
                        title="Compacted")
        finally:
            self.generating = False
        self._reload()

    def action_edit_summary(self) -> None:
        """Edit a summary (a replacement of it; the earlier text stays in the log): the one that
        holds the focus (e.g. its originals' toggle, reached with Tab), else the only one shown,
        else the one chosen from a list of the summaries shown (newest highlighted)."""
        boxes = [b for b in self.transcript.boxes if b.view is not None and b.view.summary is not None]
        if not boxes:
            self.notify("No summary in this chat yet; compact first (F10).", title="Edit summary")
            return
        focused = self.focused
        held = next((a for a in (focused.ancestors_with_self if focused is not None else ())
                     if isinstance(a, MessageBox) and a in boxes), None)
        if held is not None or len(boxes) == 1:
            self._edit_summary(held or boxes[0])
            return

        def chosen(index: int | None) -> None:
            if index is not None:
                self._edit_summary(boxes[index])

        labels = [f"{summary_title(b.view)} · {b.view.content[:60]}" for b in boxes if b.view is not None]
        self.app.push_screen(ChooseScreen("Edit which summary?", labels, selected=len(labels) - 1), chosen)

    def _edit_summary(self, box: MessageBox) -> None:
        view = box.view
        if view is None:
            return

        def save(edited: str | None) -> None:
            if edited is not None:
                self.call(self.tavern.timeline.edit_message, self.playthrough_id, view.ref, edited,
                          title="Cannot edit the summary", then=lambda _: self._reload())

        self.app.push_screen(EditMessageScreen("Summary", view.content), save)

    @on(MessageBox.OriginalsWanted)
    def _show_originals(self, event: MessageBox.OriginalsWanted) -> None:
        """A summary's originals were asked for (its section expanded): read them in a worker and
        hand them to the box."""
        box = event.box
        if box.view is None:
            return
        ref = box.view.ref
        self.call(self.tavern.compaction.replaced_views, self.playthrough_id, title="Cannot read the originals",
                  then=lambda replaced: box.show_originals(replaced.get(ref, [])))
