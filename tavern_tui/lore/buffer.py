"""Provides `ScanBuffer`: the text each entry's keys are matched against, built once per shape.

Rule: SillyTavern 1.18 `WorldInfoBuffer` (public/scripts/world-info.js; format-digest §b.5.1):

    "\\x01" + messages[0:depth].join("\\n\\x01")          newest message first, each trimmed
      + "\\n\\x01" + <each extra source the entry opts into, if non-empty>
      + "\\n\\x01" + injections.join("\\n\\x01")            prompts flagged for WI scanning
      + "\\n\\x01" + recursion.join("\\n\\x01")             not during min-activation loops

With an effective depth <= 0 the whole buffer is "" (no extra sources, no recursion either).
Depth is capped at 1000 (`MAX_SCAN_DEPTH`). Many entries share a shape (depth, extra sources,
with/without recursion), so texts are cached per shape and per recursion length.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from tavern_tui.lore.context import EXTRA_SOURCES, ActivationContext
from tavern_tui.lore.jsregex import js_trim
from tavern_tui.lore.timed import EntryKey

MAX_SCAN_DEPTH = 1000
MATCHER = "\x01"
JOINER = "\n" + MATCHER

ExtraFlags = tuple[bool, bool, bool, bool, bool, bool]
"""Which extra sources an entry scans, in `context.EXTRA_SOURCES` order."""


@dataclass(frozen=True)
class Segment:
    """One piece of a scan buffer, for telling where a key was found.

    Attributes:
        where: the decision's `matched_in` (message ref, "input", source name, "injection",
            "entry:<book>/<uid>").
        label: human words for it ("message 3 (Alice)", "the input", "the scenario").
        text: the piece as it appears in the buffer.
        from_entry: for recursion pieces, the entry whose content this is.
    """

    where: Any
    label: str
    text: str
    from_entry: EntryKey | None = None

    @cached_property
    def matcher(self) -> str:
        """`MATCHER + text`: the piece as a key matcher sees it on its own (kept: a recursion
        piece is asked about in every loop and step, and a kept string keeps its hash)."""
        return MATCHER + self.text


class ScanBuffer:
    """The scan texts of one activation.

    Args:
        ctx: messages, input, extra sources and injections.
        include_names: prefix messages with `Name: ` (`world_info_include_names`).
    """

    def __init__(self, ctx: ActivationContext, include_names: bool) -> None:
        self._ctx, self._include_names = ctx, include_names
        # Message segments are made on demand, newest first: a scan reads `depth` of them,
        # and a chat may hold thousands.
        self._newest_first: list[Segment] = []
        if ctx.input:
            text = f"{ctx.user_name}: {ctx.input}" if include_names else ctx.input
            self._newest_first.append(Segment("input", "the input", js_trim(text)))
        self._limit = min(MAX_SCAN_DEPTH, len(self._newest_first) + len(ctx.messages))
        self.extras = [
            Segment(attr, f"the {attr.replace('_', ' ')}", getattr(ctx, attr)) if getattr(ctx, attr) else None
            for attr, _flag in EXTRA_SOURCES
        ]
        self.injections = [Segment("injection", "an injected prompt", text) for text in ctx.injections if text]
        self.recursion: list[str] = []
        self.recursion_pieces: list[Segment] = []
        self._added = 0  # pieces of the last recursion text
        self._cache: dict[tuple[int, ExtraFlags, bool, int], str] = {}

    def messages(self, depth: int) -> list[Segment]:
        """The newest `depth` message segments (the input first), at most `MAX_SCAN_DEPTH`."""
        made = self._newest_first
        wanted = min(depth, self._limit)
        if len(made) < wanted:
            ctx, total = self._ctx, len(self._ctx.messages)
            offset = len(made) - (1 if ctx.input else 0)  # messages already made, newest first
            for message in reversed(ctx.messages[total - (wanted - len(made)) - offset:total - offset]):
                offset += 1
                text = f"{message.name}: {message.text}" if self._include_names else message.text
                ref = message.ref if message.ref is not None else total - offset + 1
                # A stored ref is a (session, seq) pair that means nothing to a person: say how far back
                # it is, counting the input (the line being sent) as the newest, as the request has it.
                back = offset + (1 if ctx.input else 0)
                newest = "the newest message" if back == 1 else f"the {_ordinal(back)} newest message"
                label = (f"{newest} ({message.name})" if isinstance(message.ref, tuple)
                         else f"message {_ref_label(ref)} ({message.name})")
                made.append(Segment(ref, label, js_trim(text)))
        return made[:wanted]

    def add_recursion(self, text: str, pieces: list[Segment]) -> None:
        """Append one loop's recursion text (contents joined with "\\n") and its per-entry pieces."""
        self.recursion.append(text)
        self.recursion_pieces.extend(pieces)
        self._added = len(pieces)

    def previous(self, depth: int, extras: ExtraFlags) -> tuple[str, int] | None:
        """The buffer `text(depth, extras, True)` was before the last `add_recursion`, and how many
        of today's `segments(depth, extras, True)` are its pieces; None if that text was not made
        (only a text already made is of use: its keys are known)."""
        if not self.recursion or depth <= 0:
            return None
        before = self._cache.get((depth, extras, True, len(self.recursion) - 1))
        if before is None:
            return None
        return before, len(self.segments(depth, extras, True)) - self._added

    def text(self, depth: int, extras: ExtraFlags, with_recursion: bool) -> str:
        """The buffer for an entry scanning `depth` messages and the given extra sources."""
        token = (depth, extras, with_recursion, len(self.recursion) if with_recursion else 0)
        cached = self._cache.get(token)
        if cached is not None:
            return cached
        if depth <= 0:
            result = ""
        else:
            parts = [MATCHER + JOINER.join(m.text for m in self.messages(depth))]
            parts.extend(JOINER + seg.text for seg, on in zip(self.extras, extras) if on and seg is not None)
            if self.injections:
                parts.append(JOINER + JOINER.join(seg.text for seg in self.injections))
            if with_recursion and self.recursion:
                parts.append(JOINER + JOINER.join(self.recursion))
            result = "".join(parts)
        self._cache[token] = result
        return result

    def segments(self, depth: int, extras: ExtraFlags, with_recursion: bool) -> list[Segment]:
        """The pieces of `text(depth, extras, with_recursion)` in buffer order."""
        if depth <= 0:
            return []
        pieces = self.messages(depth)
        pieces.extend(seg for seg, on in zip(self.extras, extras) if on and seg is not None)
        pieces.extend(self.injections)
        if with_recursion:
            pieces.extend(self.recursion_pieces)
        return pieces


def _ordinal(n: int) -> str:
    """"1st", "2nd", "3rd", "11th", "22nd"."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _ref_label(ref: Any) -> str:
    if isinstance(ref, tuple):
        return "/".join(str(part) for part in ref)
    return str(ref)
