"""The macro engine's entry points: `substitute()` and its variants, and `history_expander` (the grammar is in
`parser`, the walk in `evaluator`, the macros in `handlers`, the rules in the package docstring).

Rule source: SillyTavern 1.18 `public/scripts/macros/engine/MacroEngine.js` (evaluate: pre-processors, parse,
walk, post-processors).
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace

from tavern_tui.assembly.macros.context import (
    STEP_CALLS,
    STEP_EXPANSION,
    STEP_REPARSE,
    MacroBudget,
    MacroContext,
)
from tavern_tui.assembly.macros.evaluator import LIMIT_MARKER, MAX_CALLS, MAX_EXPANSION, MAX_NESTING
from tavern_tui.assembly.macros.evaluator import Evaluator as _Evaluator
from tavern_tui.assembly.macros.handlers.core import is_falsy
from tavern_tui.assembly.macros.registry import POST_PASSES
from tavern_tui.assembly.macros.scopes import trim_scoped

__all__ = ["LIMIT_MARKER", "MAX_CALLS", "MAX_EXPANSION", "MAX_NESTING", "STEP_CALLS", "STEP_EXPANSION",
           "STEP_REPARSE", "MacroBudget", "MacroContext", "history_expander", "is_falsy", "substitute",
           "substitute_in", "substitute_readonly", "trim_scoped"]


def _post_passes(text: str, ctx: MacroContext) -> str:
    for run in POST_PASSES:
        text = run(text, ctx)
    return text


def substitute(text: str, ctx: MacroContext) -> str:
    """Resolve every SillyTavern macro in `text` against `ctx` and return the result.

    Variable macros mutate `ctx.local_vars`/`ctx.global_vars`. Unknown or malformed macros are left as written.
    If a limit (output size, number of calls, nesting depth) stops evaluation, the rest is left as written,
    `LIMIT_MARKER` is added where it stopped and `ctx.limits_hit` names the limit. Never executes code.
    Rules: ST 1.18 MacroEngine.evaluate (pre-processors, parse, walk, post-processors).
    """
    ctx.limits_hit = set()
    if not text:
        return ""
    # Nothing a pre-processor, the parser or a post-processor acts on (no brace, no legacy <USER>
    # marker, no escape, no else marker): the walk would give the text back as it is.
    plain = "{" not in text and "<" not in text and "\\" not in text and "\u0000" not in text
    out = text if plain else _post_passes(_Evaluator(text, ctx).run(), ctx)
    if ctx.templates is not None and ("<%" in out or getattr(ctx.templates, "pending", None)):
        out = ctx.templates(out, ctx)
    return out


def substitute_in(text: str, ctx: MacroContext, where: str) -> str:
    """`substitute`, with `where` (e.g. "description") naming the text in the refusals of the build's
    evaluation budget (`MacroBudget.deadline`, `lore.eval_budget`)."""
    deadline = ctx.budget.deadline
    if deadline is None:
        return substitute(text, ctx)
    with deadline.part(where):
        return substitute(text, ctx)


def substitute_readonly(text: str, ctx: MacroContext) -> str:
    """`substitute` on a copy of `ctx`'s variables: the result, with no variable changed and no read recorded."""
    if "{{" not in text and "<" not in text:
        return text
    return substitute(text, replace(ctx, local_vars=copy.deepcopy(ctx.local_vars),
                                    global_vars=copy.deepcopy(ctx.global_vars), reads=set()))


_HISTORY_CACHE_SIZE = 20_000
_history_cache: OrderedDict[tuple[str, tuple], str] = OrderedDict()
_history_lock = threading.Lock()


def _fingerprint(ctx: MacroContext) -> tuple:
    return (ctx.char, ctx.user, ctx.persona, ctx.description, ctx.personality, ctx.scenario, ctx.mes_examples,
            ctx.mes_examples_raw, ctx.char_prompt, ctx.char_instruction, ctx.char_depth_prompt, ctx.creator_notes,
            ctx.char_version, ctx.first_message, tuple(ctx.alternate_greetings), ctx.original, ctx.chat_id,
            ctx.chat_id_hash, repr(ctx.pick_reroll_seed))


def history_expander(ctx: MacroContext) -> Callable[[str], str]:
    """`substitute_readonly` for the stored chat, with the expansions cached across builds.

    SillyTavern expands the stored messages again on every prompt build without writing variables;
    a message's expansion is kept (keyed by its text and the card fields, names and chat id, read
    once here) when every macro it ran is in `evaluator.PURE`; one that read a variable, the time, chance,
    the chat's state or a runtime value is expanded again each time, since its result can change.
    """
    fingerprint = _fingerprint(ctx)

    def expand(text: str) -> str:
        if "{{" not in text and "<" not in text:
            return text
        key = (text, fingerprint)
        with _history_lock:
            hit = _history_cache.get(key)
            if hit is not None:
                _history_cache.move_to_end(key)
                return _post_passes(hit, ctx)
        copy_ctx = replace(ctx, local_vars=copy.deepcopy(ctx.local_vars), global_vars=copy.deepcopy(ctx.global_vars),
                           reads=set(), limits_hit=set())
        evaluator = _Evaluator(text, copy_ctx)
        result = evaluator.run()
        if evaluator.pure and not copy_ctx.limits_hit:
            with _history_lock:
                _history_cache[key] = result
                while len(_history_cache) > _HISTORY_CACHE_SIZE:
                    _history_cache.popitem(last=False)
        return _post_passes(result, copy_ctx)

    return expand
