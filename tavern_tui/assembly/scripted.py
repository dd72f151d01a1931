"""Runs a playthrough's regex scripts and restricted templates around any assembler (issue 18).

`ScriptedAssembler` wraps the assembler a step uses (basic, preset-projection, slots- or
roles-first) without changing it:

- History: each user / assistant message is rewritten for the prompt as SillyTavern's
  `Generate` does (`coreChat.map`: `getRegexedString(mes, USER_INPUT | AI_OUTPUT, {isPrompt,
  depth})`, depth = `coreChat.length - index - 1`, `- 2` for a continue; the input being sent is
  the newest). The wrapped assembler (and world info, which scans `coreChat` in SillyTavern too)
  sees the rewritten text; the raw text stays in the log, and `Assembly.rewrite` tells the engine
  what to send in its place. Which scripts changed which message goes to `meta["regex_scripts"]`.
- World info: each fired entry gets the WORLD_INFO prompt scripts (depth = its depth when it is
  placed at a depth, else none), then its templates, one evaluation per entry.
- Templates elsewhere (card fields, preset prompts, the input): through `MacroContext.templates`,
  after the macros of each text. Their failures go to `meta["templates"]`.
- Every build has one evaluation budget (`lore.eval_budget.EvalBudget`) that its macros,
  templates, world-info keys and regex scripts share; what it refused is named in
  `meta["evaluation_budget"]` and in `meta["adjustments"]`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tavern_tui.assembly.macros import MacroContext, substitute_readonly
from tavern_tui.engine.log import SUMMARY_SOURCE, SYSTEM_PROMPT_SOURCE, SurfaceMessage
from tavern_tui.engine.step import CONTEXT_SOURCES
from tavern_tui.lore.eval_budget import EVAL_BUILD_BUDGET, EvalBudget
from tavern_tui.lore.model import Position
from tavern_tui.lore.regex_budget import REGEX_STEP_BUDGET, step_budget
from tavern_tui.lore.result import ActivatedEntry
from tavern_tui.scripts.regex_scripts import Placement, Regexed, ScriptSet
from tavern_tui.scripts.templates import TemplateRunner, apply_writes, template_snapshot

_NOT_CHAT = {*CONTEXT_SOURCES, SUMMARY_SOURCE, SYSTEM_PROMPT_SOURCE}


def _label(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first[:40]


@dataclass
class TemplateStage:
    """The templates of one build: one sandbox runner, the bound variable snapshot it reads
    (the macro context's local and global variables, plus `message_vars`), and what failed.

    `message_vars` is the per-message state a template may read first (`getvar` looks in message,
    then local, then global); the MVU integration puts `{"stat_data": …}` here.
    """

    runner: TemplateRunner = field(default_factory=TemplateRunner)
    message_vars: dict[str, Any] | None = None
    pending: list[dict[str, Any]] = field(default_factory=list)
    """Writes of templates rendered outside a build's working context (world-info entries):
    applied to the working context at the next `substitute` call (`MacroContext.templates`)."""

    def render(self, text: str, ctx: MacroContext, where: str, *, stage_writes: bool = True) -> str:
        """`text` rendered against `ctx`'s variables; `setvar` writes land in `ctx` (staged with the
        step's variables), or in `pending` when `stage_writes` is false. A failure renders the
        marker and is recorded under `where`."""
        snapshot = template_snapshot(ctx.local_vars, ctx.global_vars, self.message_vars)
        rendered = self.runner.render(text, snapshot, where=where)
        if stage_writes:
            apply_writes(rendered.writes, ctx.local_vars, ctx.global_vars)
        else:
            self.pending.extend(rendered.writes)
        return rendered.text

    def __call__(self, text: str, ctx: MacroContext) -> str:
        """The `MacroContext.templates` hook: stages `pending` writes into `ctx`, then renders."""
        if self.pending:
            writes, self.pending = tuple(self.pending), []
            apply_writes(writes, ctx.local_vars, ctx.global_vars)
        return self.render(text, ctx, _label(text)) if "<%" in text else text

    def report(self) -> dict[str, Any]:
        """`{"evaluations", "spent_ms", "failures": [{"where", "error"}]}` for the trace."""
        return {"evaluations": self.runner.evaluations, "spent_ms": round(self.runner.spent * 1000, 1),
                "failures": [{"where": where, "error": error} for where, error in self.runner.failures]}


def prompt_history(history: list[SurfaceMessage], scripts: ScriptSet, *, inputs: int = 0, continuing: bool = False,
                   macros: Callable[[str], str] | None = None) -> tuple[list[SurfaceMessage], dict, list[dict]]:
    """History as the prompt sends it: (the rewritten messages, `{ref: request message}` for those
    that changed (`Assembly.rewrite`), `[{"ref", "depth", "scripts"}]` naming the scripts applied to each message and
    `[{"ref", "script", "error"}]` entries for failures under the key "error")."""
    chat = [m for m in history if m.role in ("user", "assistant") and m.source not in _NOT_CHAT]
    depth_of = {m.ref: len(chat) - i - 1 + inputs - (1 if continuing else 0) for i, m in enumerate(chat)}
    out, rewrite, applied = [], {}, []
    for message in history:
        depth = depth_of.get(message.ref)
        if depth is None:
            out.append(message)
            continue
        placement = Placement.USER_INPUT if message.role == "user" else Placement.AI_OUTPUT
        result: Regexed = scripts.for_prompt(message.content, placement, depth, macros=macros)
        if result.applied or result.errors:
            applied.append({"ref": list(message.ref), "depth": depth, "scripts": list(result.applied),
                            **({"errors": [{"script": s, "error": e} for s, e in result.errors]}
                               if result.errors else {})})
        if result.text != message.content:
            rewrite[message.ref] = {**message.to_request(), "content": result.text}
            message = replace(message, content=result.text)
        out.append(message)
    return out, rewrite, applied


@dataclass
class ScriptedAssembler:
    """An assembler with the playthrough's regex scripts and templates around it (module docstring).

    Attributes:
        inner: the wrapped assembler (a dataclass with `macros`, `world_info`, `char`, `user`).
        scripts: the regex scripts (empty: none run).
        templates: evaluate EJS templates (the `templates` config switch).
        message_vars: per-message variables templates read first (see `TemplateStage`).
        message_texts, mvu_facts: MVU's derived message texts and the state facts (below).
    """

    inner: Any
    scripts: ScriptSet = field(default_factory=ScriptSet)
    templates: bool = True
    message_vars: dict[str, Any] | None = None
    message_texts: dict[tuple[int, int], str] = field(default_factory=dict)
    """Message ref → the text MVU stored back for it (its status placeholder appended; the log keeps the raw
    text): the history uses it before the regex scripts run, and the request sends it."""
    mvu_facts: dict[str, Any] | None = None
    """The MVU state the request is built from, for the trace (`meta["mvu"]`)."""
    eval_seconds: float = EVAL_BUILD_BUDGET
    """The evaluation budget of each build, in seconds of CPU time (`lore.eval_budget`)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _prepared(self, history: list[SurfaceMessage], claimed: list[str],
                  budget: EvalBudget) -> tuple[Any, list, dict, dict, Any]:
        inner = self.inner
        base = getattr(inner, "macros", None) or MacroContext()
        # This build's macros draw on their own counts and on the build's evaluation budget.
        base = replace(base, budget=replace(base.budget, deadline=budget))
        named = replace(base, char=getattr(inner, "char", base.char), user=getattr(inner, "user", base.user))

        def macros(text: str) -> str:
            return substitute_readonly(text, named) if "{{" in text else text

        stage = TemplateStage(runner=TemplateRunner(deadline=budget),
                              message_vars=self.message_vars) if self.templates else None
        continuing = getattr(inner, "generation_type", "normal") == "continue"
        mvu_rewrite: dict[tuple[int, int], dict[str, Any]] = {}
        if self.message_texts:
            derived = []
            for message in history:
                text = self.message_texts.get(message.ref)
                if text is not None and text != message.content:
                    message = replace(message, content=text)
                    mvu_rewrite[message.ref] = {**message.to_request(), "content": text}
                derived.append(message)
            history = derived
        with budget.part("regex scripts on the chat history"):
            rewritten, rewrite, applied = (prompt_history(history, self.scripts, inputs=len(claimed),
                                                          continuing=continuing, macros=macros)
                                           if self.scripts else (history, {}, []))
        rewrite = {**mvu_rewrite, **rewrite}
        changes: dict[str, Any] = {}
        if stage is not None or hasattr(inner, "macros"):
            changes["macros"] = replace(base, templates=stage) if stage is not None else base
        world_info = getattr(inner, "world_info", None)
        if world_info is not None and (self.scripts or stage is not None):
            changes["world_info"] = replace(world_info, content_hook=self._entry_hook(stage, macros, budget))
        info: dict[str, Any] = {}
        if self.mvu_facts is not None:
            info["mvu"] = {**self.mvu_facts, "derived_texts": sorted(list(ref) for ref in mvu_rewrite)}
        if self.scripts or self.scripts.blocked:
            info["regex_scripts"] = {"applied": applied, "blocked": list(self.scripts.blocked)}
        return (replace(inner, **changes) if changes else inner), rewritten, rewrite, info, stage

    def _entry_hook(self, stage: TemplateStage | None, macros: Callable[[str], str],
                    budget: EvalBudget) -> Callable[[ActivatedEntry], str]:
        scripts = self.scripts
        base = getattr(self.inner, "macros", None) or MacroContext()

        def hook(entry: ActivatedEntry) -> str:
            text = entry.content
            where = f"world info: {entry.book}/{entry.uid}" + (f" ({entry.comment})" if entry.comment else "")
            with budget.part(f"book '{entry.book}' entry {entry.uid} content"):
                if scripts:
                    depth = entry.depth if entry.position == Position.AT_DEPTH else None
                    text = scripts.for_prompt(text, Placement.WORLD_INFO, depth, macros=macros).text
                if stage is not None and "<%" in text:
                    text = stage.render(text, base, where, stage_writes=False)
            return text

        return hook

    @staticmethod
    def _finish(meta: dict[str, Any], info: dict[str, Any], stage: TemplateStage | None, budget: EvalBudget) -> None:
        meta.update(info)
        if stage is not None:
            if stage.runner.evaluations or stage.runner.failures:
                meta["templates"] = stage.report()
            stage.runner.close()
        meta["evaluation_budget"] = budget.to_json()
        if budget.refused:  # named where the person looks: the preview's and the trace's adjustments
            meta["adjustments"] = [*(meta.get("adjustments") or ()), budget.summary()]

    def _budget(self) -> EvalBudget:
        """A full evaluation budget for one build (`lore.eval_budget`), naming the card."""
        char = getattr(self.inner, "char", "")
        return EvalBudget(self.eval_seconds, owner=f"the card '{char}'" if char else "")

    def __call__(self, history: list[SurfaceMessage], claimed: list[str]) -> Any:
        """The wrapped assembler's `Assembly`, built from the prompt-side history, with `rewrite`
        set for the messages the scripts changed. Every untrusted evaluation of the build (macros,
        templates, world-info keys, regex scripts) shares one `EvalBudget` of `eval_seconds`."""
        budget = self._budget()
        # One regex budget for every search of the build (scripts and world-info keys), within it.
        with step_budget(REGEX_STEP_BUDGET, budget):
            inner, rewritten, rewrite, info, stage = self._prepared(history, claimed, budget)
            try:
                assembly = inner(rewritten, claimed)
            finally:
                if stage is not None:
                    stage.runner.close()
        meta = dict(assembly.meta)
        self._finish(meta, info, stage, budget)
        return replace(assembly, meta=meta, rewrite=rewrite)

    def build(self, history: list[SurfaceMessage], claimed: list[str]) -> Any:
        """A projecting assembler's `build`, on the prompt-side history (its request holds the text),
        within one `EvalBudget` as `__call__`."""
        budget = self._budget()
        with step_budget(REGEX_STEP_BUDGET, budget):
            inner, rewritten, _rewrite, info, stage = self._prepared(history, claimed, budget)
            try:
                built, meta, records = inner.build(rewritten, claimed)
            finally:
                if stage is not None:
                    stage.runner.close()
        self._finish(meta, info, stage, budget)
        return built, meta, records
