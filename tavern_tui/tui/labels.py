"""Provides the plain-text labels the screens show (card spec, counts, relative times, marks)."""

from __future__ import annotations

from datetime import datetime, timezone

from tavern_tui.service import CharacterView, MessageView, PlaythroughView

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
        moment = moment.replace(tzinfo=timezone.utc)
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
    """"#3 · 12 messages · 5 min ago"."""
    return (f"#{playthrough.id} · {plural(playthrough.message_count, 'message')} · "
            f"{relative_time(playthrough.updated_at, now)}")


def message_mark(message: MessageView) -> str:
    """The subtle mark next to a speaker: why this message is not an ordinary reply or line.

    Returns:
        "opening" for a greeting, "stopped"/"error · <category>" for a partial reply, the origin name
        for any other non-natural origin, "" for an ordinary message.
    """
    if message.partial:
        if message.error_category:
            return f"error · {message.error_category}"
        return f"error: {message.error}" if message.error else "stopped"
    if message.natural:
        return ""
    if message.origin == "engine" and message.source == "opening":
        return "opening"
    if message.source == "placeholder":
        return "demo"
    return message.origin


def message_classes(message: MessageView) -> list[str]:
    """The `-classes` a message box carries (role, origin when not natural, partial state)."""
    classes = [f"-{message.role}"]
    if not message.natural:
        classes.append(f"-origin-{message.origin}")
    if message.partial:
        classes.append("-partial")
        classes.append("-error" if message.error else "-stopped")
    return classes
