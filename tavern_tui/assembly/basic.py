"""Provides the basic (compatibility) prompt: the whole character rendered into one system section.

Order and wording follow SillyTavern's default chat-completion preset
(default/content/presets/openai/Default.json): main prompt, description, personality
("[{{char}}'s personality: …]"), scenario ("[Circumstances and context of the dialogue: …]"),
then example dialogue under "[Example Chat]". A card's `system_prompt` replaces the main prompt;
`{{original}}` inside it stands for the main prompt it replaced (card spec V2).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tavern_tui.assembly.attribution import join_spans, locate, span
from tavern_tui.assembly.macros import MacroContext, substitute, substitute_in, substitute_readonly
from tavern_tui.assembly.policy import POLICY_KIND, RP_POLICY
from tavern_tui.assembly.worldinfo import CardFacts, WorldInfoStep, decisions_record, scan_context
from tavern_tui.engine.events import NewEvent
from tavern_tui.engine.log import SYSTEM_PROMPT_SOURCE, SurfaceMessage, request_messages
from tavern_tui.engine.state import VARIABLES_PART, StagedWrites, variable_change
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


def with_memory(context: tuple[tuple[str, str], ...], memory: str) -> tuple[tuple[str, str], ...]:
    """`context` with its memory entry (`MEMORY_CONTEXT`) re-read as `memory`: replaced in place,
    left out when `memory` is empty now, added last when it was not there (the refresh stage:
    seed 000 §1 "refreshContext() rereads runtime facts before admission")."""
    fresh = memory_context(memory)
    kept = tuple(fresh[0] if ident == MEMORY_CONTEXT else (ident, text) for ident, text in context
                 if ident != MEMORY_CONTEXT or fresh)
    return kept if any(ident == MEMORY_CONTEXT for ident, _ in kept) else kept + fresh


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
                        persona: str = "", macros: MacroContext | None = None, policy: str = "") -> str:
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
        macros: the macro context; with one, every part goes through the full macro engine
            (`expand_card`'s order, then the main prompt and the formats, as the preset builder does)
            and its variables are changed in place; None = only `{{char}}`/`{{user}}`.
        policy: the roleplay policy ("" = none): the last section, identifier `rp:policy`
            (`assembly.policy`).

    Returns:
        Sections joined by blank lines; empty fields are left out.
    """
    return system_prompt_parts(card, char, user, lore, persona, macros, policy)[0]


def system_prompt_parts(card: dict[str, Any], char: str, user: str, lore: Buckets | None = None,
                        persona: str = "", macros: MacroContext | None = None,
                        policy: str = "") -> tuple[str, list[dict[str, Any]]]:
    """`build_system_prompt`'s text and its parts (`assembly.attribution`): main, each world-info
    entry (book, uid, title), the card fields, persona, each example block and world info @depth,
    with offsets into the text. Without `macros` names are substituted per section, which equals
    substituting the joined text (a name macro never spans the blank line between sections); with
    them, see `build_system_prompt` (entries are found by their read-only expansion)."""
    lore = lore or Buckets()
    if macros is not None:
        return _expanded_system_prompt(card, lore, persona, macros, policy)

    def named(text: str) -> str:
        return substitute_names(text, char, user)

    out = _Sections(lore, named)

    def add(kind: str, text: str, bucket: str = "", **detail: Any) -> None:
        out.add(kind, named(text), bucket, **detail)

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
    _add_tail(out, lore, blocks)
    if policy.strip():
        add(POLICY_KIND, policy.strip(), identifier=RP_POLICY)
    return out.join()


class _Sections:
    """The compat system section's texts, each with the pieces (world-info entries) inside it,
    for attribution. `find` turns an entry's stored text into how it reads in the section."""

    def __init__(self, lore: Buckets, find: Callable[[str], str]) -> None:
        self.lore = lore
        self.find = find
        self.items: list[tuple[list[tuple[dict[str, Any], str]], str]] = []  # (pieces inside, section text)

    def add(self, kind: str, text: str, bucket: str = "", **detail: Any) -> None:
        """One section `text` (as sent); a `bucket`'s world-info entries become its pieces."""
        whole = span(kind, 0, 0, **detail)
        keep = {k: v for k, v in detail.items() if k in ("identifier", "depth") and v is not None}
        pieces = [(dict(d, **keep), self.find(t)) for d, t in _entries(self.lore, bucket)] if bucket else []
        self.items.append((pieces or [(whole, text)], text))

    def join(self) -> tuple[str, list[dict[str, Any]]]:
        """The sections joined by blank lines and their parts (an entry not found in order: the
        section as one part)."""
        joined: list[tuple[str, list[dict[str, Any]]]] = []
        for pieces, text in self.items:
            found = locate(text, pieces)
            if found is None:
                first = pieces[0][0]
                found = [span(str(first["kind"]), 0, len(text), identifier=first.get("identifier"))]
            joined.append((text, found))
        return join_spans(joined, "\n\n")


def _add_tail(out: _Sections, lore: Buckets, blocks: list[str]) -> None:
    """The example blocks, then world info @depth deepest first (no chat position in compat)."""
    for number, block in enumerate(blocks):
        out.add("examples", f"{EXAMPLE_CHAT_HEADER}\n{block.strip()}", identifier="dialogueExamples", block=number)
    for (depth, role), text in sorted(lore.at_depth.items(), key=lambda item: -item[0][0]):
        if text.strip():
            out.add("world_info", text, f"depth:{depth}:{int(role)}", identifier="worldInfoDepth", depth=depth)


def _entries(lore: Buckets, bucket: str) -> list[tuple[dict[str, Any], str]]:
    return [(span("world_info", 0, 0, book=book, uid=uid, title=title), text)
            for book, uid, title, text in lore.entries.get(bucket, [])]


def expand_card(card: dict[str, Any], persona: str, ctx: MacroContext) -> dict[str, str]:
    """The card fields with macros expanded, in the preset builder's (SillyTavern's card-field) order:
    description, personality, scenario, persona, first message, then example dialogue. `ctx` gets the
    raw fields (so `{{description}}` inside another field is the raw text) and its variables change."""
    def text(key: str) -> str:
        value = card.get(key)
        return value if isinstance(value, str) else ""

    raw = replace(ctx, description=text("description"), personality=text("personality"),
                  scenario=text("scenario"), persona=persona, mes_examples_raw=text("mes_example"),
                  first_message=text("first_mes"), char_prompt=text("system_prompt"),
                  char_instruction=text("post_history_instructions"))
    out = {key: substitute_in(text(key), raw, key) if text(key) else ""
           for key in ("description", "personality", "scenario")}
    out["persona"] = substitute_in(persona, raw, "persona") if persona else ""
    out["first_mes"] = substitute_in(text("first_mes"), raw, "first_mes") if text("first_mes") else ""
    out["mes_example"] = substitute_in(text("mes_example"), raw, "mes_example") if text("mes_example") else ""
    return out


def _expanded_system_prompt(card: dict[str, Any], lore: Buckets, persona: str,
                            ctx: MacroContext, policy: str = "") -> tuple[str, list[dict[str, Any]]]:
    # SillyTavern's order: card fields, then the activated world info, then the prompts.
    fields = expand_card(card, persona, ctx)
    lore = expand_lore(lore, ctx)
    ctx = replace(ctx, description=fields["description"], personality=fields["personality"],
                  scenario=fields["scenario"], persona=fields["persona"], first_message=fields["first_mes"],
                  mes_examples_raw=fields["mes_example"])
    card_main = str(card.get("system_prompt") or "")
    main = substitute(DEFAULT_MAIN_PROMPT, ctx)
    if card_main.strip():
        main = substitute(card_main, replace(ctx, original=main))
    out = _Sections(lore, lambda text: text)  # expand_lore keeps the entries expanded read-only
    out.add("preset", main, identifier="main")
    if lore.before.strip():
        out.add("world_info", lore.before, "before", identifier="worldInfoBefore")
    if fields["description"].strip():
        out.add("card", fields["description"].strip(), identifier="charDescription", field="description")
    if fields["personality"].strip():
        out.add("card", substitute(PERSONALITY_FORMAT, replace(ctx, personality=fields["personality"].strip())),
                identifier="charPersonality", field="personality")
    if fields["scenario"].strip():
        out.add("card", substitute(SCENARIO_FORMAT, replace(ctx, scenario=fields["scenario"].strip())),
                identifier="scenario", field="scenario")
    if fields["persona"].strip():
        out.add("persona", fields["persona"].strip(), identifier="personaDescription")
    if lore.after.strip():
        out.add("world_info", lore.after, "after", identifier="worldInfoAfter")
    _add_tail(out, lore, [*lore.examples_top, *split_examples(fields["mes_example"]), *lore.examples_bottom])
    policy = substitute(policy, ctx).strip() if policy.strip() else ""
    if policy:
        out.add(POLICY_KIND, policy, identifier=RP_POLICY)
    return out.join()


def expand_lore(lore: Buckets, ctx: MacroContext) -> Buckets:
    """Activated world info with macros expanded in every entry's text, bucket by bucket in prompt order
    (SillyTavern substitutes an entry's content when it activates). Variables in `ctx` change in place.
    `entries` (attribution only) are expanded read-only, so each can still be found in its bucket."""
    def sub(text: str, where: str) -> str:
        return substitute_in(text, ctx, f"world info {where}") if text else text

    expanded = Buckets(before=sub(lore.before, "before the character"), after=sub(lore.after, "after the character"),
                       an_top=[sub(t, "at the author's note top") for t in lore.an_top],
                       an_bottom=[sub(t, "at the author's note bottom") for t in lore.an_bottom],
                       at_depth={k: sub(v, f"at depth {k[0] if isinstance(k, tuple) else k}")
                                 for k, v in lore.at_depth.items()},
                       examples_top=[sub(t, "before the examples") for t in lore.examples_top],
                       examples_bottom=[sub(t, "after the examples") for t in lore.examples_bottom],
                       outlets={k: sub(v, f"outlet {k}") for k, v in lore.outlets.items()})
    deadline = ctx.budget.deadline

    def readonly(book: str, uid: object, text: str) -> str:
        if deadline is None:
            return substitute_readonly(text, ctx)
        with deadline.part(f"book '{book}' entry {uid} content"):
            return substitute_readonly(text, ctx)

    expanded.entries.update({bucket: [(book, uid, title, readonly(book, uid, text))
                                      for book, uid, title, text in items]
                             for bucket, items in lore.entries.items()})
    return expanded


def stage_variables(start: MacroContext, used: MacroContext, meta: dict[str, Any],
                    staged: StagedWrites | None = None) -> NewEvent | None:
    """Stage the variables a build changed (`start` = before, `used` = the context the build mutated) into
    `staged` (a fresh one when None: then this is the only state kind of the build) and return the build's
    `state/commit` event (None when nothing at all was staged). Another state kind (MVU) stages its part into
    the same `StagedWrites` before this is called, so the step still makes one commit.
    `meta["variables"]` gets, for the trace, names only (the values are in the commit event):
    `{"read": [[scope, name]…], "set": {scope: [names]}, "deleted": {scope: [names]}}`."""
    change = variable_change(start.local_vars, used.local_vars, start.global_vars, used.global_vars)
    meta["variables"] = {
        "read": sorted([list(r) for r in used.reads]),
        "set": {scope: sorted(part["set"]) for scope, part in change.items() if part.get("set")},
        "deleted": {scope: list(part["delete"]) for scope, part in change.items() if part.get("delete")}}
    staged = staged if staged is not None else StagedWrites()
    staged.stage(VARIABLES_PART, change)
    return staged.event()


def expand_input(claimed: list[str], used: MacroContext) -> list[str]:
    """The person's typed input with its macros expanded against `used` (SillyTavern: when it is sent;
    its variable writes land in `used`). It is their own text, so the build's evaluation budget
    (`MacroBudget.deadline`) never refuses it and what they typed is never replaced by a refusal
    marker; the per-call macro limits still hold."""
    own = replace(used, budget=replace(used.budget, deadline=None))
    return [substitute(text, own) for text in claimed]


def working_context(base: MacroContext | None) -> tuple[MacroContext, MacroContext]:
    """(the untouched start, a copy a build may mutate): variables deep-copied, reads fresh."""
    start = base or MacroContext()
    used = replace(start, local_vars=copy.deepcopy(start.local_vars), global_vars=copy.deepcopy(start.global_vars),
                   reads=set())
    return start, used


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
        macros: base macro context (variables, time, random source); None = a fresh one. The
            variables the build changes are staged as this step's `state/commit` record.
        limit: the request's context (`assembly.fit.ContextLimit`); None = no fitting.
        count: the token counter the fit uses.
        policy: the roleplay policy ("" = none, or out-of-character talk is on): the system
            prompt's last section, identifier `rp:policy` (`assembly.policy`).
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
    macros: MacroContext | None = None
    limit: Any = None
    count: Callable[[str], int] = DEFAULT_COUNTER
    policy: str = ""

    def __call__(self, history: list[SurfaceMessage], claimed: list[str]) -> Assembly:
        """Build this step's system section: world info scans the history plus the claimed input
        (seed 000 §5); its decisions go to the request header, its timed effects to the branch."""
        meta = {**self.meta, "strategy": (self.meta.get("strategy_snapshot") or {}).get("name", "compat")}
        records: tuple[NewEvent, ...] = ()
        lore = None
        start, used = working_context(self.macros)
        used = replace(used, char=self.char, user=self.user, input="\n".join(claimed),
                       chat_length=sum(1 for m in history if m.role in ("user", "assistant")) + len(claimed))
        if claimed:  # the chat now ends with the person's input, which has no swipes (chat-macros.js)
            used.lazy = {}
        # The person's input is expanded once, in its own step (SillyTavern: when it is sent), before
        # world info scans it.
        claimed = expand_input(claimed, used)
        if self.world_info is not None and self.world_info.books:
            facts = self.facts or CardFacts(self.char, self.user)
            result = self.world_info.run(scan_context(history, claimed, facts, self.timed_state,
                                                      self.generation_type,
                                                      expand_key=lambda key: substitute(key, used),
                                                      deadline=used.budget.deadline))
            lore = result.buckets
            meta["world_info"] = decisions_record(result)
            records = (self.world_info.state_event(result),)
        system, meta["system_parts"] = system_prompt_parts(self.card, self.char, self.user, lore, self.persona, used,
                                                           self.policy)
        staged = stage_variables(start, used, meta)
        if staged is not None:
            records = (*records, staged)
        messages = [{"content": system}] + request_messages([m for m in history if m.source != SYSTEM_PROMPT_SOURCE])
        messages += [{"content": text} for text in claimed]
        meta["estimated_prompt_tokens"] = estimate_messages(messages)
        from tavern_tui.assembly.fit import fit_native  # here: fit → sillytavern → basic at import time

        # `claimed` is the expanded input here: what is sent, so what the fit pays for.
        return fit_native(Assembly(system=system, config=dict(self.config), meta=meta, records=records,
                                   context=memory_context(self.memory), input=tuple(claimed) if claimed else None),
                          history, claimed, self.limit, self.count)
