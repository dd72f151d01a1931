"""Provides `DraftScreen`: an opening draft (issue 20 item 1), a playthrough not begun yet.

It shows the chosen greeting, drawn as the chat draws it (Markdown, single line breaks kept;
ctrl+←/→ swipe among the card's greetings, as on a chat's
greeting) and the selections the playthrough will start with; F6 previews the request the first
send would make (without history or input); F9 discards the draft (after a yes when a line is
typed); Esc goes back and keeps it,
with the first line typed so far (kept in the draft after a quiet moment and as the screen
closes: `KeptText`, as a chat keeps its unsent text).
Nothing is stored but the draft's own row until Enter sends the first line: then the draft
prepares its playthrough (`OpeningService.begin`, in a worker) and its chat opens and sends the
line; the playthrough is listed (and the draft gone) once the line is admitted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static, TextArea

from tavern_tui.errors import SecretRefused
from tavern_tui.scripts.panels import split_panels
from tavern_tui.tools import offer_line
from tavern_tui.tui.kept_text import KeptText, put_back
from tavern_tui.tui.labels import speaking_as
from tavern_tui.tui.messages import PlaythroughChosen
from tavern_tui.tui.modals.confirm import ConfirmScreen
from tavern_tui.tui.screens.base import TavernModal, TavernScreen
from tavern_tui.tui.screens.regex_allowance import ScriptAllowance
from tavern_tui.tui.widgets.chat_markdown import ChatRichMarkdown
from tavern_tui.tui.widgets.composer import Composer
from tavern_tui.tui.widgets.fit_footer import FitFooter, ProviderSource, ScreenKeys
from tavern_tui.tui.widgets.message_box import MessageBox
from tavern_tui.tui.widgets.screen_title import ScreenTitle
from tavern_tui.views import OpeningView, PlaythroughView

if TYPE_CHECKING:
    from tavern_tui.service import Tavern

_GREETING = Binding.Group("Greeting", compact=True)

DRAFT_PLACEHOLDER = "Write your first line as {user} · Enter starts the playthrough · Esc keeps the draft"
"""The composer's hint on an opening draft where there is room."""

DRAFT_PLACEHOLDERS = (
    DRAFT_PLACEHOLDER,
    "First line as {user} · Enter starts the playthrough · Esc keeps the draft",  # 80 columns
    "First line as {user} · Enter starts · Esc keeps the draft",
    "Your first line as {user}",
)
"""The opening draft's hints, longest first: the composer shows the longest that fits (`Composer.hints`)."""


def selections_line(draft: OpeningView) -> str:
    """"greeting 2/4 · preset-slots-first v1 · default preset · lore: Eldoria · as Rowan"."""
    greeting = (f"greeting {draft.greeting_index + 1}/{draft.greeting_count}" if draft.greeting_count
                else "no greeting")
    lore = f" · lore: {', '.join(draft.lore_names)}" if draft.lore_names else ""
    preset = f"preset {draft.preset_name}" if draft.preset_name else "default preset"
    return f"{greeting} · {draft.strategy} v{draft.strategy_version} · {preset}{lore} · as {draft.user_name}"


def greeting_text(shown: str) -> str:
    """A greeting as the draft shows it (the display scripts' text): a folded status page is its one line."""
    return "\n\n".join(f"▸ {part.title}" if part.is_panel else part.text for part in split_panels(shown))


def preview_text(preview: dict[str, Any]) -> str:
    """A draft preview as plain text: the header, the tools the request would carry (when some
    are configured), then each message with role and source."""
    lines = [f"PREVIEW (not sent) · strategy {preview.get('strategy')} · "
             f"~{int(preview.get('tokens', {}).get('total', 0)):,} tokens"]
    if preview.get("tools"):
        lines.append(f"tools offered: {offer_line(preview['tools'])}")
    for message in preview.get("messages", []):
        lines += ["", f"[{message.get('role')} · {message.get('source')}]", str(message.get("content") or "")]
    return "\n".join(lines)


class DraftPreview(TavernModal[None]):
    """The request a draft's first send would make (no history, no input); Esc closes it."""

    BINDINGS = [Binding("escape", "close", "Close", id="draft_preview.close")]

    def __init__(self, tavern: Tavern, text: str) -> None:
        super().__init__(tavern)
        self._text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="draft-preview", classes="pane"):
            yield Static(self._text, id="draft-preview-text", markup=False)
        yield Footer()

    def action_close(self) -> None:
        """Back to the draft."""
        self.dismiss()


class DraftScreen(TavernScreen[None]):
    """One opening draft: its greeting, its selections, and the composer for the first line.

    Args:
        tavern: the service.
        draft_id: the draft shown.
        typed: keys typed on the home screen while it was being opened (they go into the composer).
    """

    BINDINGS = [
        Binding("escape", "back", "Back (keep draft)", id="draft.back"),
        # One footer group ("^← ^→ Greeting", as the chat's Swipe): room at 80 columns for Preview.
        Binding("ctrl+left", "swipe(-1)", "Greeting ←", id="draft.swipe_left", priority=True, group=_GREETING),
        Binding("ctrl+right", "swipe(1)", "Greeting →", id="draft.swipe_right", priority=True, group=_GREETING),
        Binding("f6", "preview", "Preview", id="draft.preview"),
        Binding("f9", "discard", "Discard draft", id="draft.discard"),
    ]

    COMMANDS: ClassVar[set[ProviderSource]] = {ScreenKeys}

    FOOTER_DROP = ("quit", "discard")
    """Left out first on a narrow terminal (the palette and F1 still list them)."""

    DEFAULT_CSS = """
    DraftScreen #draft-greeting { height: 1fr; padding: 0 1; }
    DraftScreen #draft-selections { height: auto; padding: 0 1; color: $text-muted; }
    """

    prompt: Composer

    def __init__(self, tavern: Tavern, draft_id: int, *, typed: str = "") -> None:
        super().__init__(tavern)
        self.draft_id = draft_id
        self.draft: OpeningView | None = None
        self._typed = typed
        self._sending = False
        # The card's regex-script question comes before anything is sent: Enter waits for the answer.
        self._allowance = ScriptAllowance(self, allowed=self._scripts_allowed)
        self._checked = False
        self._line = KeptText(self, lambda text: self.tavern.openings.save_line(draft_id, text),
                              "Cannot keep the first line")
        self._line_shown = False  # the kept line is put back once, when the draft is first shown
        self._gone = False  # played or discarded: nothing is kept for it any more

    def compose(self) -> ComposeResult:
        yield ScreenTitle("", id="draft-title", markup=False)
        with VerticalScroll(id="draft-greeting", classes="pane"):
            yield Static("", id="draft-greeting-text", markup=False)
        yield Static("", id="draft-selections", markup=False)
        self.prompt = Composer(hints=speaking_as(DRAFT_PLACEHOLDERS, "you"), id="draft-prompt", classes="pane")
        yield self.prompt
        yield FitFooter(drop=self.FOOTER_DROP)

    def on_mount(self) -> None:
        self.prompt.focus()
        if self._typed:
            self.prompt.insert(self._typed)
        self.call(self.tavern.openings.draft, self.draft_id, title="Cannot open the draft", then=self._show,
                  failed=lambda _: self.dismiss())

    @on(TextArea.Changed, "#draft-prompt")
    def _line_changed(self) -> None:
        if not (self._sending or self._gone) and self._line_shown:
            self._line.changed(lambda: self.prompt.value)

    def on_unmount(self) -> None:
        if self._gone:
            self._line.cancel_wait()
        elif self._line_shown:
            self._line.close(self.prompt.value)

    def _show(self, draft: OpeningView) -> None:
        self.draft = draft
        if not self._line_shown:  # the kept first line, then whatever was typed while it opened
            self._line_shown = True
            shown = put_back(draft.line, self.prompt.value)
            if shown != self.prompt.value:
                self.prompt.value = shown
        self.query_one("#draft-title", ScreenTitle).update(
            # No draft number: the playthrough it becomes takes the next playthrough's number
            # ("draft #1" became "#2"), and drafts are the CLI's to list by number.
            f"{draft.character_name} · new playthrough (nothing is played until you send)")
        greeting = self.query_one("#draft-greeting", VerticalScroll)
        greeting.border_title = (f"Greeting {draft.greeting_index + 1}/{draft.greeting_count} · ctrl+←/→ swipes"
                                 if draft.greeting_count > 1 else "Greeting")
        self.query_one("#draft-greeting-text", Static).update(
            ChatRichMarkdown(draft.greeting) if draft.greeting else "(the card has no greeting)")
        self.query_one("#draft-selections", Static).update(selections_line(draft))
        self.prompt.hints = speaking_as(DRAFT_PLACEHOLDERS, draft.user_name)
        if draft.greeting:  # the card's display scripts (once allowed) decide how the greeting shows
            self._show_greeting(draft)
        if not self._checked:
            self._checked = True
            self._allowance.check(draft.character_id, draft.character_name)

    def _show_greeting(self, draft: OpeningView, done: Callable[[], None] | None = None) -> None:
        def shown(text: str) -> None:
            if self.draft is draft:  # not swiped meanwhile
                self.query_one("#draft-greeting-text", Static).update(ChatRichMarkdown(greeting_text(text)))
            if done is not None:
                done()

        self.call(self.tavern.scripts.shown_text, draft.character_id, draft.greeting, title="Cannot show the greeting",
                  severity="warning", then=shown, failed=lambda _: done() if done is not None else None)

    def _scripts_allowed(self, done: Callable[[], None]) -> None:
        if self.draft is not None and self.draft.greeting:
            self._show_greeting(self.draft, done)
        else:
            done()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "swipe":
            # None: the key falls through to the composer's word move while there is text.
            return True if not self.prompt.value else None
        return True

    def action_swipe(self, direction: int) -> None:
        """Show the card's next or previous greeting (wrapping), kept in the draft."""
        self.call(self.tavern.openings.swipe_greeting, self.draft_id, direction, title="Cannot swipe the greeting",
                  then=self._show)

    def action_preview(self) -> None:
        """Show the request the first send would make (no history, no input; nothing stored)."""
        self.call(self.tavern.steps.preview_draft, self.draft_id, title="Cannot preview the draft",
                  then=lambda shown: self.app.push_screen(DraftPreview(self.tavern, preview_text(shown))))

    def action_discard(self) -> None:
        """Remove the draft (nothing else was stored for it) and go back; with a line typed into
        it, after a yes (the line goes too)."""
        def gone(_: None) -> None:
            self._gone = True
            self.notify("Draft discarded.", timeout=3)
            self.dismiss()

        def discard(yes: bool | None = True) -> None:
            if yes:
                self.call(self.tavern.openings.discard, self.draft_id, title="Cannot discard the draft", then=gone)

        line = self.prompt.value.strip()
        if not line:
            discard()
            return
        shown = line if len(line) <= 120 else line[:119] + "…"
        self.app.push_screen(ConfirmScreen(f"Discard this draft and the line you typed?\n\n“{shown}”\n\n"
                                           "Esc keeps it (listed on the home screen).", confirm="Discard"), discard)

    def action_back(self) -> None:
        """Back to the home screen; the draft stays (listed there)."""
        self.dismiss()

    @on(Composer.Submitted, "#draft-prompt")
    def _submitted(self, event: Composer.Submitted) -> None:
        text = event.text.strip()
        if not text or self._sending:
            self.prompt.value = event.text + self.prompt.value
            return
        try:  # on the loop on purpose, as the chat does: a text scan, and a refusal keeps the text
            self.tavern.playthroughs.check_message(text)
        except SecretRefused as exc:
            self.prompt.value = event.text + self.prompt.value
            self.notify(str(exc), title="Not sent", severity="warning")
            return
        self._sending = True
        self._line.cancel_wait()  # the line goes with the first send (or comes back if refused)
        # Shown under the greeting now, as the chat shows a sent line: the playthrough is made and
        # its chat opened before the step starts (~0.4 s), and the person sees the line meanwhile.
        shown = MessageBox(self.draft.user_name if self.draft is not None else "you", text, classes="-user")
        greeting = self.query_one("#draft-greeting", VerticalScroll)
        greeting.mount(shown)
        greeting.scroll_end(animate=False)

        def refused(_: BaseException) -> None:
            self._sending = False
            shown.remove()
            self.prompt.value = event.text + self.prompt.value  # the draft and the line stay as they were

        # Held until the regex-script question is answered: the first request goes through the allowed scripts.
        self._allowance.then(lambda: self.call(self.tavern.openings.begin, self.draft_id, text,
                                               title="Cannot start the playthrough",
                                               then=lambda view: self._begun(view, text), failed=refused))

    def _begun(self, view: PlaythroughView, text: str) -> None:
        # The draft is a playthrough now: its chat replaces this screen and sends the line; what
        # was typed here since Enter (while the playthrough was made) goes into the chat's composer.
        self._gone = True
        self.app.post_message(PlaythroughChosen(view.id, typed=self.prompt.value, send=text))
        self.dismiss()
