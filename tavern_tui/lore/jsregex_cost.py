"""Provides the cost limits of translating a JavaScript regex (`jsregex`): the longest pattern,
the largest counted repeat and the largest estimated compiled size, the errors a refused pattern
raises, and `Cost`, the size estimate the translator keeps as it goes. Untrusted cards and books
carry these patterns: a pattern over a limit is refused before `regex` compiles it.
"""

from __future__ import annotations

MAX_PATTERN_CHARS = 1000
"""Longest JS pattern translated; real keys are a few dozen characters. Also bounds a `regex`
slow path: a literal of n characters searched in a text of exactly n characters that does not
match runs in ~n³ without checking its timeout (0.3 s at 1,000, 48 s at 5,000; measured)."""
MAX_REPEAT = 1000
"""Largest count allowed in a counted repeat `{n}`, `{n,}` or `{n,m}`."""
MAX_PROGRAM_UNITS = 10_000
"""Largest estimated compiled size: one unit per atom, multiplied by every enclosing counted repeat
(~260 bytes and ~4 µs of compile time each in `regex`, measured)."""


class JSRegexError(ValueError):
    """The pattern is not a valid JavaScript regex, or uses a construct we do not translate."""


class JSRegexTooCostly(JSRegexError):
    """A valid pattern refused because compiling it would cost too much (see the module's cost limits)."""


class Cost:
    """Estimates the compiled size of a pattern while it is translated: the sum of its atoms, a
    counted repeat multiplying the atom or group before it. Alternatives are summed (an upper bound)."""

    def __init__(self) -> None:
        self.stack: list[list[int]] = [[0, 0]]  # per open group: [total, size of the last item]

    def atom(self, size: int = 1, count: int = 1) -> None:
        """`count` atoms of `size` (the total only grows: checking once after them all raises alike)."""
        level = self.stack[-1]
        level[0] += size * count
        level[1] = size
        if level[0] > MAX_PROGRAM_UNITS:
            raise JSRegexTooCostly(f"pattern too large to compile (over {MAX_PROGRAM_UNITS} units)")

    def open(self) -> None:
        self.stack.append([0, 0])

    def close(self) -> None:
        if len(self.stack) > 1:  # (an unbalanced ")" is left for `regex` to reject)
            size = self.stack.pop()[0]
            self.atom(size)

    def repeat(self, count: int) -> None:
        if count > MAX_REPEAT:
            raise JSRegexTooCostly(f"counted repeat {{{count}}} is above {MAX_REPEAT}")
        level = self.stack[-1]
        last = level[1]
        level[0] -= last
        self.atom(last * max(count, 1))
