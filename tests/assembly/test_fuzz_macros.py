"""Property test over the macro engine (issue 23 item 9: "the macro engine … as they land"):
hostile templates (deep nesting, huge numbers, long repeats, broken braces) never raise and never
expand past `MAX_EXPANSION`. Bounded examples; the long runner covers importers and SSE."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavern_tui.assembly.macros.engine import MAX_EXPANSION, MacroContext, substitute

_PIECES = st.one_of(
    st.sampled_from(["{{", "}}", "{{user}}", "{{char}}", "{{//", "{{trim}}", "{{noop}}", "<USER>", "{{original}}",
                     "{{setvar::x::", "{{getvar::x}}", "{{addvar::x::", "{{incvar::x}}", "{{roll:", "{{roll::",
                     "{{random::a::b}}", "{{pick::a::b}}", "{{newline::", "{{space::", "{{time_UTC+",
                     "{{datetimeformat::", "{{reverse::", "{{outlet::", "::", "1e999", "NaN", "-0", "d", "D"]),
    st.integers(-10**30, 10**30).map(str),
    st.sampled_from(["9" * 400, "9" * 5000, "1" + "0" * 400 + ".5"]),
    st.text(max_size=12),
)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(_PIECES, max_size=40), depth=st.integers(0, 300))
def test_no_template_raises_out_of_the_macro_engine(parts: list[str], depth: int) -> None:
    text = "{{" * depth + "".join(parts) + "}}" * depth
    ctx = MacroContext(char="Seraphina", user="Ada", now=lambda: datetime(2024, 7, 12, tzinfo=UTC),
                       rng=random.Random(23), last_message_id=3)
    out = substitute(text, ctx)
    assert isinstance(out, str) and len(out) <= MAX_EXPANSION + len(text)
