"""Hostile card text cannot crash or hang macro evaluation: nesting, re-parsing and output are bounded.

Reproductions: 300 nested `{{if}}` raised RecursionError in every chat and preview; 500 nested
`{{setvar}}` is held by the parser's depth cap; `{{newline::1000}}` × 20,000 ran past 60 s because
the legacy `{{trim}}` post-processor regex retried megabytes of newlines at every position.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tavern_tui.assembly.macros.engine import LIMIT_MARKER, MAX_NESTING, MacroContext, substitute


def _run(text: str) -> tuple[str, set[str]]:
    ctx = MacroContext(char="Alice", user="Bob")
    out = substitute(text, ctx)
    return out, ctx.limits_hit


def test_three_hundred_nested_ifs_stop_cleanly_with_the_marker() -> None:
    out, hit = _run("{{if 1}}" * 300 + "x" + "{{/if}}" * 300)
    assert hit == {"nesting too deep"}
    assert out.startswith(LIMIT_MARKER.format(reason="nesting too deep") + "{{if 1}}")
    assert out.endswith("x" + "{{/if}}" * 300)


def test_nesting_up_to_the_limit_still_evaluates() -> None:
    depth = MAX_NESTING // 2
    out, hit = _run("{{if 1}}" * depth + "x" + "{{/if}}" * depth)
    assert (out, hit) == ("x", set())


def test_five_hundred_nested_setvars_do_not_crash() -> None:
    ctx = MacroContext(char="Alice", user="Bob")
    substitute("{{setvar::a::" * 500 + "x" + "}}" * 500, ctx)
    assert ctx.limits_hit == {"nesting too deep"}


def test_legacy_trim_is_unchanged_and_linear() -> None:
    assert _run("a\r\n\n{{trim}}\n\r\nb{{TRIM}}c\n")[0] == "abc\n"
    assert _run("a\n\r{{trim}}b")[0] == "a\n\rb"  # a lone \r is not a line break unit
    out, hit = _run("\n" * 3_000_000 + "{{noop}}x")
    assert out == "\n" * 3_000_000 + "x" and hit == set()


def test_hostile_inputs_finish_within_bounds() -> None:
    # Bounds, not timings: each case in a subprocess with 1 GiB of address space and a generous timeout.
    script = textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from tavern_tui.assembly.macros.engine import MacroContext, substitute
        for text in ["{{newline::1000}}" * 20_000, "{{if 1}}" * 2000 + "x" + "{{/if}}" * 2000,
                     "{{if 1}}" * 60 + "y" * 100_000 + "{{/if}}" * 60]:
            ctx = MacroContext()
            substitute(text, ctx)
            print(sorted(ctx.limits_hit))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["['output too large']", "['nested blocks too large']",
                                           "['nested blocks too large']"]


def test_calls_sharing_a_context_share_one_step_budget() -> None:
    # A card repeating a 2 MB expansion in every field and book entry: each call is under its own
    # limit, so the step's shared budget is what stops the whole at STEP_EXPANSION characters.
    from dataclasses import replace

    from tavern_tui.assembly.macros.engine import MAX_EXPANSION, STEP_EXPANSION

    bomb = "{{newline::1000}}" * 2000  # 2,000,000 characters, a quarter of one call's limit
    ctx = MacroContext()
    produced, stopped = 0, 0
    for n in range(20):
        out = substitute(bomb, ctx if n % 2 else replace(ctx, reads=set()))  # copies share the budget
        produced += out.count("\n")
        stopped += LIMIT_MARKER.format(reason="output too large") in out
    assert 2_000_000 * 4 <= MAX_EXPANSION and produced <= STEP_EXPANSION
    assert produced == STEP_EXPANSION - STEP_EXPANSION % 1000  # whole macros until the budget ran out
    assert stopped == 20 - STEP_EXPANSION // 2_000_000
    assert substitute("{{newline::2}}", MacroContext()) == "\n\n"  # a new context has its own budget
