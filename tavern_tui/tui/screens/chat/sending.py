"""Provides `ChatSending`, the chat screen's composer side: Enter sends (or, while a reply
streams, queues; with nothing typed it answers the queued lines or the person's last line), a
text that looks like a secret is refused until Enter is pressed again on it, and the draft is
kept per playthrough in the database.

Mixed into `ChatScreen` (before `TavernScreen`); a `MessagePump`, so its `@on` handlers are
collected. The narrow interface to the chat: `tavern`, `playthrough_id`, `prompt`, `queue`
(the `QueueEditor`: `editing`, `items`, `draft`, `save_edit`), `generating`, `call`,
`groups` (`GroupControl`: `group`, `round_updates`, `queued_updates`), `replies` (`ReplyControl`), `inbox`
(`QueueControl`), `_allowance`, `app`, and the state the screen's `__init__` sets: `_prompt_empty`,
`_draft` (`draft_keeper`) and `_confirmed_secret`.
"""

from __future__ import annotations

from typing import Any

from textual import on
from textual.message_pump import MessagePump
from textual.widgets import TextArea

from tavern_tui.engine.step import OPENING_SOURCE
from tavern_tui.errors import SecretRefused
from tavern_tui.tui.kept_text import KEEP_DELAY, KeptText
from tavern_tui.tui.widgets.composer import Composer
from tavern_tui.tui.widgets.inbox_queue import QueueEditor
from tavern_tui.views import InboxItemView, MessageView

DRAFT_DELAY = KEEP_DELAY
"""Seconds of quiet before the composer's draft is written to the database (read at each change)."""


def draft_keeper(chat: Any) -> KeptText:
    """The chat's `KeptText`: the composer's text kept as the playthrough's draft."""
    return KeptText(chat, lambda text: chat.tavern.inbox.save_draft(chat.playthrough_id, text),
                    "Cannot keep the draft", delay=lambda: DRAFT_DELAY)


class ChatSending(MessagePump):
    """Mixed into the chat screen: what Enter does with the composer's text, and its draft."""

    @on(TextArea.Changed, "#prompt")
    def _prompt_changed(self, event: TextArea.Changed) -> None:
        empty = not self.prompt.value
        if empty != self._prompt_empty:
            self._prompt_empty = empty
            self.refresh_bindings()
        if self.queue.editing is None:  # a queued item being edited is not the draft
            self._draft.changed(lambda: self.queue.draft)  # (while an item is edited: the draft held aside)

    def save_draft(self) -> None:
        """Keep the composer's text as this playthrough's draft now (in a worker; a text holding a
        secret is not written, `InboxService.save_draft`)."""
        self._draft.save(self.queue.draft)

    def _keep_draft_on_close(self, strip: QueueEditor) -> None:
        """The chat is going away (another screen in its place, the app quitting): a draft save
        still pending is written now, in a thread the app waits for (`KeptText.close`). `strip`
        is the queue strip (the screen's widgets are no longer queried as it closes)."""
        self._draft.close(strip.draft)

    @on(Composer.Submitted, "#prompt")
    def _submitted(self, event: Composer.Submitted) -> None:
        text = event.text.strip()
        if self.queue.editing is not None:
            self.queue.save_edit(text)  # the strip posts the edit (or refuses an empty one)
            return
        if self.generating and not text:
            return
        if not text and self.queue.items:
            # Queued lines left over (a stopped reply, a restart, another window): answer them.
            self.replies.start("send", self.groups.queued_updates())
            return
        if not text and self.groups.group is not None:  # the members go on by themselves
            self.replies.start("generate", self.groups.round_updates(""))
            return
        if not text:
            # As SillyTavern: an empty send after the person's last line (e.g. an impersonated
            # one) asks for the reply to it.
            self.call(self.tavern.playthroughs.messages, self.playthrough_id, last=1, title="Cannot read the chat",
                      then=self._reply_to_last)
            return
        allow = text == self._confirmed_secret  # Enter again on the same unchanged text
        try:  # on the loop on purpose: a text scan (no I/O), and a refusal must keep the prompt
            self.tavern.playthroughs.check_message(text, allow_secrets=allow)
        except SecretRefused as exc:
            self.give_back(event.text)  # a refused text stays in the prompt
            self._refuse_secret(text, exc)
            return
        self._confirmed_secret = None
        if self.generating:
            # A reply streams: the text waits in the durable inbox; the next step claims it.
            self.call(self.tavern.inbox.add, self.playthrough_id, text, steer=event.steer, allow_secrets=allow,
                      title="Cannot queue the message", then=lambda _: self.inbox.refresh())
            return
        # Another window or command replying here: the text is queued and goes once that settles.
        updates = self.groups.round_updates(text, allow) if self.groups.group is not None else (
            lambda: self.tavern.steps.send_or_queue(self.playthrough_id, text, steer=event.steer,
                                                    allow_secrets=allow, queued=self._queued_elsewhere))
        self._allowance.then(lambda: self.replies.start("send", updates, text))

    def give_back(self, text: str) -> None:
        """Put a text Enter took (the composer empties itself) back in the composer, before
        whatever was typed since."""
        self.prompt.value = text + self.prompt.value

    def _queued_elsewhere(self, item: InboxItemView) -> None:
        self.notify(f"A reply is being written in this playthrough by another tavern window or command: your "
                    f"message is queued ({item.position}) and goes once it settles.", title="Queued", timeout=6)
        self.inbox.refresh()

    def _reply_to_last(self, messages: list[MessageView]) -> None:
        if messages and messages[-1].role == "user" and not self.generating:
            self.replies.start("reply", lambda: self.tavern.steps.reply(self.playthrough_id))
        elif (not messages or messages[-1].source == OPENING_SOURCE) and not self.generating:
            # An empty chat or just the greeting: the model may speak first (SillyTavern's Send
            # with an empty box is a normal generation; no turn of the person is made up).
            self.replies.start("generate", lambda: self.tavern.steps.generate(self.playthrough_id))

    def _refuse_secret(self, text: str, refused: SecretRefused) -> None:
        """Say what kind of secret the message holds (never the secret) and, when the person may
        override, that Enter on the same text sends it anyway."""
        if refused.configured:
            self._confirmed_secret = None
            self.notify("The message contains your configured provider API key. It is never stored or "
                        "sent to the model: remove it.", title="Not sent", severity="warning", timeout=10)
            return
        self._confirmed_secret = text if refused.overridable else None
        then = ("press Enter again on the same text to send it anyway, or remove it" if refused.overridable
                else "remove it")
        self.notify(f"The message contains what looks like {secret_label(refused.kind)}; it was not sent: {then}.",
                    title="Not sent: possible secret", severity="warning", timeout=10)


def secret_label(kind: str) -> str:
    """A secret kind for people: "api_key" → "an API key", "jwt" → "a JWT"."""
    return {"api_key": "an API key", "bearer_token": "a bearer token", "private_key": "a private key",
            "jwt": "a JWT (JSON web token)", "password": "a password"}.get(kind, f"a {kind.replace('_', ' ')}")
