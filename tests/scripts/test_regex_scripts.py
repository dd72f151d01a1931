"""Regex scripts against SillyTavern's engine.js rules (getRegexedString / runRegexScript /
regexFromString) and the shared MVU card's six scripts."""

import json
import os
import time
from pathlib import Path

import pytest

from tavern_tui.formats.cards import parse_card
from tavern_tui.scripts.regex_scripts import (
    DISPLAY,
    PROMPT,
    WRITE,
    Placement,
    ScriptFormatError,
    applies,
    card_scripts,
    load_regex_file,
    parse_script,
    regex_from_string,
    run_script,
    sanitize_regex_macro,
    script_set,
)

CORPUS = Path(os.environ.get("TAVERN_TEST_CORPUS", Path(__file__).resolve().parents[3] / "shared" / "corpus"))
MVU_CARD = CORPUS / "stateful" / "qingkong_li_mvu.png"


def script(**fields):
    base = {"scriptName": "s", "findRegex": "/x/g", "replaceString": "", "placement": [1, 2]}
    return parse_script({**base, **fields}, "test")


def test_find_regex_split_as_regex_from_string():
    # `(/?)(.+)\1([a-z]*)`: flags after the last slash; a bare pattern has none (first match only).
    assert regex_from_string("/a/b/gi").global_ and regex_from_string("/a/b/gi").compiled.pattern
    assert run_script(script(findRegex="/a/b/g", replaceString="X"), "a/b a/b").text == "X X"
    assert run_script(script(findRegex="<P/>", replaceString="X"), "<P/><P/>").text == "X<P/>"
    # Repeated flags: the whole text is the pattern (RegExp(input)), so nothing matches "a".
    assert run_script(script(findRegex="/a/gg", replaceString="X"), "a").text == "a"
    assert run_script(script(findRegex="/a/gg", replaceString="X"), "/a/gg").text == "X"
    # Case-insensitive flag
    assert run_script(script(findRegex="/ab/gi", replaceString="-"), "AB ab").text == "- -"


def test_replace_string_groups_match_and_trim_strings():
    s = script(findRegex="/(\\w+)@(\\w+)/g", replaceString="[$2:$1|{{match}}|$9]", trimStrings=["o"])
    # $N is the trimmed group; {{match}} is $0 (trimmed too); $N past the groups, offset and the whole
    # string: offset 0 is falsy so "".
    assert run_script(s, "bob@foo").text == "[f:bb|bb@f|]"
    off = script(findRegex="/(b)/", replaceString="<$2>")
    assert run_script(off, "ab").text == "a<1>"  # argument 2 is the offset, 1
    # `$&` and `$$` are not special: the callback returns them as written.
    assert run_script(script(findRegex="/a/", replaceString="$&$$"), "a").text == "$&$$"
    # An unmatched optional group is "" (falsy).
    assert run_script(script(findRegex="/a(z)?/", replaceString="<$1>"), "a").text == "<>"


def test_macros_run_on_the_replacement_and_the_pattern():
    def macros(text):
        return text.replace("{{char}}", "Li.").replace("{{user}}", "Ann")

    s = script(findRegex="/hello/", replaceString="{{user}} meets {{char}}")
    assert run_script(s, "hello", macros).text == "Ann meets Li."
    raw = script(findRegex="/{{char}}/g", replaceString="X", substituteRegex=1)
    assert run_script(raw, "Li! Lo", macros).text == "X Lo"  # unescaped: "." matches "!"
    escaped = script(findRegex="/{{char}}/g", replaceString="X", substituteRegex=2)
    assert run_script(escaped, "Li! Li.", macros).text == "Li! X"
    assert sanitize_regex_macro("a.b\n(c)") == "a\\.b\\n\\(c\\)"
    none = script(findRegex="/{{char}}/g", replaceString="X", substituteRegex=0)
    assert run_script(none, "Li.", macros).text == "Li."


def test_flags_and_depth_choose_scripts():
    md = script(markdownOnly=True)
    pr = script(promptOnly=True)
    both = script(markdownOnly=True, promptOnly=True)
    plain = script()
    assert [applies(s, DISPLAY, 2) for s in (md, pr, both, plain)] == [True, False, True, False]
    assert [applies(s, PROMPT, 2) for s in (md, pr, both, plain)] == [False, True, True, False]
    assert [applies(s, WRITE, 2) for s in (md, pr, both, plain)] == [False, False, False, True]
    assert not applies(plain, WRITE, Placement.WORLD_INFO)  # placement must list it
    assert not applies(script(disabled=True), WRITE, 2)
    assert not applies(script(runOnEdit=False), WRITE, 2, is_edit=True)
    assert applies(script(runOnEdit=True), WRITE, 2, is_edit=True)
    ranged = script(promptOnly=True, minDepth=2, maxDepth=4)
    assert [applies(ranged, PROMPT, 2, d) for d in range(6)] == [False, False, True, True, True, False]
    # minDepth below -1 and maxDepth below 0 are ignored; no depth ignores both.
    assert applies(script(promptOnly=True, minDepth=-5, maxDepth=-1), PROMPT, 2, 100)
    assert applies(ranged, PROMPT, 2, None)
    assert script(minDepth="3").min_depth == 3 and script(minDepth=None).min_depth is None


def test_hostile_pattern_times_out_and_leaves_text():
    s = script(findRegex="/(a|aa)+$/", replaceString="X")  # exponential backtracking on "aaaa…!"
    text = "a" * 60 + "!"
    started = time.perf_counter()
    run = run_script(s, text, timeout=0.05)
    assert time.perf_counter() - started < 2
    assert run.text == text and not run.changed and "out of time" in run.error


def test_invalid_pattern_is_an_error_not_a_crash():
    run = run_script(script(findRegex="/(/g"), "(")
    assert run.text == "(" and "does not compile" in run.error


def test_bad_fields_name_file_and_field():
    with pytest.raises(ScriptFormatError, match="test: field 'placement'"):
        script(placement="2")
    with pytest.raises(ScriptFormatError, match="r.json: field 'findRegex' is missing"):
        load_regex_file(json.dumps({"scriptName": "x"}).encode(), "r.json")
    with pytest.raises(ScriptFormatError, match="r.json: not a JSON"):
        load_regex_file(b"\xff", "r.json")


def test_export_file_round_trip():
    one = script(findRegex="/a/g", replaceString="b", minDepth=1).to_json()
    loaded = load_regex_file(json.dumps([one, one]).encode(), "r.json")
    assert len(loaded) == 2 and loaded[0].to_json() == one and loaded[0].scope == "global"


@pytest.fixture(scope="module")
def mvu_scripts():
    card = parse_card(MVU_CARD.read_bytes(), str(MVU_CARD))
    scripts, warnings = card_scripts(card.data)
    assert warnings == []
    return scripts


def test_mvu_card_scripts_read_as_stored(mvu_scripts):
    assert [s.name for s in mvu_scripts] == ["去除变量更新", "去除10楼内摘要", "去除10层以上除摘要以外部分",
                                             "对ai隐藏状态栏", "状态栏", "状态栏-纯文本"]
    assert [(s.markdown_only, s.prompt_only, s.min_depth, s.max_depth, s.disabled) for s in mvu_scripts] == [
        (True, True, None, None, False), (False, True, None, 10, False), (False, True, 11, None, False),
        (False, True, None, None, False), (True, False, None, 2, False), (True, False, None, 2, True)]


def test_mvu_update_block_hidden_from_prompt_and_display(mvu_scripts):
    scripts = script_set([], mvu_scripts, allowed=True)
    reply = ("她笑了。\n<UpdateVariable>\n_.set('理.好感度[0]', 10, 15);//开心\n</UpdateVariable>\n"
             "<StatusPlaceHolderImpl/>")
    sent = scripts.for_prompt(reply, Placement.AI_OUTPUT, 0)
    assert sent.text == "她笑了。\n\n"
    assert sent.applied == ("去除变量更新", "对ai隐藏状态栏")
    shown = scripts.for_display(reply, Placement.AI_OUTPUT, 0)
    assert "UpdateVariable" not in shown.text and "<!DOCTYPE html>" in shown.text
    assert shown.applied == ("去除变量更新", "状态栏")
    # The status bar is drawn only within display depth 2; the placeholder stays beyond it.
    assert "<StatusPlaceHolderImpl/>" in scripts.for_display(reply, Placement.AI_OUTPUT, 3).text
    # User input is not AI output: placement [2] leaves it alone.
    assert scripts.for_prompt(reply, Placement.USER_INPUT, 0).text == reply


def test_mvu_summary_scripts_by_depth(mvu_scripts):
    scripts = script_set([], mvu_scripts, allowed=True)
    reply = "正文一。<summary>摘要一</summary>正文二。"
    assert scripts.for_prompt(reply, Placement.AI_OUTPUT, 10).text == "正文一。正文二。"
    assert scripts.for_prompt(reply, Placement.AI_OUTPUT, 11).text == "摘要一"
    # Display never sees prompt-only scripts.
    assert scripts.for_display(reply, Placement.AI_OUTPUT, 11).text == reply


def test_card_scripts_need_the_allowance(mvu_scripts):
    blocked = script_set([], mvu_scripts, allowed=False)
    reply = "<UpdateVariable>x</UpdateVariable>"
    assert blocked.for_prompt(reply, Placement.AI_OUTPUT, 0).text == reply
    assert blocked.blocked[0] == "去除变量更新"
    # Global scripts run before scoped ones.
    first = script(findRegex="/<UpdateVariable>/", replaceString="<G>", placement=[2])
    both = script_set([first], mvu_scripts, allowed=True)
    assert both.for_prompt(reply, Placement.AI_OUTPUT, 0).text == "<G>x</UpdateVariable>"
