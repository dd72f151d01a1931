"""Provides the context budget of a request and the fitting of native history into it.

Rules (issue 16 §1-§2):

- One limit per request: `ContextLimit.limit` = max context − reply tokens, taken from the
  bound preset's `openai_max_context` / `openai_max_tokens`, else the config's `max_context` /
  `max_tokens`, else what the endpoint reports (`/models` `context_length` / `max_model_len`,
  llama.cpp `/props` `n_ctx`), else SillyTavern's shipped defaults (4095 context, 300 reply;
  default/content/presets/openai/Default.json). `resolve_limit` picks and names the source.
- The world-info budget is a share of the same context: SillyTavern `checkWorldInfo` computes
  `round(world_info_budget × maxContext / 100)`, where `maxContext` is `getMaxContextSize()`,
  i.e. `openai_max_context` for chat completion; we pass the resolved max context.
- Native delivery (compat, slots-first, roles-first) sends the stored surface; `fit_surface`
  drops the oldest history, whole messages, newest→oldest while it fits and stops at the first
  that does not (as `projection`'s ST fill does). Never dropped: the system section, the
  claimed input (it is not history yet), context this step admits, and summary nodes
  (`SUMMARY_SOURCE`). When even those exceed the limit, `ContextOverflow` says by how much
  and what to change, before anything is sent.

Token cost of a message = count(content) + count(name) + `MESSAGE_OVERHEAD`, plus
`REPLY_PRIMING` once (SillyTavern's accounting, `assembly.sillytavern.budget`). The counter
caches per text, so a history message is counted once across requests. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tavern_tui.assembly.memo import SKIP, per_list, per_prefix
from tavern_tui.assembly.sillytavern.budget import MESSAGE_OVERHEAD, REPLY_PRIMING
from tavern_tui.engine.events import NewEvent
from tavern_tui.engine.log import SUMMARY_SOURCE, SYSTEM_PROMPT_SOURCE, SurfaceMessage, sent_to_model
from tavern_tui.engine.step import CONTEXT_SOURCES, Assembly, context_events
from tavern_tui.errors import TavernError

__all__ = ["DEFAULT_MAX_CONTEXT", "DEFAULT_MAX_TOKENS", "ContextFit", "ContextLimit", "ContextOverflow",
           "admitted_context", "fit_native", "fit_surface", "message_cost", "resolve_limit", "sendable_history"]

DEFAULT_MAX_CONTEXT = 4095
"""SillyTavern's default `openai_max_context` (Default.json), used when nothing else says."""
DEFAULT_MAX_TOKENS = 300
"""SillyTavern's default `openai_max_tokens` (Default.json)."""


@dataclass(frozen=True, slots=True)
class ContextLimit:
    """The context a request must fit.

    Attributes:
        max_context: the model's context in tokens.
        max_tokens: tokens reserved for the reply.
        source: where `max_context` came from: "preset", "config", "endpoint:/models",
            "endpoint:/props" or "default".
    """

    max_context: int
    max_tokens: int
    source: str

    @property
    def limit(self) -> int:
        """Tokens the prompt may use: max_context − max_tokens (at least 0)."""
        return max(0, self.max_context - self.max_tokens)

    def to_json(self) -> dict[str, Any]:
        """`{"max_context", "max_tokens", "limit", "source"}`."""
        return {"max_context": self.max_context, "max_tokens": self.max_tokens, "limit": self.limit,
                "source": self.source}


def resolve_limit(preset_settings: dict[str, Any] | None, config_context: int = 0, config_tokens: int = 0,
                  endpoint: tuple[int, str] | None = None) -> ContextLimit:
    """Pick the request's context (rule order in the module docstring).

    Args:
        preset_settings: the bound preset's top-level settings (None when no preset is bound;
            the built-in default preset does not count as bound).
        config_context, config_tokens: the config's `max_context` / `max_tokens` (0 = unset).
        endpoint: (context tokens, "endpoint:/models" | "endpoint:/props") the provider
            reported, or None.

    Returns:
        The limit with its source. The reply reserve comes from the same place as the context
        when it says, else the next place that does, else 300.
    """
    def positive(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    preset_context = positive((preset_settings or {}).get("openai_max_context"))
    preset_tokens = positive((preset_settings or {}).get("openai_max_tokens"))
    tokens = preset_tokens or positive(config_tokens) or DEFAULT_MAX_TOKENS
    if preset_context:
        return ContextLimit(preset_context, preset_tokens or positive(config_tokens) or DEFAULT_MAX_TOKENS, "preset")
    if positive(config_context):
        return ContextLimit(config_context, positive(config_tokens) or preset_tokens or DEFAULT_MAX_TOKENS, "config")
    if endpoint is not None and positive(endpoint[0]):
        return ContextLimit(endpoint[0], tokens, endpoint[1])
    return ContextLimit(DEFAULT_MAX_CONTEXT, tokens, "default")


class ContextOverflow(TavernError):
    """The request cannot fit even with all history dropped; nothing was sent.

    Attributes:
        needed: tokens of what is never dropped (system section, summaries, context, input).
        limit: the `ContextLimit` it had to fit.
        over: needed − limit.limit.
    """

    def __init__(self, needed: int, limit: ContextLimit, largest: str = "") -> None:
        self.needed = needed
        self.limit = limit
        self.over = needed - limit.limit
        biggest = f" The largest part is {largest}." if largest else ""
        super().__init__(
            f"the request does not fit the context even with all history left out: it needs {needed} tokens, "
            f"{self.over} over the limit of {limit.limit} (max context {limit.max_context} − reply "
            f"{limit.max_tokens}, from {limit.source}).{biggest} Shorten the message or the card, raise the "
            "context (the preset's openai_max_context or the config's max_context), or lower the reply length.")


@dataclass(frozen=True, slots=True)
class ContextFit:
    """What fitting decided for one request.

    Attributes:
        limit: the context it had to fit.
        used: tokens of the request as sent (with the reply priming).
        dropped: refs of the history messages left out, oldest first.
        first_kept: ref of the oldest history message sent (None when none is).
        summaries: refs of the summary nodes sent.
    """

    limit: ContextLimit
    used: int
    dropped: tuple[tuple[int, int], ...] = ()
    first_kept: tuple[int, int] | None = None
    summaries: tuple[tuple[int, int], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The `context` record preview, header and trace carry: `{"limit", "max_context",
        "max_tokens", "source", "used", "dropped_messages", "first_kept", "summaries"}`, refs
        as "SESSION:SEQ"."""
        return {"limit": self.limit.limit, "max_context": self.limit.max_context,
                "max_tokens": self.limit.max_tokens, "source": self.limit.source, "used": self.used,
                "dropped_messages": len(self.dropped), "first_kept": _ref(self.first_kept),
                "summaries": [_ref(r) for r in self.summaries], **self.extra}


def _ref(ref: tuple[int, int] | None) -> str | None:
    return f"{ref[0]}:{ref[1]}" if ref is not None else None


def message_cost(count: Callable[[str], int], content: str, name: str | None = None) -> int:
    """Tokens of one message: count(content) + count(name) + `MESSAGE_OVERHEAD`."""
    return count(content) + (count(name) if name else 0) + MESSAGE_OVERHEAD


def admitted_context(history: Sequence[SurfaceMessage], context: tuple[tuple[str, str], ...]) -> list[NewEvent]:
    """`engine.step.context_events` (the context a step would admit now) on the surface's context
    messages only, kept per surface list (the same result: it reads nothing else); [] without context."""
    if not context:
        return []
    earlier = per_list(history, "fit.context_messages",
                       lambda: [m for m in history if m.source in CONTEXT_SOURCES])
    return context_events(earlier, context)


def sendable_history(history: Sequence[SurfaceMessage]) -> tuple[tuple[SurfaceMessage, ...], tuple[int, ...]]:
    """(the history messages a native request sends: no system section, nothing `sent_to_model`
    leaves out; the indexes of the summary nodes among them), kept for the same surface list
    (`assembly.memo.per_list`: a build walks 5,000 messages otherwise)."""
    def walk() -> tuple[tuple[SurfaceMessage, ...], tuple[int, ...]]:
        chat = per_prefix(history, "fit.sendable",  # only a grown history's new messages are looked at
                          lambda m: m if m.source != SYSTEM_PROMPT_SOURCE and sent_to_model(m) else SKIP)
        return chat, tuple(i for i, m in enumerate(chat) if m.source == SUMMARY_SOURCE)
    return per_list(history, "fit.sendable_history", walk)


def fit_surface(history: Sequence[SurfaceMessage], system: str, fixed: Sequence[tuple[str, str]], limit: ContextLimit,
                count: Callable[[str], int]) -> ContextFit:
    """Fit a native request: the system section, then the surface's history, then `fixed`.

    Args:
        history: the surface as the engine will send it (system section and unsent messages
            are skipped here).
        system: the system section this step sends ("" = none).
        fixed: (label, text) of what is sent after the history and never dropped (context
            admitted this step, the claimed input, a continued reply, an instruction); the
            label names it in a refusal.
        limit: the context to fit.
        count: the token counter.

    Returns:
        The fit: history dropped oldest first, whole messages; summaries always kept.

    Raises:
        ContextOverflow: system + summaries + `fixed` alone exceed the limit.
    """
    chat, pinned = sendable_history(history)

    def cost_of(index: int) -> int:  # only the messages the walk reaches are counted
        name = chat[index].body.get("name")
        return message_cost(count, chat[index].content, name if isinstance(name, str) else None)

    costs = {i: cost_of(i) for i in pinned}
    sizes = [("the system section", message_cost(count, system))] if system else []
    sizes += [(f"summary {_ref(chat[i].ref)}", costs[i]) for i in pinned]
    sizes += [(label, message_cost(count, text)) for label, text in fixed]
    needed = REPLY_PRIMING + sum(size for _, size in sizes)
    if needed > limit.limit:
        largest = max(sizes, key=lambda s: s[1]) if sizes else None
        raise ContextOverflow(needed, limit, f"{largest[0]} ({largest[1]} tokens)" if largest else "")
    remaining = limit.limit - needed
    keep = set(pinned)
    cut = -1  # index of the newest dropped message
    for index in range(len(chat) - 1, -1, -1):
        if index in keep:
            continue
        cost = cost_of(index)
        if cost <= remaining:
            remaining -= cost
            keep.add(index)
        else:
            cut = index
            break
    refs = per_list(history, "fit.sendable_refs", lambda: tuple(m.ref for m in chat))
    # Below the cut only summaries are kept: the dropped refs are that prefix without them.
    dropped = (refs[:cut + 1] if not pinned or pinned[0] > cut
               else tuple(r for i, r in enumerate(refs[:cut + 1]) if i not in keep))
    kept_history = [i for i in sorted(keep) if i > cut and chat[i].source != SUMMARY_SOURCE]
    return ContextFit(limit, limit.limit - remaining, dropped,
                      chat[kept_history[0]].ref if kept_history else None,
                      tuple(chat[i].ref for i in pinned))


def fit_native(assembly: Assembly, history: Sequence[SurfaceMessage], claimed: Sequence[str],
               limit: ContextLimit | None, count: Callable[[str], int], continue_text: str = "") -> Assembly:
    """`assembly` with the oldest history it cannot afford left out (`Assembly.omit`) and the
    fit recorded: `meta["context"]` (`ContextFit.to_json`), `meta["history_dropped"]` and an
    adjustment sentence naming the count and the first message kept. `limit` None = no fitting.

    Raises:
        ContextOverflow: as `fit_surface` (nothing has been stored or sent yet).
    """
    if limit is None:
        return assembly
    fixed = [("a context message", e.body["content"]) for e in admitted_context(history, assembly.context)]
    fixed += [("the message being sent", text) for text in claimed]
    if continue_text:
        fixed.append(("the reply being continued", continue_text))
    system = assembly.system or next((m.content for m in history if m.source == SYSTEM_PROMPT_SOURCE), "")
    fit = fit_surface(history, system, fixed, limit, count)
    meta = {**assembly.meta, "context": fit.to_json(), "history_dropped": len(fit.dropped),
            "budget": limit.limit, "token_counter": str(getattr(count, "name", "custom"))}
    if fit.dropped:
        noun = "message" if len(fit.dropped) == 1 else "messages"
        first = _ref(fit.first_kept) or "none"
        meta["adjustments"] = [*assembly.meta.get("adjustments", []),
                               f"{len(fit.dropped)} oldest history {noun} left out to fit the context of "
                               f"{limit.limit} tokens (from {limit.source}); first kept: {first}"]
    return replace(assembly, omit=frozenset(fit.dropped), meta=meta)
