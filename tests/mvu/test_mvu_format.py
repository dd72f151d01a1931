# ruff: noqa: E501 - expected texts are kept whole, as the reference printed them
"""`{{format_*_variable::path}}` and the Tavern Helper variable scopes (issue 18 item 2, mvu2 item 1).

Expected texts were produced by running Tavern Helper's own rule (JS-Slash-Runner src/function/macro_like.ts
`applyFormatVariable`: `YAML.stringify(value, {blockQuote: 'literal'}).trimEnd()`, continuation lines indented by
the length of the text before the macro on its line) with the `yaml` npm package 2.9.1 (the version range
JS-Slash-Runner's package.json pins, ^2.9.0) and lodash `_.get`, on the MVU demo card's own initial state
(`tavern mvu init … --greeting 1`), never from our output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tavern_tui.assembly.macros import MacroContext, substitute
from tavern_tui.assembly.macros.mvu_macros import tavern_helper_variables
from tavern_tui.mvu.yamlfmt import js_keys, utf16_len, yaml_stringify
from tavern_tui.service.mvu import init_from_card

CASES = [
    ("<status_current_variable>\n{{format_message_variable::stat_data.理.情绪状态}}\n</status_current_variable>",
     "<status_current_variable>\npleasure:\n  - 0.1\n  - \"[-1,1]之间,情绪变化时更新,−1 - 极端痛苦、悲伤、厌恶；1 - 极端喜悦、满足、陶醉。\"\narousal:\n  - 0.1\n  - \"[-1,1]之间,情绪变化时更新,-1 - 松弛、困倦、甚至恹恹欲睡；+1 - 血液里全是肾上腺素，想把天台的风都一口吞下。\"\ndominance:\n  - 0.1\n  - \"[-1,1]之间,情绪变化时更新,-1 - 彻底被情势拖着走，羞赧、局促，或者干脆认怂；+1 - 全盘掌握节奏，自信、主导、甚至有点小傲娇。\"\naffinity:\n  - 0\n  - \"[-1,1]之间,情绪变化时更新,代表的是因为今天心情,对user的态度改变, -1 - 在好感度基础上更排斥一些；+1 -\n    在好感度基础上更亲密一些，容易做出亲昵的行为。\"\n</status_current_variable>"),
    ("理的状态: {{format_message_variable::stat_data.理.着装}}",
     "理的状态: - 纯白长袖圣女长袍（金丝刺绣），头戴薄纱，胸前十字吊坠，脚穿黑色高筒靴，配黑色长筒袜袜\n      - 随剧情变化及时更新，需详细描述所有衣物"),
    ("{{format_message_variable::stat_data.理.好感度}}",
     "- 15\n- \"[-30,100]之间,理对 user 的好感度，在与 理 交流过程中变化，变化范围为 [-5,8]\""),
    ("笔记: {{format_chat_variable::笔记}} 再: {{format_global_variable::g}}",
     "笔记: \"1\": 一\n    \"10\": 十\n    b: |\n      line one\n      line two\n    n: \"123\"\n    e: {}\n    l: [] 再: true"),
    ("[{{format_message_variable::stat_data.没有}}] {{format_message_variable::stat_data.理.当前所想.0}}",
     "[null] 今天吃什么好呢？"),
    ("  c: {{format_character_variable::x}}\n  p: {{Format_Preset_Variable::p}}",
     "  c: a: 1\n  p: - a b"),
    ("{{format_message_variable::stat_data.地点.池边}}",
     "desc1: 镇外缓缓流淌的窄河在春日融雪后水量丰沛，清澈见底闪耀阳光。\ndesc2: 河岸草甸野花遍布，蝴蝶飞舞成群，成为情侣散步与孩童嬉水的天堂。\ndesc3: 傍晚时分金色夕阳洒满水面，倒影交错出诗意画卷，让人不自觉驻足凝望。\nstatus:\n  - \"\"\n  - 这个地点当前状态，在角色/user留下痕迹后更新"),
]


@pytest.fixture(scope="module")
def stat_data(corpus_dir: Path) -> dict:
    record = init_from_card(corpus_dir / "stateful" / "qingkong_li_mvu.png", 1)["record"]
    assert record is not None
    return record["stat_data"]


def context(stat_data: dict) -> MacroContext:
    return MacroContext(
        message_vars={"stat_data": stat_data},
        local_vars={"笔记": {"$秘密": 1, "b": "line one\nline two\n", "10": "十", "1": "一", "n": "123", "e": {},
                           "l": []}},  # inserted out of JavaScript's key order on purpose
        character_vars={"x": {"a": 1}}, preset_vars={"p": ["a b"]}, global_vars={"g": True})


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_format_variable_prints_what_tavern_helper_prints(stat_data: dict, text: str, expected: str) -> None:
    assert substitute(text, context(stat_data)) == expected


def test_get_variable_reads_every_scope_and_format_reads_chat_and_global(stat_data: dict) -> None:
    ctx = context(stat_data)
    assert substitute("{{get_character_variable::x}}|{{get_preset_variable::p.0}}|{{get_chat_variable::笔记.n}}",
                      ctx) == '{"a":1}|a b|123'
    # JSON.stringify keeps JavaScript's key order: array-index keys first, ascending; `$` keys are left out
    assert substitute("{{get_chat_variable::笔记}}", ctx) == \
        '{"1":"一","10":"十","b":"line one\\nline two\\n","n":"123","e":{},"l":[]}'
    substitute("{{format_chat_variable::笔记}}", ctx)
    assert ("local", "笔记") in ctx.reads


def test_format_in_a_history_message_is_expanded_each_build(stat_data: dict) -> None:
    from tavern_tui.assembly.macros.engine import history_expander

    ctx = context(stat_data)
    text = "好感: {{format_message_variable::stat_data.理.好感度.0}}"
    assert history_expander(ctx)(text) == "好感: 15"
    ctx.message_vars["stat_data"]["理"]["好感度"][0] = 20
    assert history_expander(ctx)(text) == "好感: 20"  # a cached expansion never keeps a state read


def test_tavern_helper_variables_from_extensions() -> None:
    assert tavern_helper_variables({"tavern_helper": {"variables": {"a": 1}}}) == {"a": 1}
    assert tavern_helper_variables({"tavern_helper": [["scripts", []], ["variables", {"b": 2}]]}) == {"b": 2}
    assert tavern_helper_variables({"tavern_helper": {"variables": [1]}}) == {}
    assert tavern_helper_variables(None) == {}


@pytest.mark.parametrize(("value", "expected"), [
    # yaml 2.9.1 YAML.stringify(value, {blockQuote: 'literal'}), each checked there
    ({"a": None, "b": None}, "a: null\nb: null\n"),
    ([[1, 2], [3]], "- - 1\n  - 2\n- - 3\n"),
    ([{"a": 1, "b": 2}], "- a: 1\n  b: 2\n"),
    ({"1": 2, "true": 3, "a b": 4, "x:": 1, "-": 2}, '"1": 2\n"true": 3\na b: 4\n"x:": 1\n"-": 2\n'),
    ({"s": " lead\nx"}, "s: |2-\n   lead\n  x\n"),
    ({"n": 1.5, "m": -0.0, "k": 1e21, "j": float("nan"), "t": 1e-5}, "n: 1.5\nm: -0\nk: 1e+21\nj: .nan\nt: 0.00001\n"),
    ({"long": "word " * 30},
     'long: "word word word word word word word word word word word word word word\n'
     '  word word word word word word word word word word word word word word word\n  word "\n'),
    ("a\nb", "|-\na\nb\n"),
])
def test_yaml_stringify(value: object, expected: str) -> None:
    assert yaml_stringify(value) == expected


def test_lengths_and_key_order_are_javascripts() -> None:
    assert utf16_len("😀理") == 3
    assert js_keys({"b": 1, "10": 1, "2": 1, "01": 1}) == ["2", "10", "b", "01"]
