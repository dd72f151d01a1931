"""Provides `SendControl`, the chat's composer side: Enter sends (or, while a reply streams,
queues; with nothing typed it answers the queued lines or the person's last line), a text that
looks like a secret is refused until Enter is pressed again on it, and the draft is kept per
playthrough in the database.

The chat screen holds one (`ChatScreen.sending`) and hands it the composer's Messages
(`TextArea.Changed`, `Composer.Submitted`); the control reaches the chat only through
`ChatHost` (the composer `prompt`, the strip `queue`, the controls `groups`, `replies` and
`inbox`, the card scripts' `allowance`, the service calls).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tavern_tui.engine.step import OPENING_SOURCE
from tavern_tui.errors import SecretRefused
from tavern_tui.tui.kept_text import KEEP_DELAY, KeptText

if TYPE_CHECKING:
    from tavern_tui.tui.screens.chat.host import ChatHost
    from tavern_tui.tui.widgets.inbox_queue import QueueEditor
    from tavern_tui.views import InboxItemView, MessageView

DRAFT_DELAY = KEEP_DELAY
"""Seconds of quiet before the composer's draft is written to the database (read at each change)."""


def draft_keeper(chat: Any, after: Callable[[str], object] | None = None) -> KeptText:
    """The chat's `KeptText`: the composer's text kept as the playthrough's draft (`after`: runs
    in the same worker thread once it is kept, `KeptText`)."""
    return KeptText(chat, lambda text: chat.tavern.inbox.save_draft(chat.playthrough_id, text),
                    "Cannot keep the draft", delay=lambda: DRAFT_DELAY, after=after)


class SendControl:
    """What Enter does with the composer's text, and its draft.

    Args:
        chat: the chat screen (`ChatHost`).
    """

    def __init__(self, chat: ChatHost) -> None:
        self.chat = chat
        self.prompt_empty = True
        """The composer holds no text (ctrl+←/→ swipe then, else they move by word)."""
        self.confirmed_secret: str | None = None
        """A refused text that a second Enter on it sends anyway."""
        self.draft = draft_keeper(chat, after=self._build_ahead)
        """The composer's text, kept as the playthrough's draft; then its request built ahead."""

    def prompt_changed(self) -> None:
        """The composer's text changed: the swipe keys follow whether it is empty; the draft is kept."""
        empty = not self.chat.prompt.value
        if empty != self.prompt_empty:
            self.prompt_empty = empty
            self.chat.refresh_bindings()
        if self.chat.queue.editing is None:  # a queued item being edited is not the draft
            self.draft.changed(lambda: self.chat.queue.draft)  # (while an item is edited: the draft held aside)

    def _build_ahead(self, text: str) -> None:
        """In the draft's worker thread, once the text is kept (the person paused): build the
        request a send of it would make (`StepRunner.build_ahead`), so Enter sends it without
        building again. Only in a one-character chat with no reply under way and no queued line
        being edited; the service keeps the build only while nothing it read changes."""
        chat, text = self.chat, text.strip()
        if text and not chat.generating and chat.groups.group is None and chat.queue.editing is None:
            chat.tavern.steps.build_ahead(chat.playthrough_id, text)

    def save_draft(self) -> None:
        """Keep the composer's text as this playthrough's draft now (in a worker; a text holding a
        secret is not written, `InboxService.save_draft`)."""
        self.draft.save(self.chat.queue.draft)

    def keep_draft_on_close(self, strip: QueueEditor) -> None:
        """The chat is going away (another screen in its place, the app quitting): a draft save
        still pending is written now, in a thread the app waits for (`KeptText.close`). `strip`
        is the queue strip (the screen's widgets are no longer queried as it closes)."""
        self.draft.close(strip.draft)

    def submit(self, typed: str, *, steer: bool = False) -> None:
        """Enter (`steer`: alt+Enter or ctrl+t) on the composer's text `typed` (the composer has
        emptied itself): save a queued item's edit, send, queue while a reply streams, or with
        nothing typed answer what waits."""
        text = typed.strip()
        if self.chat.queue.editing is not None:
            self.chat.queue.save_edit(text)  # the strip posts the edit (or refuses an empty one)
            return
        if self.chat.generating and not text:
            return
        if not text and self.chat.queue.items:
            # Queued lines left over (a stopped reply, a restart, another window): answer them.
            self.chat.replies.start("send", self.chat.groups.queued_updates())
            return
        if not text and self.chat.groups.group is not None:  # the members go on by themselves
            self.chat.replies.start("generate", self.chat.groups.round_updates(""))
            return
        if not text:
            # As SillyTavern: an empty send after the person's last line (e.g. an impersonated
            # one) asks for the reply to it.
            chat = self.chat
            chat.call(chat.tavern.playthroughs.messages, chat.playthrough_id, last=1, title="Cannot read the chat",
                      then=self._reply_to_last)
            return
        allow = text == self.confirmed_secret  # Enter again on the same unchanged text
        try:  # on the loop on purpose: a text scan (no I/O), and a refusal must keep the prompt
            self.chat.tavern.playthroughs.check_message(text, allow_secrets=allow)
        except SecretRefused as exc:
            self.give_back(typed)  # a refused text stays in the prompt
            self._refuse_secret(text, exc)
            return
        self.confirmed_secret = None
        if self.chat.generating:
            # A reply streams: the text waits in the durable inbox; the next step claims it.
            self.chat.call(self.chat.tavern.inbox.add, self.chat.playthrough_id, text, steer=steer, allow_secrets=allow,
                      title="Cannot queue the message", then=lambda _: self.chat.inbox.refresh())
            return
        # Another window or command replying here: the text is queued and goes once that settles.
        updates = self.chat.groups.round_updates(text, allow) if self.chat.groups.group is not None else (
            lambda: self.chat.tavern.steps.send_or_queue(self.chat.playthrough_id, text, steer=steer,
                                                    allow_secrets=allow, queued=self._queued_elsewhere))
        self.chat.allowance.then(lambda: self.chat.replies.start("send", updates, text))

    def give_back(self, text: str) -> None:
        """Put a text Enter took (the composer empties itself) back in the composer, before
        whatever was typed since."""
        self.chat.prompt.value = text + self.chat.prompt.value

    def _queued_elsewhere(self, item: InboxItemView) -> None:
        self.chat.notify(f"A reply is being written in this playthrough by another tavern window or command: your "
                    f"message is queued ({item.position}) and goes once it settles.", title="Queued", timeout=6)
        self.chat.inbox.refresh()

    def _reply_to_last(self, messages: list[MessageView]) -> None:
        if messages and messages[-1].role == "user" and not self.chat.generating:
            self.chat.replies.start("reply", lambda: self.chat.tavern.steps.reply(self.chat.playthrough_id))
        elif (not messages or messages[-1].source == OPENING_SOURCE) and not self.chat.generating:
            # An empty chat or just the greeting: the model may speak first (SillyTavern's Send
            # with an empty box is a normal generation; no turn of the person is made up).
            self.chat.replies.start("generate", lambda: self.chat.tavern.steps.generate(self.chat.playthrough_id))

    def _refuse_secret(self, text: str, refused: SecretRefused) -> None:
        """Say what kind of secret the message holds (never the secret) and, when the person may
        override, that Enter on the same text sends it anyway."""
        if refused.configured:
            self.confirmed_secret = None
            self.chat.notify("The message contains your configured provider API key. It is never stored or "
                        "sent to the model: remove it.", title="Not sent", severity="warning", timeout=10)
            return
        self.confirmed_secret = text if refused.overridable else None
        then = ("press Enter again on the same text to send it anyway, or remove it" if refused.overridable
                else "remove it")
        self.chat.notify(f"The message contains what looks like {secret_label(refused.kind)}; it was not sent: {then}.",
                    title="Not sent: possible secret", severity="warning", timeout=10)


def secret_label(kind: str) -> str:
    """A secret kind for people: "api_key" → "an API key", "jwt" → "a JWT"."""
    return {"api_key": "an API key", "bearer_token": "a bearer token", "private_key": "a private key",
            "jwt": "a JWT (JSON web token)", "password": "a password"}.get(kind, f"a {kind.replace('_', ' ')}")
