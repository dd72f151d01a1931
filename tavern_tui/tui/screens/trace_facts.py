"""The trace pane's facts: everything a request's detail shows after its messages (world info,
config requested vs effective, tools, attempts, usage, timing, resources, tokens by category and
adjustments), as one `Content` built from the stored trace. Pure text, no widgets: `TraceScreen`
mounts it (`facts_content`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from textual.content import Content

from tavern_tui.assembly.attribution import breakdown_text
from tavern_tui.engine.step import stages_text
from tavern_tui.tui.labels import plural
from tavern_tui.tui.screens.trace_requests import duration, moment_of
from tavern_tui.views import TraceView
from tavern_tui.views.traces import regex_script_lines


def decision_text(decision: Mapping[str, Any]) -> str:
    """"✓ Eldoria#1 shadowfang — key: key 'shadowfang' found in the input" (as the lore pane
    words a decision, from its stored JSON)."""
    mark = "✓" if decision.get("fired") else "✗"
    comment = f" {decision['comment']}" if decision.get("comment") else ""
    detail = f": {decision['detail']}" if decision.get("detail") else ""
    return (f"{mark} {decision.get('book', '?')}#{decision.get('uid', '?')}{comment} "
            f"— {decision.get('reason', '?')}{detail}")


def _pairs(mapping: Mapping[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (mapping or {}).items())


def _section(title: str, *rest: str | Content | tuple[str, str]) -> Content:
    return Content.assemble((f"{title}  ", "bold"), *rest)


def facts_content(view: TraceView, trace: Mapping[str, Any]) -> Content:
    """Everything after the messages: world info, config requested vs effective, tools, attempts,
    usage, timing, resources, tokens by category and adjustments, one helper each."""
    record: Mapping[str, Any] = trace.get("record") or {}
    parts = [*_world_info_facts(trace.get("world_info")), *_config_facts(view, trace), *_tool_facts(record),
             *_attempt_facts(view), _usage_fact(view), _timing_fact(trace.get("timing")),
             _resources_fact(trace.get("resources") or {}), *_attribution_facts(trace.get("attribution") or {}),
             *_adjustment_facts(trace.get("adjustments") or []),
             *(Content(line) for line in regex_script_lines(trace.get("regex_scripts")))]
    return Content("\n").join(parts)


def _world_info_facts(world_info: Any) -> list[Content]:
    """The world-info line (fired, skipped, unmatched, budget), then each fired and skipped entry."""
    if not isinstance(world_info, Mapping):
        return [_section("world info", ("not recorded for this request", "dim"))]
    fired: Sequence[Mapping[str, Any]] = world_info.get("fired") or []
    skipped: Sequence[Mapping[str, Any]] = world_info.get("skipped") or []
    from tavern_tui.lore.result import count_uids  # the lore engine loads with the first step, not the app

    no_match: Mapping[str, Sequence[Any]] = world_info.get("no_match") or {}
    unmatched = sum(count_uids(uids) for uids in no_match.values())
    budget = f"{world_info.get('tokens_used', '?')} of {world_info.get('budget', '?')} budget tokens"
    parts = [_section("world info", f"{len(fired)} fired · {len(skipped)} skipped · "
                      f"{unmatched} without a match · {budget}",
                      (" · over budget" if world_info.get("overflowed") else "", "$wi-over-budget"))]
    parts.extend(Content.styled(f"  {decision_text(d)}", "$wi-fired") for d in fired)
    parts.extend(Content.styled(f"  {decision_text(d)}",
                                "$wi-over-budget" if d.get("reason") == "over_budget" else "$wi-skipped")
                 for d in skipped)
    return parts


def _config_facts(view: TraceView, trace: Mapping[str, Any]) -> list[Content]:
    """The config requested; when the provider adjusted it, the effective one and what was omitted."""
    requested = (trace.get("record") or {}).get("config", view.config)
    adjusted = trace.get("config_adjusted") or {}
    parts = [_section("config requested", _pairs(requested) or ("none (the provider's defaults)", "dim"))]
    if adjusted:
        effective = adjusted.get("effective")
        parts.append(_section("config effective", ("same as requested", "dim") if effective == requested
                              else (_pairs(effective) or ("none", "dim"))))
        omitted = adjusted.get("omitted") or []
        parts.append(_section("omitted", ", ".join(map(str, omitted)) if omitted else ("nothing", "dim")))
    return parts


def _tool_facts(record: Mapping[str, Any]) -> list[Content]:
    """A step of a turn with tools (issue 19): the tools offered, the turn step, the tool results."""
    tools = record.get("tools")
    if not (isinstance(tools, Mapping) and tools.get("names")):
        return []
    parts = [_section("tools offered", ", ".join(map(str, tools["names"])),
                      (f" (schemas sha256 {str(tools.get('sha256'))[:12]}…)", "dim"))]
    turn = record.get("turn")
    if isinstance(turn, Mapping) and int(turn.get("step") or 1) > 1 and turn.get("first"):
        parts.append(_section("turn step", f"{turn['step']}, after the tool results below",
                              (f" (first request {turn['first'][0]}:{turn['first'][1]})", "dim")))
    for result in record.get("tool_results") or []:
        why = f": {result['reason']}" if result.get("reason") else ""
        parts.append(Content(f"  result {result.get('name')} [{result.get('status')}]{why}"))
    return parts


def _attempt_facts(view: TraceView) -> list[Content]:
    """How many attempts, then one line each."""
    attempts = view.attempts
    parts = [_section("attempts", str(len(attempts)) if attempts else ("one, no retries recorded", "dim"))]
    for number, attempt in enumerate(attempts, start=1):
        detail = " · ".join(f"{k} {_pairs(v) if isinstance(v, Mapping) else v}" for k, v in attempt.items()
                            if v not in (None, "", [], {}))
        parts.append(Content(f"  {number}. {detail}"))
    return parts


def _usage_fact(view: TraceView) -> Content:
    """The tokens the provider reported: prompt + completion = total."""
    usage = view.usage
    return _section("usage", ("not reported", "dim") if not usage else
                    f"{usage.get('prompt_tokens', '?')} prompt + {usage.get('completion_tokens', '?')} "
                    f"completion = {usage.get('total_tokens', '?')} tokens")


def _timing_fact(timing: Any) -> Content:
    """Submitted → first byte → last byte (each after the submit), and the stages when recorded."""
    submitted = moment_of(timing.get("submitted")) if isinstance(timing, Mapping) else None
    if submitted is None:
        return _section("timing", ("not recorded", "dim"))
    assert isinstance(timing, Mapping)
    steps = ["submitted"]
    for key, label in (("first_byte", "first byte"), ("last_byte", "last byte")):
        moment = moment_of(timing.get(key))
        steps.append(f"{label} " + ("—" if moment is None else
                                     f"+{duration((moment - submitted).total_seconds() * 1000)}"))
    stages = timing.get("stages")
    return _section("timing", " → ".join(steps)
                    + (f"\nstages: {stages_text(stages)}" if isinstance(stages, Mapping) and stages else ""))


def _resources_fact(resources: Mapping[str, Any]) -> Content:
    """The character, preset and world books the request was built from."""
    books = [f"{b.get('name', '?')} ({b.get('source', '?')}, {plural(int(b.get('entries', 0)), 'entry', 'entries')})"
             for b in resources.get("world_books") or [] if isinstance(b, Mapping)]
    used = [f"character #{resources['character_id']}"] if resources.get("character_id") is not None else []
    if resources.get("preset"):
        preset = resources["preset"]
        used.append(f"preset {preset.get('name', preset) if isinstance(preset, Mapping) else preset}")
    if books:
        used.append("books: " + "; ".join(books))
    return _section("resources", " · ".join(used) if used else ("none recorded", "dim"))


def _attribution_facts(attribution: Mapping[str, Any]) -> list[Content]:
    """The prompt's tokens by category, when attributed."""
    if not attribution.get("breakdown"):
        return []
    return [_section("tokens by category", breakdown_text(dict(attribution["breakdown"])),
                     (f" ({attribution.get('counter')})", "dim"))]


def _adjustment_facts(adjustments: Sequence[str]) -> list[Content]:
    """What the assembly adjusted to fit the request, one line each ("none" when nothing)."""
    return [_section("adjustments", "" if adjustments else ("none", "dim")),
            *(Content(f"  · {adjustment}") for adjustment in adjustments)]
