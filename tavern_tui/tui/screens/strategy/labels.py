"""Labels for the strategy pane: list rows, option notes, the preview's text (issue 5 §8;
DESIGN.md Strategies)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from textual.content import Content

from tavern_tui.assembly.attribution import breakdown_text, describe
from tavern_tui.assembly.strategies import StrategySpec
from tavern_tui.tools import offer_line
from tavern_tui.tui.labels import clip, compact_count, plural
from tavern_tui.views import PresetView

PREVIEW_LABEL = "PREVIEW — not sent"
"""The preview panel's title: what it shows is computed, never sent nor stored."""

DEFAULT_PRESET_NAME = "SillyTavern default"
"""How the preset list names "no preset bound" (SillyTavern's built-in default preset)."""

CONTENT_LIMIT = 400
"""Characters of a message's content the preview shows before cutting it with "…"."""

NAME_WIDTH = 28
"""Characters of a strategy's or preset's name that fit the list pane beside its mark."""

NOTE_WIDTH = 38
"""Characters of the line under a strategy or preset that fit the list pane (after the indent)."""

HINT = ("Only Enter changes the playthrough: it applies a strategy, binds a preset. c saves an edited "
        "copy (never applied). The preview shows the highlighted strategy with the bound preset.")
"""The lines under the lists."""

SHORT_HINT = "Only Enter applies or binds · c saves an edited copy (never applied)"
"""The line under the lists on a narrow terminal (one row at 80 columns)."""

LINE_WIDTH = NAME_WIDTH + 12
"""Characters of a list line that fit the list pane."""

STRATEGY_NOTES: Mapping[str, str] = {
    "compat": "card + world info in one system part",
    "preset-roles-first": "preset prompts keep their roles",
    "preset-slots-first": "preset as one system section",
    "projection": "SillyTavern's request from the preset",
}
"""A short line under the built-in strategies; a saved one shows its options instead."""

def strategy_label(spec: StrategySpec) -> str:
    """A strategy as the list and the notifications name it: "lean · v2 · preset-slots-first"
    ("compat · v1 · built in" for a built-in one)."""
    return f"{clip(spec.name, NAME_WIDTH)} · v{spec.version} · {'built in' if spec.builtin else spec.base}"


def options_note(spec: StrategySpec) -> str:
    """A strategy's options on one line ("examples=omit"), or its built-in note."""
    if spec.builtin:
        return STRATEGY_NOTES.get(spec.name, "")
    return ", ".join(f"{key}={value}" for key, value in spec.options.items()) or "no options"


def applied_note(spec: StrategySpec, applied: StrategySpec | None) -> str:
    """How `spec` (as listed) stands against the playthrough's applied snapshot: "● applied",
    "● v1 applied · v2 saved, not applied" (an older version of it applies), or ""."""
    if applied is None or applied.name != spec.name:
        return ""
    if applied.version == spec.version:
        return "● applied"
    return f"● v{applied.version} applied · v{spec.version} saved, not applied"


def strategy_prompt(spec: StrategySpec, applied: StrategySpec | None) -> Content:
    """A strategy's list line (name · version · base), how it stands against the applied one
    (`applied_note`) and its note or options under it."""
    name, _, rest = strategy_label(spec).partition(" · ")
    status = applied_note(spec, applied)
    note = options_note(spec)
    return Content.assemble(
        (name, "bold"), (" " + clip(f"· {rest}", LINE_WIDTH - len(name) - 1), "dim"),
        (f"\n  {clip(status, LINE_WIDTH - 2)}" if status else "", "bold $wi-bound"),
        (f"\n  {clip(note, LINE_WIDTH - 2)}" if note else "", "dim"))


def preset_prompt(preset: PresetView | None, bound: bool, label: str | None = None) -> Content:
    """A preset's list line (None: the built-in default): name (`label` when presets share a
    name: with its file and id), "● bound", its prompt counts."""
    if preset is None:
        name, summary = DEFAULT_PRESET_NAME, "built in"
    else:
        name = label or preset.name
        summary = f"{plural(preset.prompts, 'prompt')} · {preset.enabled} sent"
    return Content.assemble((clip(name, NAME_WIDTH), "bold"), ("  ● bound" if bound else "", "bold $wi-bound"),
                            (f"\n  {clip(summary, NOTE_WIDTH)}", "dim"))


def _role_style(role: str) -> str:
    return {"user": "$speaker-user", "assistant": "$speaker-character"}.get(role, "$speaker-system")


def preview_content(preview: Mapping[str, Any], preset_name: str) -> Content:
    """The preview panel's text: a summary line, each message ("role · source" then its content,
    cut to `CONTENT_LIMIT` characters), the call config, the token total, the context fit and the
    adjustments."""
    messages: Sequence[Mapping[str, Any]] = preview.get("messages", [])
    tokens: Mapping[str, Any] = preview.get("tokens", {})
    parts: list[Content] = [Content.assemble(
        (f"{preview.get('strategy', '?')}", "bold"), f" with {preset_name} · ",
        f"{plural(len(messages), 'message')} · ~{tokens.get('total', '?')} tokens",
        f" · {plural(len(preview['tools']), 'tool')} (listed below)" if preview.get("tools") else "",
        ("  (the next request if nothing is typed)", "dim"))]
    attributed: Sequence[Any] = preview.get("parts") or []
    for position, message in enumerate(messages):
        role = str(message.get("role", "?"))
        header = [role, str(message.get("source", "?"))]
        if message.get("name"):
            header.append(str(message["name"]))
        content = str(message.get("content", ""))
        if len(content) > CONTENT_LIMIT:
            content = content[:CONTENT_LIMIT].rstrip() + "…"
        parts.append(Content(""))
        parts.append(Content.styled(" · ".join(header), f"bold {_role_style(role)}"))
        parts.append(Content(content) if content else Content.styled("(empty)", "dim italic"))
        pieces = attributed[position] if position < len(attributed) else None
        if pieces and len(pieces) > 1:  # a message built from many prompts, part by part
            parts.extend(Content.styled(f"  · {p['start']}-{p['end']} ~{p['tokens']} tok  {describe(dict(p))}", "dim")
                         for p in pieces)
    parts.append(Content(""))
    config: Mapping[str, Any] = preview.get("config") or {}
    parts.append(Content.assemble(("config  ", "bold"), ", ".join(f"{k}={v}" for k, v in config.items())
                                  or ("none (the provider's defaults)", "dim")))
    detail = ", ".join(f"{k} {v}" for k, v in tokens.items() if k != "total")
    parts.append(Content.assemble(("tokens  ", "bold"), f"~{tokens.get('total', '?')} in total",
                                  (f" ({detail})" if detail else "", "dim")))
    if preview.get("breakdown"):
        parts.append(Content.assemble(("by category  ", "bold"), breakdown_text(dict(preview["breakdown"]))))
    if preview.get("tools"):  # what the request would carry (issue 19): name, risk, source (none: no line)
        parts.append(Content.assemble(("tools  ", "bold"), offer_line(list(preview["tools"]))))
    context = preview.get("context")
    if isinstance(context, Mapping) and context.get("limit"):
        # The same figures as the chat's status-line gauge (issue 16).
        fit = f"{compact_count(int(context.get('used') or 0))} / {compact_count(int(context['limit']))} tokens " \
              f"({context.get('source', '?')})"
        if context.get("dropped_messages"):
            fit += f" · {context['dropped_messages']} oldest left out, first kept {context.get('first_kept')}"
        if context.get("summaries"):
            fit += " · summaries " + ", ".join(map(str, context["summaries"]))
        parts.append(Content.assemble(("context  ", "bold"), fit))
    world_info = preview.get("world_info")
    if isinstance(world_info, Mapping) and "fired" in world_info:
        fired = world_info["fired"]
        count = len(fired) if isinstance(fired, Sequence) else fired
        parts.append(Content.assemble(("world info  ", "bold"), f"{count} fired"))
    adjustments: Sequence[str] = preview.get("adjustments") or []
    parts.append(Content.assemble(("adjustments  ", "bold"), "" if adjustments else ("none", "dim")))
    parts.extend(Content(f"  · {adjustment}") for adjustment in adjustments)
    return Content("\n").join(parts)
