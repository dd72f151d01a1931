"""Provides `CompactionControl`, the chat's compaction: F10 summarises the oldest messages into
one summary node, F12 edits a summary, and a summary's originals are read when its box asks
(`MessageBox.OriginalsWanted`, on first expand) and handed back to it.

The chat screen holds one (`ChatScreen.compaction`) and hands it the keys and the box's Message;
the control reaches the chat only through `ChatHost`. The compaction runs as an async worker on
the screen in the reply's group (`GENERATION`): one at a time with a reply, and Esc stops it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from tavern_tui.tui.labels import summary_title
from tavern_tui.tui.modals.choose import ChooseScreen
from tavern_tui.tui.modals.edit_message import EditMessageScreen
from tavern_tui.tui.screens.chat.reply import GENERATION
from tavern_tui.tui.widgets.message_box import MessageBox

if TYPE_CHECKING:
    from tavern_tui.tui.screens.chat.host import ChatHost
    from tavern_tui.views import MessageView


def kept_parts(done: int, stopped: str) -> str:
    """What a compaction that did not finish left: `done` messages of the range were summarised
    by the parts recorded before it stopped (`CompactionService.compact`: each part is a whole
    summary node, kept), or nothing was. `stopped` begins the sentence ("Stopped")."""
    if done <= 0:
        return f"{stopped} before any part was summarised: nothing changed."
    return (f"{stopped} after {done:,} of the oldest messages were summarised: that summary is kept (F12 edits it, "
            "the originals stay in the log); F10 compacts the rest.")


class CompactionControl:
    """Compacting the playthrough and editing its summaries.

    Args:
        chat: the chat screen (`ChatHost`).
    """

    def __init__(self, chat: ChatHost) -> None:
        self.chat = chat

    def compact(self) -> None:
        """Summarise the oldest messages (all but the newest ten) into one summary node; the
        status line shows the progress; the transcript and the gauge follow. Nothing while a
        reply streams."""
        chat = self.chat
        if chat.generating:
            return
        chat.generating = True
        chat.status.detail, chat.status.state = "asking the model for a summary…", "compacting"
        chat.run_worker(self._compact(), group=GENERATION, exclusive=True, exit_on_error=False,
                        description="compact the playthrough")

    async def _compact(self) -> None:
        # On the loop: the provider streams here (its client lives on this loop); the
        # service's reads and writes run in threads.
        chat, status = self.chat, self.chat.status
        part, summarised = "", 0  # the part's progress as shown; messages summarised by the parts before

        def progress(chars: int) -> None:
            status.detail = f"summary{part}: {chars:,} chars"

        def on_part(done_messages: int, total: int) -> None:
            nonlocal part, summarised
            part = f" {done_messages:,}/{total:,}" if done_messages else ""
            summarised = done_messages

        try:
            done = await chat.tavern.compaction.compact(chat.playthrough_id, progress=progress, on_part=on_part)
        except asyncio.CancelledError:  # Esc: the parts already recorded stay (each a whole summary)
            status.state, status.detail = "idle", "compaction stopped"
            chat.notify(kept_parts(summarised, "Stopped"), title="Compaction stopped", timeout=10)
            raise
        except Exception as exc:  # noqa: BLE001 - any failure is shown; a part that failed was not stored
            status.state, status.detail = "error", f"compaction: {exc}"
            chat.notify(f"{exc}\n{kept_parts(summarised, 'It stopped')}", title="Cannot compact",
                        severity="error", timeout=10)
        else:
            status.state, status.detail = "idle", ""
            chat.notify(f"{done.covers} messages replaced by a summary (the originals stay in the log).",
                        title="Compacted")
        finally:
            chat.generating = False
        chat.reload()

    def edit_summary(self) -> None:
        """Edit a summary (a replacement of it; the earlier text stays in the log): the one that
        holds the focus (e.g. its originals' toggle, reached with Tab), else the only one shown,
        else the one chosen from a list of the summaries shown (newest highlighted). With none
        shown (in a long chat the window may not reach them), the playthrough's summaries are
        read and offered the same way."""
        chat = self.chat
        boxes = [b for b in chat.transcript.boxes if b.view is not None and b.view.summary is not None]
        if not boxes:
            pid, playthroughs = chat.playthrough_id, chat.tavern.playthroughs
            chat.call(lambda: [m for m in playthroughs.messages(pid) if m.summary is not None],
                      title="Cannot read the summaries", then=self._choose_summary)
            return
        focused = chat.focused
        held = next((a for a in (focused.ancestors_with_self if focused is not None else ())
                     if isinstance(a, MessageBox) and a in boxes), None)
        if held is not None and held.view is not None:
            self._edit_summary(held.view)
            return
        self._choose_summary([b.view for b in boxes if b.view is not None])

    def _choose_summary(self, summaries: list[MessageView]) -> None:
        """Edit the only one of `summaries`, else the one chosen (newest highlighted); none: say so."""
        chat = self.chat
        if not summaries:
            chat.notify("No summary in this chat yet; compact first (F10).", title="Edit summary")
            return
        if len(summaries) == 1:
            self._edit_summary(summaries[0])
            return

        def chosen(index: int | None) -> None:
            if index is not None:
                self._edit_summary(summaries[index])

        labels = [f"{summary_title(view)} · {view.content[:60]}" for view in summaries]
        chat.app.push_screen(ChooseScreen("Edit which summary?", labels, selected=len(labels) - 1), chosen)

    def _edit_summary(self, view: MessageView) -> None:
        chat = self.chat

        def save(edited: str | None) -> None:
            if edited is not None:
                chat.call(chat.tavern.timeline.edit_message, chat.playthrough_id, view.ref, edited,
                          title="Cannot edit the summary", then=lambda _: chat.reload())

        chat.app.push_screen(EditMessageScreen("Summary", view.content), save)

    def show_originals(self, box: MessageBox) -> None:
        """A summary's originals were asked for (its section expanded): read them in a worker and
        hand them to the box."""
        if box.view is None:
            return
        ref, chat = box.view.ref, self.chat
        chat.call(chat.tavern.compaction.replaced_views, chat.playthrough_id, title="Cannot read the originals",
                  then=lambda replaced: box.show_originals(replaced.get(ref, [])))
