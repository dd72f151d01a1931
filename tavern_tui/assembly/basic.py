"""Provides the basic (compatibility) prompt: the whole character rendered into one system section.

Order and wording follow SillyTavern's default chat-completion preset
(default/content/presets/openai/Default.json): main prompt, description, personality
("[{{char}}'s personality: …]"), scenario ("[Circumstances and context of the dialogue: …]"),
then example dialogue under "[Example Chat]". A card's `system_prompt` replaces the main prompt;
`{{original}}` inside it stands for the main prompt it replaced (card spec V2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tavern_tui.assembly.macros import substitute_names
from tavern_tui.assembly.tokens import estimate_messages
from tavern_tui.engine.log import SurfaceMessage
from tavern_tui.engine.step import Assembly

DEFAULT_MAIN_PROMPT = "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."
PERSONALITY_FORMAT = "[{{char}}'s personality: {{personality}}]"
SCENARIO_FORMAT = "[Circumstances and context of the dialogue: {{scenario}}]"
EXAMPLE_CHAT_HEADER = "[Example Chat]"
_START = re.compile(r"<START>", re.IGNORECASE)
_ORIGINAL = re.compile(r"\{\{\s*original\s*\}\}", re.IGNORECASE)


def split_examples(mes_example: str) -> list[str]:
    """Split example dialogue into blocks on `<START>` (case-insensitive), trimmed, empty ones dropped.

    Rule: SillyTavern `parseMesExamples` (public/script.js): text before the first marker counts as
    a block when the text does not start with `<START>`; a lone `<START>` means no examples.
    """
    text = mes_example.strip()
    if not text:
        return []
    if not _START.match(text):
        text = "<START>\n" + text
    return [block.strip() for block in _START.split(text)[1:] if block.strip()]


def _main_prompt(card_system_prompt: str) -> str:
    if not card_system_prompt.strip():
        return DEFAULT_MAIN_PROMPT
    # {{original}} is filled at its first occurrence only; later ones become "" (SillyTavern).
    parts = _ORIGINAL.split(card_system_prompt)
    if len(parts) == 1:
        return card_system_prompt
    return parts[0] + DEFAULT_MAIN_PROMPT + "".join(parts[1:])


def build_system_prompt(card: dict[str, Any], char: str, user: str) -> str:
    """Render a card's `data` into the system section text.

    Args:
        card: the normalised card `data` (description, personality, scenario, mes_example, system_prompt).
        char: the character's name for `{{char}}`.
        user: the person's name for `{{user}}`.

    Returns:
        Sections joined by blank lines; empty fields are left out.
    """
    sections = [_main_prompt(str(card.get("system_prompt") or ""))]
    description = str(card.get("description") or "").strip()
    if description:
        sections.append(description)
    personality = str(card.get("personality") or "").strip()
    if personality:
        sections.append(PERSONALITY_FORMAT.replace("{{personality}}", personality))
    scenario = str(card.get("scenario") or "").strip()
    if scenario:
        sections.append(SCENARIO_FORMAT.replace("{{scenario}}", scenario))
    for block in split_examples(str(card.get("mes_example") or "")):
        sections.append(f"{EXAMPLE_CHAT_HEADER}\n{block}")
    return substitute_names("\n\n".join(sections), char, user)


@dataclass(frozen=True)
class BasicAssembler:
    """The compatibility assembler: a fixed system section from the card, no call config.

    Attributes:
        card: normalised card `data`.
        char: character name; user: the person's name.
        meta: resource facts recorded in the request header (character id, spec …).
    """

    card: dict[str, Any]
    char: str
    user: str
    meta: dict[str, Any]

    def __call__(self, history: list[SurfaceMessage], claimed: list[str]) -> Assembly:
        """Build this step's system section; the token estimate covers history + claimed input."""
        system = build_system_prompt(self.card, self.char, self.user)
        messages = [{"content": system}] + [m.to_request() for m in history if m.source != "system-prompt"]
        messages += [{"content": text} for text in claimed]
        return Assembly(system=system, meta={**self.meta, "strategy": "compat", "estimated_prompt_tokens": estimate_messages(messages)})
