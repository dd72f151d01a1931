"""Provides the basic (compatibility) prompt: the whole character rendered into one system section.

Order and wording follow SillyTavern's default chat-completion preset
(default/content/presets/openai/Default.json): main prompt, description, personality
("[{{char}}'s personality: …]"), scenario ("[Circumstances and context of the dialogue: …]"),
then example dialogue under "[Example Chat]". A card's `system_prompt` replaces the main prompt;
`{{original}}` inside it stands for the main prompt it replaced (card spec V2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tavern_tui.assembly.attribution import join_spans, locate, span
from tavern_tui.assembly.worldinfo import CardFacts, WorldInfoStep, decisions_record, scan_context
from tavern_tui.engine.log import SYSTEM_PROMPT_SOURCE, SurfaceMessage, request_messages
from tavern_tui.engine.step import Assembly
from tavern_tui.lore.result import Buckets
from tavern_tui.lore.timed import TimedState
from tavern_tui.text.names import substitute_names
from tavern_tui.text.tokens import estimate_messages

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
    return system_prompt_parts(card, char, user, lore, persona)[0]


def system_prompt_parts(card: dict[str, Any], char: str, user: str, lore: Buckets | None = None,
                        persona: str = "") -> tuple[str, list[dict[str, Any]]]:
    """`build_system_prompt`'s text and its parts (`assembly.attribution`): main, each world-info
    entry (book, uid, title), the card fields, persona, each example block and world info @depth,
    with offsets into the text. Names are substituted per section, which equals substituting the
    joined text (a name macro never spans the blank line between sections)."""
    lore = lore or Buckets()
    sections: list[tuple[list[tuple[dict[str, Any], str]], str]] = []  # (pieces inside, the section's text)

    def add(kind: str, text: str, bucket: str = "", **detail: Any) -> None:
        whole = span(kind, 0, 0, **detail)
        keep = {k: v for k, v in detail.items() if k in ("identifier", "depth") and v is not None}
        pieces = [(dict(d, **keep), t) for d, t in _entries(lore, bucket)] if bucket else []
        sections.append((pieces or [(whole, text)], text))

    add("preset", _main_prompt(str(card.get("system_prompt") or "")), identifier="main")
    if lore.before.strip():
        add("world_info", lore.before, "before", identifier="worldInfoBefore")
    description = str(card.get("description") or "").strip()
    if description:
        add("card", description, identifier="charDescription", field="description")
    personality = str(card.get("personality") or "").strip()
    if personality:
        add("card", PERSONALITY_FORMAT.replace("{{personality}}", personality), identifier="charPersonality",
            field="personality")
    scenario = str(card.get("scenario") or "").strip()
    if scenario:
        add("card", SCENARIO_FORMAT.replace("{{scenario}}", scenario), identifier="scenario", field="scenario")
    if persona.strip():
        add("persona", persona.strip(), identifier="personaDescription")
    if lore.after.strip():
        add("world_info", lore.after, "after", identifier="worldInfoAfter")
    blocks = [*lore.examples_top, *split_examples(str(card.get("mes_example") or "")), *lore.examples_bottom]
    for number, block in enumerate(blocks):
        add("examples", f"{EXAMPLE_CHAT_HEADER}\n{block.strip()}", identifier="dialogueExamples", block=number)
    for (depth, role), text in sorted(lore.at_depth.items(), key=lambda item: -item[0][0]):
        if text.strip():
            add("world_info", text, f"depth:{depth}:{int(role)}", identifier="worldInfoDepth", depth=depth)
    joined: list[tuple[str, list[dict[str, Any]]]] = []
    for pieces, text in sections:
        named = substitute_names(text, char, user)
        found = locate(named, [(d, substitute_names(t, char, user)) for d, t in pieces])
        if found is None:  # an entry not found in order: the section as one part
            first = pieces[0][0]
            found = [span(str(first["kind"]), 0, len(named), identifier=first.get("identifier"))]
        joined.append((named, found))
    return join_spans(joined, "\n\n")


def _entries(lore: Buckets, bucket: str) -> list[tuple[dict[str, Any], str]]:
    return [(span("world_info", 0, 0, book=book, uid=uid, title=title), text)
            for book, uid, title, text in lore.entries.get(bucket, [])]


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
        system, meta["system_parts"] = system_prompt_parts(self.card, self.char, self.user, lore, self.persona)
        messages = [{"content": system}] + request_messages([m for m in history if m.source != SYSTEM_PROMPT_SOURCE])
        messages += [{"content": text} for text in claimed]
        meta["estimated_prompt_tokens"] = estimate_messages(messages)
        return Assembly(system=system, config=dict(self.config), meta=meta, records=records,
                        context=memory_context(self.memory))
