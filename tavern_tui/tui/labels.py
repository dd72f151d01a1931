"""Provides the plain-text labels the screens show (card spec, counts, relative times, marks)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the first screen paints before a chat's views load
    from tavern_tui.views import CharacterView, MessageView, OpeningView, PlaythroughView

_SPECS = {"chara_card_v1": "V1 card", "chara_card_v2": "V2 card", "chara_card_v3": "V3 card"}


def plural(count: int, word: str, many: str | None = None) -> str:
    """"1 greeting", "3 greetings"; `many` gives an irregular plural ("entries")."""
    return f"{count} {word}" if count == 1 else f"{count} {many or word + 's'}"


def spec_label(spec: str) -> str:
    """"V3 card" for "chara_card_v3"; unknown specs are shown as stored."""
    return _SPECS.get(spec, spec)


def character_summary(character: CharacterView) -> str:
    """The second line of a character's list entry: spec, greetings, lorebook entries."""
    parts = [spec_label(character.spec), plural(character.greetings, "greeting")]
    if character.book_entries is not None:
        parts.append(plural(character.book_entries, "lorebook entry", "lorebook entries"))
    return " · ".join(parts)


def relative_time(moment: datetime, now: datetime) -> str:
    """"just now", "5 min ago", "3 h ago", "yesterday", else the local date ("2025-03-14").

    Relative wording keeps lists readable and lets tests freeze `now`.
    """
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    seconds = (now - moment).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    if seconds < 2 * 86400:
        return "yesterday"
    return moment.astimezone().strftime("%Y-%m-%d")


def playthrough_summary(playthrough: PlaythroughView, now: datetime) -> str:
    """"#3 · 12 messages · 5 min ago" (" · archived" when it is)."""
    return (f"#{playthrough.id} · {plural(playthrough.message_count, 'message')} · "
            f"{relative_time(playthrough.updated_at, now)}" + (" · archived" if playthrough.archived else ""))


def draft_summary(draft: OpeningView, now: datetime) -> str:
    """"draft · greeting 2/4 · not played yet · 5 min ago": an opening draft in the home screen's
    list; with a first line typed and not sent, that line (cut) before the time."""
    greeting = (f"greeting {draft.greeting_index + 1}/{draft.greeting_count}" if draft.greeting_count
                else "no greeting")
    typed = f" · “{clip(draft.line, 40)}”" if draft.line.strip() else ""
    return f"draft · {greeting} · not played yet{typed} · {relative_time(draft.updated_at, now)}"


def summary_title(message: MessageView) -> str:
    """"summary of 240 messages, 12 Mar–14 Mar": what a summary node stands for (issue 16)."""
    meta = message.summary or {}
    covers = meta.get("covers") if isinstance(meta.get("covers"), int) else 0
    span = ""
    try:
        start, end = (datetime.fromisoformat(str(meta[k])) for k in ("from", "to"))
        first, last = f"{start.day} {start:%b}", f"{end.day} {end:%b}"
        span = f", {first}" if first == last else f", {first}–{last}"
    except (KeyError, ValueError):
        pass
    noun = "message" if covers == 1 else "messages"
    return f"summary of {covers} {noun}{span}"


HIDDEN_MARK = "hidden · not sent"
"""The mark of a message shown in the chat but never sent to the model."""


def message_mark(message: MessageView) -> str:
    """The subtle mark next to a speaker: why this message is not an ordinary reply or line.

    Returns:
        "hidden · not sent" for a line shown but never sent to the model (SillyTavern's ghost
        icon), "greeting" for a greeting, "stopped"/"error · <category>" for a partial reply,
        what `ORIGIN_WORDS` says for any other non-natural origin, "" for an ordinary message.
    """
    if message.summary is not None:
        return summary_title(message)
    if message.hidden:
        return HIDDEN_MARK
    if message.partial:
        if message.error_category == "interrupted":  # recovered after a kill: say why (issue 23 item 1)
            from tavern_tui.engine.events import INTERRUPTED_REASON  # the engine loads after the first paint

            return f"recovered · {INTERRUPTED_REASON}"
        if message.error_category:
            return f"error · {message.error_category}"
        return f"error: {message.error}" if message.error else "stopped"
    if message.natural:
        return ""
    if message.origin == "engine" and message.source == "opening":
        return "greeting"
    if message.source == "placeholder":
        return "demo"
    return ORIGIN_WORDS.get((message.role, message.origin), ORIGIN_WORDS.get(("", message.origin), message.origin))


ORIGIN_WORDS: dict[tuple[str, str], str] = {
    ("user", "agent"): "written by the model for you",  # an impersonation (F4)
    ("", "operator"): "edited by you",
    ("", "customer"): "written by you",
    ("", "agent"): "written by the model",
    ("", "engine"): "narrator",
}
"""How the chat says an origin that is not the role's natural one (issue 21 item 7), by (role,
origin), ("", origin) for any role. The seed's own names ("customer", "agent", "engine",
"operator") stay in `--json`, the trace and the tree."""


def message_classes(message: MessageView) -> list[str]:
    """The `-classes` a message box carries (role, origin when not natural, partial state)."""
    classes = [f"-{message.role}"]
    if message.summary is not None:
        classes.append("-summary")
    if message.tool_calls and not message.content.strip():
        classes.append("-calls-only")
    if not message.natural:
        classes.append(f"-origin-{message.origin}")
    if message.partial:
        classes.append("-partial")
        classes.append("-error" if message.error else "-stopped")
    return classes


def clip(text: str, width: int) -> str:
    """`text` on one line, cut to `width` characters with "…"."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1].rstrip(" ,;") + "…"


def compact_count(tokens: int) -> str:
    """18200 → "18.2k", 32768 → "32.8k", 32000 → "32k", 950 → "950"."""
    if tokens < 1000:
        return str(tokens)
    text = f"{tokens / 1000:.1f}".removesuffix(".0")
    return f"{text}k"


def event_label(ref: str | tuple[int, int]) -> str:
    """A log position people do not read as a clock time: "14:11" or (14, 11) → "session 14 ·
    event 11" (issue 21 item 7; `--json` and the trace keep the id as it is)."""
    if isinstance(ref, tuple):
        session, seq = ref
    else:
        session, _, seq = str(ref).partition(":")
        if not seq:
            return str(ref)
    return f"session {session} · event {seq}"


def markup_literal(text: str) -> str:
    """`text` made safe inside a Textual markup string: every "[" escaped, so a name such as
    "[Anon]" (which Textual's and Rich's `escape` leave alone) is shown, not read as a tag."""
    return text.replace("[", "\\[")


def speaking_as(templates: Iterable[str], user: str) -> tuple[str, ...]:
    """Hint templates holding "{user}" filled with the name the person writes as, escaped for
    markup (a composer's placeholder is markup): the chat's and an opening draft's hints."""
    return tuple(template.format(user=markup_literal(user)) for template in templates)
