"""Provides the basic (compatibility) prompt: the whole character rendered into one system section.

Order and wording follow SillyTavern's default chat-completion preset
(default/content/presets/openai/Default.json): main prompt, description, personality
("[{{char}}'s personality: …]"), scenario ("[Circumstances and context of the dialogue: …]"),
then example dialogue under "[Example Chat]". A card's `system_prompt` replaces the main prompt;
`{{original}}` inside it stands for the main prompt it replaced (card spec V2).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tavern_tui.assembly.worldinfo import CardFacts, WorldInfoStep, decisions_record, scan_context
from tavern_tui.engine.log import SYSTEM_PROMPT_SOURCE, SurfaceMessage, request_messages
from tavern_tui.engine.step import Assembly
from tavern_tui.lore.result import Buckets
from tavern_tui.lore.timed import TimedState
from tavern_tui.text.names import substitute_names
from tavern_tui.text.tokens import DEFAULT_COUNTER, estimate_messages

DEFAULT_MAIN_PROMPT = "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."
PERSONALITY_FORMAT = "[{{char}}'s personality: {{personality}}]"
SCENARIO_FORMAT = "[Circumstances and context of the dialogue: {{scenario}}]"
EXAMPLE_CHAT_HEADER = "[Example Chat]"
_START = re.compile(r"<START>", re.IGNORECASE)
_ORIGINAL = re.compile(r"\{\{\s*original\s*\}\}", re.IGNORECASE)


MEMORY_CONTEXT = "memory"
"""Context identifier of the memory snapshot (a user-role context message, origin engine)."""


def memory_context(memory: str) -> tuple[tuple[str, str], ...]:
    """The step's context entry for a memory snapshot (none when empty)."""
    return ((MEMORY_CONTEXT, memory),) if memory.strip() else ()


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


def build_system_prompt(card: dict[str, Any], char: str, user: str, lore: Buckets | None = None,
                        persona: str = "") -> str:
    """Render a card's `data` (and activated world info) into the system section text.

    Order follows SillyTavern's default prompt order: main, world info before, description,
    personality, scenario, world info after, example dialogue (world-info example blocks
    before/after the card's). World info @depth entries have no chat position in this
    compatibility rendering, so they close the section, deepest first; author's-note positions
    are dropped as SillyTavern drops them when the Author's Note is off (format-digest §b.3).

    Args:
        card: the normalised card `data` (description, personality, scenario, mes_example, system_prompt).
        char: the character's name for `{{char}}`.
        user: the person's name for `{{user}}`.
        lore: activated world info, or None.
        persona: the rendered persona section ("" = none): its own section directly after the
            character text (main, description, personality, scenario; DESIGN.md, persona).

    Returns:
        Sections joined by blank lines; empty fields are left out.
    """
    lore = lore or Buckets()
    sections = [_main_prompt(str(card.get("system_prompt") or ""))]
    if lore.before.strip():
        sections.append(lore.before)
    description = str(card.get("description") or "").strip()
    if description:
        sections.append(description)
    personality = str(card.get("personality") or "").strip()
    if personality:
        sections.append(PERSONALITY_FORMAT.replace("{{personality}}", personality))
    scenario = str(card.get("scenario") or "").strip()
    if scenario:
        sections.append(SCENARIO_FORMAT.replace("{{scenario}}", scenario))
    if persona.strip():
        sections.append(persona.strip())
    if lore.after.strip():
        sections.append(lore.after)
    blocks = [*lore.examples_top, *split_examples(str(card.get("mes_example") or "")), *lore.examples_bottom]
    for block in blocks:
        sections.append(f"{EXAMPLE_CHAT_HEADER}\n{block.strip()}")
    for (_depth, _role), text in sorted(lore.at_depth.items(), key=lambda item: -item[0][0]):
        if text.strip():
            sections.append(text)
    return substitute_names("\n\n".join(sections), char, user)


@dataclass(frozen=True)
class BasicAssembler:
    """The compatibility assembler: the card and activated world info in one system section.

    Attributes:
        card: normalised card `data`.
        char: character name; user: the person's name.
        meta: resource facts recorded in the request header (character id, spec …).
        world_info: the playthrough's books and settings, or None for no world info.
        facts: what world info scans besides the chat (card fields, filter facts).
        timed_state: the branch's world-info timed effects before this step.
        generation_type: the step's SillyTavern generation type (world-info `triggers`).
        config: call parameters to send (a bound preset's), never history.
        persona: the rendered persona section ("" = none).
        memory: the memory snapshot, enveloped as data ("" = none): delivered as a context
            message before the input, never in the system section (ADR-0079: memory is data).
        limit: the request's context (`assembly.fit.ContextLimit`); None = no fitting.
        count: the token counter the fit uses.
    """

    card: dict[str, Any]
    char: str
    user: str
    meta: dict[str, Any]
    world_info: WorldInfoStep | None = None
    facts: CardFacts | None = None
    timed_state: TimedState = field(default_factory=TimedState)
    generation_type: str = "normal"
    config: dict[str, Any] = field(default_factory=dict)
    persona: str = ""
    memory: str = ""
    limit: Any = None
    count: Callable[[str], int] = DEFAULT_COUNTER

    def __call__(self, history: list[SurfaceMessage], claimed: list[str]) -> Assembly:
        """Build this step's system section: world info scans the history plus the claimed input
        (seed 000 §5); its decisions go to the request header, its timed effects to the branch."""
        meta = {**self.meta, "strategy": (self.meta.get("strategy_snapshot") or {}).get("name", "compat")}
        records = ()
        lore = None
        if self.world_info is not None and self.world_info.books:
            facts = self.facts or CardFacts(self.char, self.user)
            result = self.world_info.run(scan_context(history, claimed, facts, self.timed_state,
                                                      self.generation_type))
            lore = result.buckets
            meta["world_info"] = decisions_record(result)
            records = (self.world_info.state_event(result),)
        system = build_system_prompt(self.card, self.char, self.user, lore, self.persona)
        messages = [{"content": system}] + request_messages([m for m in history if m.source != SYSTEM_PROMPT_SOURCE])
        messages += [{"content": text} for text in claimed]
        meta["estimated_prompt_tokens"] = estimate_messages(messages)
        from tavern_tui.assembly.fit import fit_native  # here: fit → sillytavern → basic at import time

        return fit_native(Assembly(system=system, config=dict(self.config), meta=meta, records=records,
                                   context=memory_context(self.memory)), history, claimed, self.limit, self.count)
