"""Provides `PresetAssembler`: the `projection` strategy, the request SillyTavern would send.

Rules: issue 5 §3-§4 and DESIGN.md "Strategies": the preset's prompts, the card, persona and
activated world info are placed as SillyTavern's prompt manager places them
(`assembly.sillytavern.build_prompt`), the result is a request-only array: the engine records it
in a `request/assembly` event and never writes its bodies into chat history. Preset
parameters become call config only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tavern_tui.assembly.attribution import join_spans, shift
from tavern_tui.assembly.basic import expand_input, memory_context, stage_variables, working_context
from tavern_tui.assembly.fit import ContextFit, ContextLimit, fit_native
from tavern_tui.assembly.macros import MacroContext, substitute
from tavern_tui.assembly.memo import SKIP, per_list, per_prefix
from tavern_tui.assembly.sillytavern import (
    AuthorsNote,
    BuiltPrompt,
    HistoryMessage,
    PromptInputs,
    PromptPart,
    build_prompt,
    to_messages,
)
from tavern_tui.assembly.sillytavern.budget import REPLY_PRIMING
from tavern_tui.assembly.strategies import PROJECTION, ROLES_FIRST, SLOTS_FIRST
from tavern_tui.assembly.worldinfo import CardFacts, WorldInfoStep, decisions_record, scan_context
from tavern_tui.engine.log import HIDDEN_KEY, PLACEHOLDER_SOURCE, SUMMARY_SOURCE, SYSTEM_PROMPT_SOURCE, SurfaceMessage
from tavern_tui.engine.step import Assembly
from tavern_tui.formats.presets import ParsedPreset
from tavern_tui.lore.result import Buckets
from tavern_tui.lore.timed import TimedState
from tavern_tui.text.tokens import DEFAULT_COUNTER

_CHAT_SOURCES = frozenset({"new_chat", "history", "input", "summary"})
_CONTROL_SOURCES = frozenset({"continue", "impersonate", "prefill", "send_if_empty"})
_DEPTH_IDENTIFIERS = ("worldInfoDepth", "charDepthPrompt")


def history_for_prompt(history: list[SurfaceMessage], claimed: list[str], char: str,
                       user: str) -> list[HistoryMessage]:
    """The chat as the prompt builder reads it: the visible user/assistant messages and summary
    nodes (pinned: never dropped; no system section, no placeholder replies, nothing hidden, no
    failed empty attempts), then the claimed input as the newest message.

    The history part of the last list seen is kept (the same list object, while the log is
    unchanged), with the count of the person's messages (`_history_part`)."""
    return [*_history_part(history, char, user)[0],
            *(HistoryMessage("user", text, None, user, is_input=True) for text in claimed)]


_last_part: tuple[list[SurfaceMessage], tuple[str, str], tuple[HistoryMessage, ...], int] | None = None


def _author(message: SurfaceMessage, char: str) -> str:
    """The name a reply was written under: a group member's (its body names it with its
    `character_id`), else the playthrough's character."""
    name = message.body.get("name") if isinstance(message.body.get("character_id"), int) else None
    return name if isinstance(name, str) and name else char


def _history_part(history: list[SurfaceMessage], char: str, user: str) -> tuple[tuple[HistoryMessage, ...], int]:
    """(the history as `HistoryMessage`s, the person's messages among all, hidden ones too). Each
    message converts on its own: a history that grew converts its new messages (`per_prefix`)."""
    global _last_part
    last = _last_part
    if last is not None and last[0] is history and last[1] == (char, user):
        return last[2], last[3]

    def convert(m: SurfaceMessage) -> Any:
        if not ((m.role in ("user", "assistant") or m.source == SUMMARY_SOURCE)
                and m.source not in (SYSTEM_PROMPT_SOURCE, PLACEHOLDER_SOURCE)
                and not m.body.get(HIDDEN_KEY) and m.content):
            return SKIP
        return HistoryMessage(m.role, m.content, m.ref, user if m.role == "user" else _author(m, char),
                              pinned=m.source == SUMMARY_SOURCE)

    messages = per_prefix(history, "preset.history", convert, key=(char, user))
    persons = len(per_prefix(history, "preset.persons", lambda m: m if m.role == "user" and m.by_person else SKIP))
    _last_part = (history, (char, user), messages, persons)
    return messages, persons


def _placeholder_notes(history: list[SurfaceMessage]) -> list[str]:
    """The adjustment naming the offline demo's replies left out of the history (source
    "placeholder": never sent to a model, DESIGN.md), or none."""
    left = len(per_prefix(history, "preset.placeholders", lambda m: m if m.source == PLACEHOLDER_SOURCE else SKIP))
    if not left:
        return []
    return [f"{left} offline demo repl{'y' if left == 1 else 'ies'} left out of the history (a placeholder's "
            "text is never sent to a model)"]


@dataclass
class PresetAssembler:
    """Builds each step's request with a preset (the `projection` strategy).

    Attributes:
        preset: the bound preset (the built-in default when none is bound).
        card: normalised card `data`; char/user: the names for macros.
        persona: the persona description ("" = none).
        meta: resource facts for the request header (character, preset, books …).
        world_info / facts / timed_state: as `BasicAssembler`.
        generation_type / continue_text: the step's SillyTavern generation type, and the
            reply being continued.
        macros: base macro context (time, random source, variables); None = defaults.
        options: the applied strategy's options (`assembly.strategies.OPTIONS`).
        snapshot: the applied strategy's snapshot (name, version, base, options, sha256), for
            the trace; None = the built-in one of this class.
        authors_note: the chat's Author's Note (`chat_metadata` note_*), None = none.
        chat_overrides: the chat's `scenario` / `mes_example` / `system_prompt` overrides.
        count: the token counter (cached per message text).
        memory: the memory snapshot as enveloped data ("" = none): a context message before
            the input in the native strategies; `projection` does not send it (named).
        omit: call parameters this playthrough leaves out (`tavern omit-param`), each named in
            the adjustments.
        limit: the request's context (`assembly.fit.resolve_limit`); None = the preset's own
            figures for projection and no fitting for the native strategies.
        policy: the roleplay policy ("" = none, or out-of-character talk is on): a system part
            just before the chat history, identifier `rp:policy` (`assembly.policy`).
        group: a group chat (the macros' group names are the caller's, in `macros`): the
            group prompts and names of SillyTavern's `selected_group` (`PromptInputs.group`).
    """

    preset: ParsedPreset
    card: dict[str, Any]
    char: str
    user: str
    meta: dict[str, Any]
    persona: str = ""
    world_info: WorldInfoStep | None = None
    facts: CardFacts | None = None
    timed_state: TimedState = field(default_factory=TimedState)
    generation_type: str = "normal"
    continue_text: str = ""
    macros: MacroContext | None = None
    options: dict[str, Any] = field(default_factory=dict)
    snapshot: dict[str, Any] | None = None
    authors_note: AuthorsNote | None = None
    chat_overrides: dict[str, str] = field(default_factory=dict)
    count: Callable[[str], int] = DEFAULT_COUNTER
    memory: str = ""
    omit: tuple[str, ...] = ()
    expanded_input: tuple[str, ...] | None = None  # the last build's claimed input, macros expanded
    limit: ContextLimit | None = None
    policy: str = ""
    group: bool = False
    strategy = PROJECTION

    def call_config(self) -> dict[str, Any]:
        """The preset's call config without the parameters this playthrough leaves out (`omit`)."""
        return {k: v for k, v in self.preset.call_config().items() if k not in self.omit}

    def build(self, history: list[SurfaceMessage], claimed: list[str]) -> tuple[BuiltPrompt, dict[str, Any], tuple]:
        """The built prompt, the header meta and the records to keep (world-info timed state);
        also what `preview` shows."""
        meta: dict[str, Any] = {**self.meta, "strategy": (self.snapshot or {}).get("name", self.strategy)}
        if self.snapshot is not None:
            meta["strategy_snapshot"] = dict(self.snapshot)
        lore = Buckets()
        records: tuple = ()
        start, used = working_context(self.macros)
        used.char, used.user = self.char, self.user
        used.chat_length = per_list(history, "preset.chat_length", lambda: sum(
            1 for m in history if m.role in ("user", "assistant"))) + len(claimed)  # ST chat.length
        if claimed:  # the chat now ends with the person's input, which has no swipes (chat-macros.js)
            used.lazy = {}
        # ST order: the input is expanded when sent, before world info scans it and the prompt is built
        # (the builder then expands the card fields, the activated world info and the prompts, in that order).
        claimed = expand_input(claimed, used)
        self.expanded_input = tuple(claimed) if claimed else None
        if self.world_info is not None and self.world_info.books:
            facts = self.facts or CardFacts(self.char, self.user)
            result = self.world_info.run(scan_context(history, claimed, facts, self.timed_state, self.generation_type,
                                                      expand_key=lambda key: substitute(key, used),
                                                      deadline=used.budget.deadline))
            lore = result.buckets
            meta["world_info"] = decisions_record(result)
            records = (self.world_info.state_event(result),)
        budget = self.limit.limit if self.limit else self.preset.max_context - self.preset.max_tokens
        chat, offset = cut_unfittable(history_for_prompt(history, claimed, self.char, self.user), budget, self.count)
        built = build_prompt(PromptInputs(
            preset=self.preset, card=self.card, char=self.char, user=self.user, persona=self.persona, lore=lore,
            history=chat, history_offset=offset, generation=self.generation_type,
            continue_text=self.continue_text, macros=used, authors_note=self.authors_note,
            chat_overrides=self.chat_overrides, count=self.count,
            # SillyTavern's Author's Note interval counts the person's messages, hidden ones too.
            user_message_count=_history_part(history, self.char, self.user)[1] + len(claimed),
            strict_budget=self.strategy == PROJECTION, context_limit=self.limit.limit if self.limit else None,
            policy=self.policy, group=self.group))
        staged = stage_variables(start, used, meta)
        if staged is not None:
            records = (*records, staged)
        meta["token_counter"] = built.token_counter
        meta["history_notes"] = _placeholder_notes(history)
        meta["adjustments"] = (list(built.adjustments) + self.preset.config_notes() + omit_notes(self.omit)
                               + meta["history_notes"])
        if self.memory.strip() and self.strategy == PROJECTION:
            meta["adjustments"].append("memory snapshot not sent: projection sends only what SillyTavern would")
        meta["tokens"] = dict(built.tokens)
        meta["budget"] = built.budget
        meta["history_dropped"] = built.history_dropped
        if self.limit is not None and self.strategy == PROJECTION:
            meta["context"] = projection_fit(built, history, self.limit).to_json()
        return built, meta, records

    def __call__(self, history: list[SurfaceMessage], claimed: list[str]) -> Assembly:
        """The step's assembly: no system section is admitted; the whole request is the
        projection, recorded by the engine as `request/assembly`."""
        built, meta, records = self.build(history, claimed)
        parts = [{"role": p.role, "source": p.source, "identifier": p.identifier,
                  "ref": list(p.ref) if p.ref else None, "spans": list(p.spans)} for p in built.parts]
        return Assembly(system="", config=self.call_config(), meta=meta, records=records,
                        input=self.expanded_input,
                        request=tuple(to_messages(built.parts)), request_parts=tuple(parts))


@dataclass
class SlotsFirstAssembler(PresetAssembler):
    """The `preset-slots-first` strategy: the preset's prompts in `prompt_order`, delivered in
    the native regions, every adjustment named (DESIGN.md "Strategies").

    The same SillyTavern placement as `projection` is computed, then mapped onto native
    delivery: one durable system section, then the chat history as stored, then the input.
    What sits before the history goes into the system section in order; what SillyTavern
    would put inside or after the history (in-chat injections at depth, post-history
    instructions) has no native slot there and is appended to the system section, each move
    named in `meta["adjustments"]` (and so in preview). A non-system prompt inside the system
    section is named too. The history is not trimmed to the preset's context (native history
    is sent whole); continue and impersonate prompts come from the engine's step.
    """

    strategy = SLOTS_FIRST

    def _split(self, built: BuiltPrompt, meta: dict[str, Any]) -> tuple[list[PromptPart], list[PromptPart], list[str]]:
        """The non-chat parts before the history and those SillyTavern puts inside or after it
        (each of those named as moved), with the adjustments so far (`build`'s notes on the
        history in `meta` among them); examples dropped when the strategy's `examples` option is "omit"."""
        parts = built.parts
        chat_at = [i for i, p in enumerate(parts) if p.source in _CHAT_SOURCES]
        first = chat_at[0] if chat_at else len(parts)
        before: list[PromptPart] = []
        moved: list[PromptPart] = []
        adjustments = (list(built.adjustments) + self.preset.config_notes() + omit_notes(self.omit)
                       + list(meta.get("history_notes", ())))
        omit_examples = self.options.get("examples") == "omit"
        if omit_examples and any(p.source == "examples" for p in parts):
            adjustments.append("example dialogue left out (strategy option examples = omit)")
        for index, part in enumerate(parts):
            if part.source in _CHAT_SOURCES or part.source in _CONTROL_SOURCES:
                continue
            if omit_examples and part.source == "examples":
                continue
            (before if index < first else moved).append(part)
        return before, moved, adjustments

    @staticmethod
    def _moved_note(part: PromptPart, where: str) -> str:
        what = _label(part)
        if part.source in ("injection",) or part.identifier.endswith(_DEPTH_IDENTIFIERS) or "+" in part.identifier:
            return f"{what} (in-chat injection) sent {where}: native delivery has no slot inside the history"
        return f"{what} (after the history) sent {where}: native delivery has no system slot after the input"

    def __call__(self, history: list[SurfaceMessage], claimed: list[str]) -> Assembly:
        built, meta, records = self.build(history, claimed)
        before, moved, adjustments = self._split(built, meta)
        for part in moved:
            adjustments.append(self._moved_note(part, "at the end of the system section"))
        for part in before + moved:
            if part.role != "system" and not part.name:
                adjustments.append(f"{_label(part)} (role {part.role}) sent inside the system section")
        meta["adjustments"] = adjustments
        system, meta["system_parts"] = system_section(before + moved, self.char, self.user)
        # The fit pays for the input as sent: expanded (`build` set `expanded_input`).
        return fit_native(Assembly(system=system, config=self.call_config(), meta=meta, records=records,
                                   input=self.expanded_input,
                                   context=memory_context(self.memory)),
                          history, list(self.expanded_input or ()), self.limit, self.count, self.continue_text)


@dataclass
class RolesFirstAssembler(SlotsFirstAssembler):
    """The `preset-roles-first` strategy: each preset prompt keeps its authored role inside the
    native delivery regions (DESIGN.md "Strategies"; seed 000 §2.2).

    System prompts (and markers) go to the one durable system section in `prompt_order`;
    user-role prompts become context: `user/message` events of origin engine that enter the
    durable history just before the step's input, admitted again only when their text changed
    (context-snapshot reuse; removing a prompt stops future contributions, earlier bodies stay
    history). Assistant-role prompts have no native region and go to the system section, named.
    What SillyTavern puts inside or after the history goes to the end of the system section,
    or, with option `after_history` = "context", becomes context too; each move is named.
    """

    strategy = ROLES_FIRST

    def __call__(self, history: list[SurfaceMessage], claimed: list[str]) -> Assembly:
        built, meta, records = self.build(history, claimed)
        before, moved, adjustments = self._split(built, meta)
        to_context = self.options.get("after_history") == "context"
        system_parts: list[PromptPart] = []
        context: list[tuple[str, str]] = []
        for part in before + moved:
            late = part in moved
            if part.role == "user" and not part.name:
                context.append((part.identifier or part.source, part.content))
                if late:
                    adjustments.append(self._moved_note(part, "as context before the input"))
            elif late and to_context:
                context.append((part.identifier or part.source, part.content))
                adjustments.append(self._moved_note(part, "as context before the input"))
            else:
                system_parts.append(part)
                if late:
                    adjustments.append(self._moved_note(part, "at the end of the system section"))
                if part.role == "assistant" and not part.name:
                    adjustments.append(f"{_label(part)} (role assistant) sent inside the system section: native "
                                       "delivery has no assistant region before the history")
        meta["adjustments"] = adjustments
        system, meta["system_parts"] = system_section(system_parts, self.char, self.user)
        return fit_native(Assembly(system=system, config=self.call_config(), meta=meta, records=records,
                                   input=self.expanded_input,
                                   context=tuple((ident, text) for ident, text in context if text.strip())
                                   + memory_context(self.memory)),
                          history, list(self.expanded_input or ()), self.limit, self.count, self.continue_text)


CUT_MARGIN = 100
"""Messages kept beyond the cut of `cut_unfittable`, so an in-chat injection up to that depth
past the last message that can fit still lands where the whole chat would put it."""


def cut_unfittable(chat: list[HistoryMessage], budget: int, count: Callable[[str], int]) -> tuple[list, int]:
    """(the chat without the oldest messages that cannot fit whatever happens, how many were cut).

    Walking newest→oldest, once the messages' raw costs (content + `MESSAGE_OVERHEAD`; 0 for
    text with a macro, which may shrink) exceed `budget`, every older message is past the first
    one the builder's fill stops at; `CUT_MARGIN` more are kept, and summaries always. Saves
    the macro, name and cost work on thousands of messages (issue 16 §6).
    """
    total, cut = 0, None
    for index in range(len(chat) - 1, -1, -1):
        text = chat[index].content
        total += 0 if ("{" in text or "<" in text) else count(text) + 3
        if total > budget:
            cut = index - CUT_MARGIN
            break
    if cut is None or cut <= 0:
        return chat, 0
    kept = [m for m in chat[:cut] if m.pinned] + chat[cut:]
    return kept, cut - sum(1 for m in chat[:cut] if m.pinned)


def projection_fit(built: BuiltPrompt, history: list[SurfaceMessage], limit: ContextLimit) -> ContextFit:
    """The `context` record of a projected request: what SillyTavern's fill kept and dropped
    (the history messages not among the parts, oldest first), the summaries sent, the tokens
    used (per-part costs plus the reply priming)."""
    sent = {p.ref for p in built.parts if p.ref is not None}
    firsts = [p.ref for p in built.parts if p.source == "history" and p.ref is not None]
    dropped = tuple(m.ref for m in history if m.role in ("user", "assistant") and m.ref not in sent
                    and m.source not in (SYSTEM_PROMPT_SOURCE, PLACEHOLDER_SOURCE) and m.content
                    and not m.body.get(HIDDEN_KEY))[: built.history_dropped]
    return ContextFit(limit, REPLY_PRIMING + sum(built.tokens.values()), dropped, firsts[0] if firsts else None,
                      tuple(p.ref for p in built.parts if p.source == "summary" and p.ref is not None))


def omit_notes(omit: tuple[str, ...]) -> list[str]:
    """One adjustment per call parameter the playthrough leaves out."""
    return [f"call parameter {name!r} left out for this playthrough (tavern omit-param; the endpoint rejected it)"
            for name in omit]


def _label(part: PromptPart) -> str:
    return f"'{part.identifier}'" if part.identifier else f"a {part.source} prompt"


def _section_pieces(parts: list[PromptPart], char: str, user: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """Texts of the system section with their parts' spans: each "[Example Chat]" header starts
    a block whose example messages follow as "Name: text" lines (each line's text one span);
    everything else is its content."""
    pieces: list[tuple[str, list[dict[str, Any]]]] = []
    in_examples = False
    for part in parts:
        if part.source == "examples" and part.name and in_examples:
            speaker = user if part.name == "example_user" else char
            text, spans = pieces[-1]
            at = len(text) + len(f"\n{speaker}: ")
            pieces[-1] = (text + f"\n{speaker}: {part.content}", spans + shift(part.spans, at))
            continue
        in_examples = part.source == "examples" and not part.name
        if part.content.strip():
            pieces.append((part.content, list(part.spans)))
        elif in_examples:
            pieces.append(("", []))  # a header-less block still collects its lines
    return [(t, spans) for t, spans in pieces if t.strip()]


def system_section(parts: list[PromptPart], char: str, user: str) -> tuple[str, list[dict[str, Any]]]:
    """The native strategies' system section and its parts (`assembly.attribution`): the texts of
    `_section_pieces` joined by a blank line."""
    return join_spans(_section_pieces(parts, char, user), "\n\n")
