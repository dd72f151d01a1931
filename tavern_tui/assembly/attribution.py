"""Provides per-prompt attribution: which prompt, card field, world-info entry, persona, example
block, Author's Note, in-chat injection or history message each stretch of a request message came
from, with character offsets and token counts, and the per-category token breakdown.

Rules (issue 24 item 2): every message lists its parts in order; a part is a dict
`{"kind", "start", "end", "tokens", "category", ...detail}` whose `content[start:end]` is exactly
that contribution's text as sent (the separators between parts belong to no part). Detail by
kind: "preset" (`identifier`, `name`: the preset prompt), "card" (`identifier`, `field`: the card
field a marker carries), "world_info" (`book`, `uid`, `title`, and `identifier`: the marker or
worldInfoDepth), "persona", "examples" (`block`: 0-based), "authors_note", "injection"
(`identifier`, `depth`, `role`), "history"/"input" (`ref`), "context" (`identifier`), "control"
(`identifier`: new-chat line, continue nudge, impersonation prompt, prefill, send-if-empty).

The categories follow SillyTavern's prompt itemization (`script.js` `itemizedParams`, the
chat-completion branch): system (main, nsfw, jailbreak, nudge, impersonate, the start/new-chat
line and the other preset prompts), description, personality, scenario, examples, world_info,
persona, chat_history, injections (Author's Note and in-chat prompts at a depth, ST's "extensions"
/ anchors), plus `framing` for what no part holds (separators, the `name` field and the
per-message overhead) so a breakdown sums exactly to the request's count.

Token counts: a part's `tokens` is how much the message's count grows through it, i.e.
count(content[:end]) − count(content[:previous end]) (the gap before it included), so the parts of
a message plus its framing sum to count(content) + count(name) + MESSAGE_OVERHEAD exactly, whatever
the counter. Pure: no I/O; metadata only, never part of what a request hash covers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ["CATEGORIES", "MESSAGE_OVERHEAD", "attribute", "breakdown", "breakdown_text", "category_of",
           "default_parts", "describe", "join_spans", "locate", "message_tokens", "shift", "span", "split_persona",
           "with_tokens"]

MESSAGE_OVERHEAD = 3
"""Framing tokens of one chat message (OpenAI's ~3 per message; `budget.MESSAGE_OVERHEAD`)."""

CATEGORIES = ("system", "description", "personality", "scenario", "examples", "world_info", "persona",
              "chat_history", "injections", "framing")
"""Breakdown categories, in SillyTavern's itemization order, then `framing`."""

_CARD_CATEGORY = {"description": "description", "personality": "personality", "scenario": "scenario"}
_KIND_CATEGORY = {"preset": "system", "control": "system", "examples": "examples", "world_info": "world_info",
                  "persona": "persona", "history": "chat_history", "input": "chat_history",
                  "authors_note": "injections", "injection": "injections", "context": "injections"}

Span = dict[str, Any]


def span(kind: str, start: int, end: int, **detail: Any) -> Span:
    """One part: `kind`, offsets `[start, end)` into its message's content, and its detail."""
    return {"kind": kind, "start": start, "end": end, **{k: v for k, v in detail.items() if v is not None}}


def shift(spans: Iterable[Span], by: int) -> list[Span]:
    """`spans` moved `by` characters (a text placed after `by` characters of another)."""
    return [{**s, "start": s["start"] + by, "end": s["end"] + by} for s in spans]


def join_spans(pieces: Sequence[tuple[str, Sequence[Span]]], separator: str) -> tuple[str, list[Span]]:
    """`separator.join(texts)` and the pieces' spans moved to where each text lands."""
    text_parts: list[str] = []
    spans: list[Span] = []
    at = 0
    for index, (text, piece_spans) in enumerate(pieces):
        if index:
            text_parts.append(separator)
            at += len(separator)
        spans += shift(piece_spans, at)
        text_parts.append(text)
        at += len(text)
    return "".join(text_parts), spans


def locate(content: str, pieces: Sequence[tuple[Span, str]], start: int = 0) -> list[Span] | None:
    """Spans for texts known to sit in `content` in this order (each found from where the previous
    ended; leading/trailing whitespace of a text is not part of it). `pieces` are (detail, text),
    the detail a `span(...)` whose offsets are replaced. None when a text is not found in order."""
    found: list[Span] = []
    cursor = start
    for detail, text in pieces:
        needle = text.strip()
        if not needle:
            continue
        at = content.find(needle, cursor)
        if at < 0:
            return None
        found.append({**detail, "start": at, "end": at + len(needle)})
        cursor = at + len(needle)
    return found


def category_of(part: Span) -> str:
    """The breakdown category of a part (module docstring)."""
    kind = part.get("kind", "")
    if kind == "card":
        return _CARD_CATEGORY.get(str(part.get("field")), "system")
    if kind == "world_info" and part.get("identifier") == "worldInfoDepth":
        return "world_info"  # ST counts world info wherever it lands under world info
    return _KIND_CATEGORY.get(kind, "system")


def message_tokens(message: dict[str, Any], count: Callable[[str], int]) -> int:
    """A message's count: count(content) + count(name) + `MESSAGE_OVERHEAD` (`ChatBudget.cost`)."""
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    name = message.get("name")
    return count(text) + (count(name) if isinstance(name, str) and name else 0) + MESSAGE_OVERHEAD


def with_tokens(content: str, spans: Sequence[Span], count: Callable[[str], int]) -> list[Span]:
    """`spans` (in order, not overlapping) with `tokens` and `category` set (module docstring)."""
    out: list[Span] = []
    before = 0
    # Prefixes go to the counter's own function, not its cache (a TokenCounter keeps every text
    # it counted; a long system section's prefixes would crowd out the messages' counts).
    uncached = getattr(count, "count", count)
    for part in sorted(spans, key=lambda s: s["start"]):
        end = part["end"]
        upto = count(content) if end == len(content) else (int(uncached(content[:end])) if end else 0)
        out.append({**part, "tokens": upto - before, "category": category_of(part)})
        before = upto
    return out


def breakdown(messages: Sequence[dict[str, Any]], parts: Sequence[Sequence[Span] | None],
              count: Callable[[str], int]) -> dict[str, int]:
    """Tokens per category over a request (`CATEGORIES`, plus "total" = the request's count).

    Args:
        messages: the request messages (None entries are skipped: a body that did not verify).
        parts: each message's parts from `with_tokens`; None = unattributed (all of it goes to
            the category of no part: `framing` for its overhead, "unattributed" for its content).
        count: the token counter the parts were counted with.
    """
    totals = dict.fromkeys(CATEGORIES, 0)
    for message, message_parts in zip(messages, parts):
        if message is None:
            continue
        whole = message_tokens(message, count)
        used = 0
        for part in message_parts or ():
            totals[part["category"]] = totals.get(part["category"], 0) + int(part["tokens"])
            used += int(part["tokens"])
        if message_parts is None:
            content = message.get("content")
            text = content if isinstance(content, str) else ""
            totals["unattributed"] = totals.get("unattributed", 0) + count(text)
            used += count(text)
        totals["framing"] += whole - used
    totals["total"] = sum(v for k, v in totals.items())
    return totals


def default_parts(message: dict[str, Any], source: str, ref: Sequence[int] | None = None,
                  identifier: str = "") -> list[Span] | None:
    """The parts of a message that carries one thing: a history message or the input (`ref`), a
    context message (`identifier`), or a request-only control message (continue text, nudge,
    impersonation prompt). None for anything else (no attribution known)."""
    content = message.get("content")
    end = len(content) if isinstance(content, str) else 0
    if source in ("history", "input", "summary"):  # a summary node stands for the chat it replaced
        return [span("input" if source == "input" else "history", 0, end, ref=list(ref) if ref else None)]
    if source == "context":
        return [span("context", 0, end, identifier=identifier or None)]
    if source == "request-only":
        kind = "history" if message.get("role") == "assistant" else "control"  # the continued reply is chat
        return [span(kind, 0, end, identifier="continueMessage" if kind == "history" else None)]
    return None


def attribute(messages: Sequence[dict[str, Any] | None], spans: Sequence[Sequence[Span] | None],
              count: Callable[[str], int]) -> dict[str, Any]:
    """Parts with tokens for every message and the request's breakdown.

    Args:
        messages: the request as sent (None = a body that did not verify: no parts).
        spans: each message's spans (offsets only) or None (unattributed); spans whose offsets do
            not fit the message are dropped as unattributed rather than shown wrong.
        count: the token counter.

    Returns:
        `{"messages": [[part, ...] | None, ...], "breakdown": {category: tokens, ..., "total"},
        "counter": the counter's name}`.
    """
    parts: list[list[Span] | None] = []
    for message, message_spans in zip(messages, spans):
        content = message.get("content") if message is not None else None
        if message is None or not isinstance(content, str) or message_spans is None:
            parts.append(None)
            continue
        if len(message_spans) == 1 and message_spans[0]["end"] == len(content) \
                and 0 <= message_spans[0]["start"] <= len(content):
            # One part up to the end (a history message, the input): `with_tokens` of it, directly.
            only = message_spans[0]
            parts.append([{**only, "tokens": count(content), "category": category_of(only)}])
            continue
        ordered = sorted(message_spans, key=lambda s: s["start"])
        fits = all(0 <= s["start"] <= s["end"] <= len(content) for s in ordered) and all(
            a["end"] <= b["start"] for a, b in zip(ordered, ordered[1:]))
        parts.append(with_tokens(content, ordered, count) if fits else None)
    return {"messages": parts, "breakdown": breakdown([m for m in messages], parts, count),  # type: ignore[arg-type]
            "counter": str(getattr(count, "name", "custom"))}


def describe(part: Span) -> str:
    """One line naming a part: what it is and where it came from, e.g. `preset main "Main Prompt"`,
    `world info Gull Rock#2 "Lamp history" (worldInfoAfter)`, `in-chat injection x @depth 1 user`,
    `history 1:4`."""
    kind = part.get("kind")
    ident = part.get("identifier") or ""
    name = f' "{part["name"]}"' if part.get("name") else ""
    where = f" @depth {part['depth']} {part.get('role', '')}".rstrip() if part.get("depth") is not None else ""
    if kind == "preset":
        text = f"preset {ident}{name}"
    elif kind == "card":
        text = f"card {part.get('field')} ({ident}{name})"
    elif kind == "world_info":
        title = f' "{part["title"]}"' if part.get("title") else ""
        entry = f"{part.get('book')}#{part.get('uid')}{title} " if part.get("book") is not None else ""
        text = f"world info {entry}({ident})"
    elif kind == "examples":
        text = f"example block {part.get('block', '?')}" + (f" ({part['speaker']})" if part.get("speaker") else "")
    elif kind == "persona":
        text = f"persona entry {part['entry']}" if part.get("entry") is not None else "persona"
    elif kind == "authors_note":
        text = "Author's Note"
    elif kind == "injection":
        text = f"in-chat injection {ident}{name}"
    elif kind in ("history", "input"):
        ref = part.get("ref")
        text = f"{kind} {ref[0]}:{ref[1]}" if ref else str(kind)
    elif kind == "context":
        text = f"context {ident}".rstrip()
    else:
        text = f"{kind} {ident}".rstrip()
    return text + where


def breakdown_text(totals: dict[str, int]) -> str:
    """`system 19 · description 712 · … · total 1753`: the non-zero categories in order."""
    shown = [f"{k.replace('_', ' ')} {v}" for k, v in totals.items() if k != "total" and v]
    return " · ".join([*shown, f"total {totals.get('total', 0)}"])


def split_persona(spans: Sequence[Span] | None, content: str, entry_ids: Sequence[int]) -> list[Span] | None:
    """`spans` with each persona part cut into its entries (`entry`: the persona entry id), when
    its text has exactly one line per entry (the persona section is its entries joined by newlines,
    `persona.model.render_persona`); a part whose lines do not match the entries stays whole."""
    if spans is None or not entry_ids:
        return None if spans is None else list(spans)
    out: list[Span] = []
    for part in spans:
        if part.get("kind") != "persona":
            out.append(part)
            continue
        lines = content[part["start"]:part["end"]].split("\n")
        if len(lines) != len(entry_ids):
            out.append(part)
            continue
        at = part["start"]
        for line, entry in zip(lines, entry_ids):
            out.append({**part, "start": at, "end": at + len(line), "entry": entry})
            at += len(line) + 1
    return out
