"""EJS templates (ST-Prompt-Template / EJS syntax) in the V8 sandbox: output, whitespace rules, the
variable snapshot, staged writes, and hostile templates that must come back as a marker in time."""

import os
import time
from pathlib import Path

import pytest

from tavern_tui.formats.cards import parse_card
from tavern_tui.scripts.templates import (
    TIME_LIMIT,
    TemplateRunner,
    apply_writes,
    compile_ejs,
    marker,
    template_snapshot,
)

CORPUS = Path(os.environ.get("TAVERN_TEST_CORPUS", Path(__file__).resolve().parents[3] / "shared" / "corpus"))
MVU_CARD = CORPUS / "stateful" / "qingkong_li_mvu.png"


@pytest.fixture
def runner():
    r = TemplateRunner()
    yield r
    r.close()


def snap(**message):
    return template_snapshot({"mood": "calm", "n": 3}, {"g": "G"}, message)


def test_output_tags_and_comments(runner):
    # <%= is unescaped like <%- (ST-Prompt-Template's known issue); null/undefined print nothing.
    out = runner.render("<%= '<b>' %>|<%- 1 + 1 %>|<%= null %><%= undefined %>|<%# hidden %>|<%% x", snap())
    assert out.text == "<b>|2|||<% x" and out.error == ""


def test_whitespace_slurping():
    # `-%>` and `_%>` drop one following newline; `<%_` / `_%>` eat spaces and tabs around them.
    r = TemplateRunner()
    try:
        assert r.render("a\n<% if (true) { -%>\nyes\n<% } -%>\nb", snap()).text == "a\nyes\nb"
        assert r.render("x  \t<%_ _%>  \ty", snap()).text == "xy"
        assert r.render("x  <% %>  y", snap()).text == "x    y"
    finally:
        r.close()


def test_getvar_priority_and_lodash_paths(runner):
    s = snap(stat_data={"理": {"好感度": [25, "desc"]}}, mood="happy")
    text = ("<%= getvar('mood') %>|<%= getvar('mood', {scope: 'local'}) %>|<%= getvar('g') %>|"
            "<%= _.has(getvar('stat_data'), '理.好感度.[0]') %>|<%= _.get(getvar('stat_data'), '理.好感度[0]') %>|"
            "<%= getvar('missing', {defaults: 'd'}) %>|<%= variables.n %>")
    assert runner.render(text, s).text == "happy|calm|G|true|25|d|3"


def test_setvar_writes_are_returned_and_staged(runner):
    out = runner.render("<% setvar('mood', 'angry', {scope: 'local'}) %><%= getvar('mood', {scope: 'local'}) %>"
                        "<% setvar('seen', 1, {scope: 'global'}) %>", snap())
    assert out.text == "angry"
    assert out.writes == ({"scope": "local", "name": "mood", "value": "angry"},
                          {"scope": "global", "name": "seen", "value": 1})
    local, glob = {"mood": "calm"}, {}
    apply_writes(out.writes, local, glob)
    assert local == {"mood": "angry"} and glob == {"seen": 1}


@pytest.mark.parametrize(("template", "reason"), [
    ("<% while (true) {} %>", "timed out"),
    ("<% let s = 'x'; while (true) s += s %>", "RangeError"),
    ("<%= require('fs').readFileSync('/etc/passwd') %>", "ReferenceError: require is not defined"),
    ("<%= process.env.HOME %>", "ReferenceError: process is not defined"),
    ("<% fetch('http://127.0.0.1/') %>", "ReferenceError: fetch is not defined"),
    ("<% setTimeout(() => 1, 1) %>", "TypeError"),
    ("<%= globalThis.require('os') %>", "TypeError"),
    ("<% if (x { %>", "SyntaxError"),
    ("<% unclosed", "syntax"),
])
def test_hostile_templates_return_a_marker_within_the_limit(runner, template, reason):
    started = time.perf_counter()
    out = runner.render(template, snap(), where="test")
    elapsed = time.perf_counter() - started
    assert out.text.startswith("⟨template error:") and reason in out.error
    assert elapsed < TIME_LIMIT * 8
    assert runner.failures[-1][0] == "test"
    # The runner still works after a failure.
    assert runner.render("<%= 1 %>", snap()).text == "1"


def test_unbounded_allocation_stops_at_the_memory_limit():
    # A generous time limit, so the memory limit is what stops it (under load, time could come first).
    r = TemplateRunner(time_limit=10.0, memory_limit=32 * 1024 * 1024)
    try:
        started = time.perf_counter()
        out = r.render("<% const a = []; while (true) a.push(new Array(100000).fill(1.5)) %>", snap())
        assert out.text == marker("out of memory") and "32 MB" in out.error
        assert time.perf_counter() - started < 10.0
        assert r.render("<%= 'still here' %>", snap()).text == "still here"
    finally:
        r.close()


def test_globals_hold_no_host_objects(runner):
    out = runner.render("<%= [typeof require, typeof process, typeof fetch, typeof WebAssembly, "
                        "typeof setTimeout, typeof XMLHttpRequest, typeof Deno, typeof Bun].join(',') %>", snap())
    assert out.text == ",".join(["undefined"] * 8)


def test_step_budget_stops_the_rest():
    r = TemplateRunner(time_limit=0.1, budget=0.25)
    try:
        results = [r.render("<% while (true) {} %>", snap()) for _ in range(4)]
        assert results[-1].text == marker("template time budget used up")
        assert r.spent < 0.6
    finally:
        r.close()


def test_compile_refuses_nested_open_tag():
    with pytest.raises(ValueError):
        compile_ejs("<% <%= 1 %>")


def test_mvu_card_stage_template_switches_with_the_value(runner):
    card = parse_card(MVU_CARD.read_bytes(), str(MVU_CARD))
    entry = next(e for e in card.data["character_book"]["entries"] if e.get("comment") == "relation_level")
    low = runner.render(entry["content"], snap(stat_data={"理": {"好感度": [10, ""]}}))
    mid = runner.render(entry["content"], snap(stat_data={"理": {"好感度": [25, ""]}}))
    none = runner.render(entry["content"], snap())
    assert low.error == mid.error == none.error == ""
    # Below 20: the formal, distant stage; from 20: "渐渐变得稍微轻松了一些" (the card's own texts).
    assert "恪守礼仪" in low.text and "恪守礼仪" not in mid.text
    assert "渐渐变得稍微轻松了一些" in mid.text
    assert "daily_performance" not in none.text  # no 好感度 yet: the whole block is left out
    kokuhaku = next(e for e in card.data["character_book"]["entries"] if e.get("comment") == "kokuhaku")
    confess = runner.render(kokuhaku["content"], snap(stat_data={"理": {"好感度": [70, ""]}, "user": {}}))
    assert "<story_override>" in confess.text and confess.error == ""
    calm = runner.render(kokuhaku["content"], snap(stat_data={"理": {"好感度": [30, ""]}, "user": {}}))
    assert "<story_override>" not in calm.text


async def test_runs_on_an_event_loop_thread():
    # A step builds its prompt on the event loop's thread: the engine must not borrow that loop.
    r = TemplateRunner()
    try:
        assert r.render("<%= 6 * 7 %>", snap()).text == "42"
        assert r.render("<% while (true) {} %>", snap()).error.startswith("timed out")
    finally:
        r.close()


def test_less_than_a_millisecond_of_budget_left_is_used_up_never_an_unlimited_run():
    # V8 takes a timeout of 0 ms as no limit: a budget with 0.4 ms left must not run the loop at all.
    r = TemplateRunner(time_limit=0.1, budget=0.25)
    try:
        r.spent = 0.2496
        result = r.render("<% while (true) {} %>", snap())
        assert result.text == marker("template time budget used up") and r.evaluations == 0
    finally:
        r.close()
