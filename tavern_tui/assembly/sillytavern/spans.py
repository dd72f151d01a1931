"""Provides the attribution of SillyTavern-built parts (`assembly.attribution` rules): each
`PromptPart` of a build gets its `spans`, the preset prompt, card field, world-info entries,
Author's Note, injection pieces or history message it carries, in order, with exact offsets.

The builder calls `attach` on every part once it is final (before squashing, which moves the
spans with the text), and `injection_spans` where it joins in-chat prompts. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from tavern_tui.assembly.attribution import Span, locate, span
from tavern_tui.assembly.policy import POLICY_KIND
from tavern_tui.assembly.sillytavern.inputs import ROLES, PromptPart
from tavern_tui.formats.presets import ParsedPreset
from tavern_tui.lore.result import Buckets

__all__ = ["attach", "attach_all", "injection_spans", "world_info_pieces"]

_CARD_FIELDS = {"charDescription": "description", "charPersonality": "personality", "scenario": "scenario"}
_CONTROL_SOURCES = frozenset({"new_chat", "group_nudge", "continue", "impersonate", "prefill", "send_if_empty"})
_CHAT_PARTS = frozenset({"history", "input", "summary"})


def _with_spans(part: PromptPart, spans: tuple[Span, ...]) -> PromptPart:
    """`dataclasses.replace(part, spans=spans)` without its per-call walk over the fields (a
    build attaches every part, ~400 of them in `benchmarks/prompt_build`); `PromptPart` is a plain
    frozen dataclass (no `__post_init__`, no slots), so copying its fields is the same."""
    new = object.__new__(type(part))
    new.__dict__.update(part.__dict__)
    new.__dict__["spans"] = spans
    return new


def world_info_pieces(lore: Buckets, bucket: str, identifier: str) -> list[tuple[Span, str]]:
    """(detail, text) for each entry of one world-info bucket, in its order."""
    return [(span("world_info", 0, 0, identifier=identifier, book=book, uid=uid, title=title), text)
            for book, uid, title, text in lore.entries.get(bucket, [])]


def _whole(part: PromptPart, preset: ParsedPreset) -> Span:
    """One span over the whole part, from its source and identifier."""
    end = len(part.content)
    ident = part.identifier
    prompt = preset.prompts.get(ident)
    name = prompt.name if prompt is not None and prompt.name else None
    source = part.source
    if source == "marker" and ident in _CARD_FIELDS:
        return span("card", 0, end, identifier=ident, name=name, field=_CARD_FIELDS[ident])
    if source in ("history", "input", "summary"):  # a summary node stands for the chat it replaced
        return span("input" if source == "input" else "history", 0, end, ref=list(part.ref) if part.ref else None)
    if source in _CONTROL_SOURCES:
        kind = "history" if ident == "continueMessage" else "control"  # the continued reply is chat
        return span(kind, 0, end, identifier=ident)
    if source == "persona":
        return span("persona", 0, end, identifier=ident or "personaDescription", name=name)
    if source == "authors_note":
        return span("authors_note", 0, end, identifier=ident)
    if source == "examples":
        return span("examples", 0, end, identifier="dialogueExamples", speaker=part.name)
    if source == "world_info":
        return span("world_info", 0, end, identifier=ident)
    if source == "injection":
        return span("injection", 0, end, identifier=ident)
    if source == POLICY_KIND:
        return span(POLICY_KIND, 0, end, identifier=ident)
    return span("preset", 0, end, identifier=ident, name=name)


def attach(part: PromptPart, preset: ParsedPreset, lore: Buckets) -> PromptPart:
    """`part` with its spans: the ones it already has (an injection), the world-info entries a
    worldInfoBefore/After marker holds (one span for the marker when they cannot be found in
    order, e.g. after a format that rewrote them), or one span over the whole part."""
    if part.spans or not part.content:
        return part
    if part.source == "world_info" and part.identifier in ("worldInfoBefore", "worldInfoAfter"):
        bucket = "before" if part.identifier == "worldInfoBefore" else "after"
        found = locate(part.content, world_info_pieces(lore, bucket, part.identifier))
        if found:
            return _with_spans(part, tuple(found))
    return _with_spans(part, (_whole(part, preset),))


def _named(part: Span, preset: ParsedPreset) -> Span:
    prompt = preset.prompts.get(str(part.get("identifier")))
    return dict(part, name=prompt.name) if prompt is not None and prompt.name and "name" not in part else part


def attach_all(parts: list[PromptPart], preset: ParsedPreset, lore: Buckets) -> list[PromptPart]:
    """`attach` on every part, with example parts numbered by block (`block`, 0-based: each
    unnamed "[Example Chat]"-style header starts the next block)."""
    out: list[PromptPart] = []
    block = -1
    for part in parts:
        if part.source in _CHAT_PARTS and part.content and not part.spans:
            # A chat message (most parts of a long chat): `attach`'s one whole span, nothing to name.
            whole = {"kind": "input" if part.source == "input" else "history", "start": 0, "end": len(part.content)}
            if part.ref:
                whole["ref"] = list(part.ref)
            out.append(_with_spans(part, (whole,)))
            continue
        part = attach(part, preset, lore)
        if any("name" not in s and s.get("identifier") in preset.prompts for s in part.spans):
            part = _with_spans(part, tuple(_named(s, preset) for s in part.spans))
        if part.source == "examples":
            block += 1 if not part.name or block < 0 else 0
            part = _with_spans(part, tuple(dict(s, block=block) if s.get("kind") == "examples" else s
                                             for s in part.spans))
        out.append(part)
    return out


def injection_spans(content: str, prompts: list[Any], ext: list[tuple[str, str]], depth: int, role: str,
                    lore: Buckets) -> tuple[Span, ...]:
    """The pieces of one in-chat message (`InChatInjector.inject`): the preset prompts at this
    depth and order (`AbsolutePrompt`s), then the extension prompts (Author's Note, the card's
    depth prompt, world info @depth split into its entries), each with `depth` and `role`.
    One span for the whole message when the pieces cannot be found in order."""
    pieces: list[tuple[Span, str]] = []
    for prompt in prompts:
        kind = "authors_note" if prompt.identifier == "authorsNote" else "injection"
        pieces.append((span(kind, 0, 0, identifier=prompt.identifier, depth=depth, role=role), prompt.content))
    for ident, text in ext:
        if ident == "worldInfoDepth":
            key = f"depth:{depth}:{ROLES.index(role) if role in ROLES else 0}"
            entries = [(dict(d, depth=depth, role=role), t) for d, t in world_info_pieces(lore, key, ident)]
            if entries and locate(text, entries) is not None:
                pieces += entries
                continue
            pieces.append((span("world_info", 0, 0, identifier=ident, depth=depth, role=role), text))
        else:
            kind = "authors_note" if ident == "authorsNote" else "injection"
            pieces.append((span(kind, 0, 0, identifier=ident, depth=depth, role=role), text))
    found = locate(content, pieces)
    if found is None:
        return (span("injection", 0, len(content), identifier="+".join(
            [p.identifier for p in prompts] + [i for i, _ in ext]), depth=depth, role=role),)
    return tuple(found)
