"""The macro engine against SillyTavern 1.18's own engine tests, plus rules pinned from its code.

`data/st118_macro_engine_cases.json` holds the input/expected pairs of every test in ST 1.18
`tests/frontend/MacroEngine.e2e.js` (commit 51ad27fb8) that evaluates text with `MacroEngine.evaluate` and
compares the whole output with a literal string (`line` = the test's line in that file). ST's test env has
user "User", character "Character" and the given starting variables; steps of one test share variables.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tavern_tui.assembly.macros import LIMIT_MARKER, MacroContext, substitute

CASES = json.loads((Path(__file__).parent / "data" / "st118_macro_engine_cases.json").read_text("utf-8"))


def make(**fields: Any) -> MacroContext:
    return MacroContext(user="User", char="Character", **fields)


@pytest.mark.parametrize("case", CASES, ids=[f"L{c['line']}" for c in CASES])
def test_st_engine_case(case: dict[str, Any]) -> None:
    local: dict[str, object] = {}
    glob: dict[str, object] = {}
    for step in case["steps"]:
        local.update(step["local"] or {})
        glob.update(step["global"] or {})
        assert substitute(step["input"], make(local_vars=local, global_vars=glob)) == step["expected"]


def test_the_cases_cover_every_grammar_area() -> None:
    groups = {c["group"] for c in CASES}
    for area in ("Nested macros", "Unnamed arguments", "Scoped macros", "scoped content auto-trim",
                 "{{if}} conditional macro", "Variable Shorthand Syntax", "Comment macro", "Unknown macros",
                 "Legacy compatibility", "Macro flags"):
        assert area in groups


# --- rules pinned from the code where the docs say otherwise -------------------------------------------------

def test_no_is_truthy() -> None:
    # Usage/macros.md lists "no" as falsy; utils.js isFalseBoolean checks only off/false/0 (and "" in core-macros).
    text = "|".join(f"{{{{if {c}}}}}T{{{{else}}}}F{{{{/if}}}}" for c in ("no", "off", "FALSE", "0"))
    assert substitute(text, make()) == "T|F|F|F"


@pytest.mark.parametrize(("text", "expected"), [
    ("{{if ::x}}T{{else}}F{{/if}}", "T"),  # condition "x" is text, truthy
    ("{{if !0}}yes{{/if}}", "yes"),
    ("{{if ! }}yes{{else}}no{{/if}}", "yes"),  # condition "!" ⇒ "" negated
    ("{{if .v}}T{{else}}F{{/if}}", "F"),
    ("{{if description}}has{{else}}none{{/if}}", "none"),  # a 0-argument macro name is resolved first
])
def test_if_conditions(text: str, expected: str) -> None:
    assert substitute(text, make()) == expected


def test_three_argument_inline_if_stays_as_written() -> None:
    # core-macros.js registers `if` with exactly two unnamed arguments (condition, content) and strict arity,
    # so `{{if::c::a::b}}` is an arity error and stays as written; the inline else form is `a{{else}}b`.
    assert substitute("{{if::1::a::b}}", make()) == "{{if::1::a::b}}"
    assert substitute("{{if::0::a{{else}}b}}", make()) == "b"


def test_scoped_comment_from_the_docs_leaves_its_body() -> None:
    # Usage/macros.md shows `{{ // }}…{{ /// }}` as a block comment. MacroLexer matches `//` before the `/` flag,
    # so `{{ /// }}` is a comment with argument "/", not a closing tag, and `//` is a list macro, which
    # #canAcceptScopedContent refuses: both tags vanish and the body stays.
    assert substitute("a{{ // }}body{{ /// }}b", make()) == "abodyb"
    assert substitute("a{{// multi\nline\ncomment}}b", make()) == "ab"


def test_a_pipe_in_the_arguments_is_an_unparsed_filter() -> None:
    # MacroLexer sends `|` into filter mode; MacroParser has no rule for filters, so the macro is broken text.
    assert substitute("{{reverse::a|b}}", make()) == "{{reverse::a|b}}"
    # In a shorthand's value `|` is plain (var_value mode has no pipe token).
    assert substitute("{{.x = a|b}}{{.x}}", make()) == "a|b"


def test_shorthand_operators_on_numbers_and_strings() -> None:
    local: dict[str, object] = {"n": "5", "s": "abc", "z": "0"}
    text = ("{{.n++}} {{.n--}} {{.n += 2}}{{.n}} {{.n -= 10}}{{.n}} {{.s += d}}{{.s}} {{.z || dflt}} {{.z ?? dflt}} "
            "{{.none ?? dflt}} {{.w ||= set}}{{.w}} {{.q ??= q1}}{{.q ??= q2}} {{.n == -3}} {{.n != -3}} "
            "{{.n > -4}} {{.n >= -3}} {{.n < -3}} {{.n <= -3}} {{.s > 1}}")
    # variables.js addLocalVariable: numeric add; string append; `-=` adds the negative (MacroCstWalker).
    assert substitute(text, make(local_vars=local)) == \
        "6 5 7 -3 abcd dflt 0 dflt setset q1q1 true false true true false true false"


# --- bounded evaluation ---------------------------------------------------------------------------------------

def test_exponential_template_stops_with_a_marker_quickly() -> None:
    # Each addvar doubles `a`: 2**60 characters if nothing stopped it.
    text = "{{setvar::a::xx}}" + "{{addvar::a::{{getvar::a}}}}" * 60 + "{{getvar::a}}"
    ctx = make()
    started = time.monotonic()
    result = substitute(text, ctx)
    assert time.monotonic() - started < 10  # a generous bound; the point is that it returns at all
    reason = "output too large"
    assert ctx.limits_hit == {reason}
    assert LIMIT_MARKER.format(reason=reason) in result
    assert result.endswith("{{addvar::a::{{getvar::a}}}}{{getvar::a}}")  # the rest stays as written


def test_deep_nesting_is_cut_and_reported() -> None:
    text = "{{reverse::" * 200 + "x" + "}}" * 200
    ctx = make()
    result = substitute(text, ctx)
    assert "nesting too deep" in ctx.limits_hit
    assert result.startswith("{{reverse::")


def test_time_diff_humanizes_with_a_suffix() -> None:
    # time-macros.js: moment.duration(moment(left).diff(moment(right))).humanize(true).
    ctx = make()
    assert substitute("{{timeDiff::2024-01-01T12:00:00Z::2024-01-01T10:00:00Z}}", ctx) == "in 2 hours"
    assert substitute("{{timeDiff::2024-01-01T10:00:00Z::2024-01-03T10:00:00Z}}", ctx) == "2 days ago"
    assert substitute("{{timeDiff::soon::later}}", ctx) == "Invalid date"
    assert substitute("{{allChatRange}}|{{lastMessageId}}", make(chat_length=4, last_message_id=3)) == "0-3|3"
