"""The home screen's rows and labels: a character's entry in the characters list and its card
pane text, a playthrough's entry in the playthroughs list ("#3 · 2,000 messages · 5 min ago"),
and which characters the typed filter keeps. Pure text, no widgets or service calls."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text

from tavern_tui.tui.labels import character_summary, relative_time
from tavern_tui.views import CharacterView, PlaythroughView

DRAFT_PREFIX = "d"
"""Option ids of opening drafts in the playthroughs list start with it (playthroughs are bare ids)."""

DESCRIPTION_LIMIT = 400
"""Characters of a card's description the card pane shows before cutting it with "…"."""


def character_matches(character: CharacterView, needle: str) -> bool:
    """Whether the home filter `needle` (casefolded, stripped) keeps the character: its name,
    creator or a tag holds it; "#word" matches tags only (a tag starting with it)."""
    if not needle:
        return True
    if needle.startswith("#") and len(needle) > 1:  # tags only (SillyTavern filters by tag apart)
        return any(tag.casefold().startswith(needle[1:]) for tag in character.tags)
    return any(needle in text.casefold() for text in (character.name, character.creator or "", *character.tags))


def character_prompt(character: CharacterView, label: str | None = None) -> Text:
    """The character's entry in the characters list: its name (or `label`, for names shared by
    several characters), marked when archived, then its summary, dimmed."""
    prompt = Text(label or character.name, style="bold")
    if character.archived:
        prompt.append(" · archived", style="dim italic")
    prompt.append("\n" + character_summary(character), style="dim")
    return prompt


def character_details(character: CharacterView) -> str:
    """The card pane's text for a character: its file, creator, tags, then its description
    (on one line, cut at `DESCRIPTION_LIMIT`)."""
    lines = [f"from {character.source_name}"]
    if character.creator:
        lines.append(f"by {character.creator}")
    if character.tags:
        lines.append("tags: " + ", ".join(character.tags))
    description = " ".join(character.description.split())
    if description:
        lines.append("")
        lines.append(description if len(description) <= DESCRIPTION_LIMIT
                     else description[:DESCRIPTION_LIMIT - 1].rstrip() + "…")
    return "\n".join(lines)


def playthrough_prompt(playthrough: PlaythroughView, now: datetime) -> Text:
    """The playthrough's entry in the playthroughs list: its title (issue 20 item 4: given, else
    the first line, else the date), then what was played and, for an imported chat, its names."""
    prompt = Text(playthrough.chat_title, style="bold")
    prompt.append("\n" + played_summary(playthrough, now), style="dim")
    names = names_line(playthrough)
    if names:
        prompt.append("\n" + names, style="dim")
    return prompt


def played_summary(playthrough: PlaythroughView, now: datetime) -> str:
    """"#3 · 2,000 messages · 1,989 summarised · 5 min ago": what was played (a summary's
    originals counted, not the summary), and how much of it a summary now stands for."""
    played = playthrough.played_count or playthrough.message_count
    parts = [f"#{playthrough.id}", f"{played:,} message{'' if played == 1 else 's'}"]
    if playthrough.summarised_count:
        parts.append(f"{playthrough.summarised_count:,} summarised")
    parts.append(relative_time(playthrough.updated_at, now))
    if playthrough.archived:
        parts.append("archived")
    return " · ".join(parts)


def names_line(playthrough: PlaythroughView) -> str:
    """"you play as Ada (imported lines: User) · ctrl+y" for an imported chat whose own name for
    the person is not the one new lines get; "" otherwise."""
    imported = playthrough.imported_user
    if not imported or imported == playthrough.user_name:
        return ""
    return f"you play as {playthrough.user_name} (imported lines: {imported}) · ctrl+y changes"
