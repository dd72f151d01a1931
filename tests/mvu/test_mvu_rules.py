"""MVU's rules, each with exact values from MagicalAstrogy/MagVarUpdate at b428179 (src/function/update_variables.ts,
src/function/schema.ts, src/function/initvar/variable_init.ts, util/common.ts; the semantics file
../shared/research/mvu-semantics.md cites the lines; "probe" rules were checked by running MVU's code there)."""

from __future__ import annotations

import pytest

from tavern_tui.mvu import (
    InitBook,
    extract_commands,
    generate_schema,
    initial_record,
    parse_command_value,
    parse_parameters,
    parse_string,
    path_fix,
    update_variables,
)
from tavern_tui.mvu.jsutil import MISSING, clone
from tavern_tui.mvu.schema import schema_for_path
from tavern_tui.mvu.update import apply_template


def record(stat: dict, **schema_meta: object) -> dict:
    """A record as initialisation leaves it: the schema generated from the annotated data, then cleaned."""
    from tavern_tui.mvu.schema import clean_up_metadata
    data = clone(stat)
    schema = generate_schema(clone(data))
    schema.update(schema_meta)
    clean_up_metadata(data)
    return {"stat_data": data, "schema": schema, "display_data": {}, "delta_data": {}}


def run(text: str, rec: dict):  # type: ignore[no-untyped-def]
    return update_variables(text, rec)


# -- §3 grammar ------------------------------------------------------------------------------------------

def test_recognised_names_and_the_required_semicolon() -> None:
    text = ("_.set('a', 1); _.move('a', 'b'); _.set ('a', 2); _.set('a', 3) ; _.insert('l', 1); _.assign('l', 2);"
            "_.remove('x'); _.unset('y'); _.delete('z'); _.add('n', 1);")
    assert [(c.type, c.args) for c in extract_commands(text)] == [
        ("set", ("'a'", "1")), ("insert", ("'l'", "1")), ("assign", ("'l'", "2")), ("remove", ("'x'",)),
        ("unset", ("'y'",)), ("delete", ("'z'",)), ("add", ("'n'", "1"))]


def test_the_reason_runs_to_the_end_of_the_line_even_from_the_next_line() -> None:
    [a, b, c] = extract_commands("_.set('a', 1);   //  first reason  \n_.set('b', 2);\n  // on the next line\n"
                                 "_.set('c', 3); /* not a reason */")
    assert (a.reason, b.reason, c.reason) == ("first reason", "on the next line", "")


def test_quotes_hide_parentheses_and_an_escaped_quote_does_not_toggle() -> None:
    [a, b] = extract_commands("_.set('a', \"x)y\");_.set('b', 'it\\'s (fine)');")
    assert a.args == ("'a'", '"x)y"')
    assert b.args == ("'b'", "'it\\'s (fine)'")


def test_arguments_split_outside_brackets_and_a_trailing_empty_one_is_dropped() -> None:
    assert parse_parameters("'a', [1, 2], {b: 3, c: (4, 5)}") == ["'a'", "[1, 2]", "{b: 3, c: (4, 5)}"]
    assert parse_parameters("'a', 1,") == ["'a'", "1"]
    assert parse_parameters("'a', , 1") == ["'a'", "", "1"]


def test_argument_counts_drop_wrong_calls_silently() -> None:
    found = extract_commands("_.set('a');_.add('a', 1, 2);_.add('a');_.insert('l');_.remove('x');_.add('n', 1);")
    assert [(c.type, len(c.args)) for c in found] == [("remove", 1), ("add", 2)]


def test_commands_anywhere_count_and_incomplete_ones_are_skipped() -> None:
    found = extract_commands("<think>_.set('t', 1);</think> prose _.set('u', (2 \n_.set('v', 3);")
    assert [c.args[0] for c in found] == ["'t'", "'v'"]  # the unclosed call is skipped, the search goes on


def test_commands_run_in_the_order_they_start_json_patch_included() -> None:
    text = ("_.set('a', 1);\n<JSONPatch>[{\"op\": \"replace\", \"path\": \"/b\", \"value\": 2},"
            "{\"op\": \"remove\", \"path\": \"/c\"}]</JSONPatch>\n_.set('d', 4);")
    assert [(c.type, c.args[0], c.reason) for c in extract_commands(text)] == [
        ("set", "'a'", ""), ("set", "b", "json_patch"), ("delete", "c", "json_patch"), ("set", "'d'", "")]


# -- §3 paths --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "fixed"), [
    ("a['b c']", 'a["b c"]'), ("a[0]", "a[0]"), ("a['0']", 'a["0"]'), ("a[ 武器 ]", "a[武器]"),
    ('a."武器栏".b', "a.武器栏.b"), ('a."x y".b', 'a["x y"].b'), ("'字段 名'.子", '["字段 名"].子'),
    ('foo."喵.呜".c', 'foo["喵.呜"].c')])
def test_path_fix(raw: str, fixed: str) -> None:
    assert path_fix(raw) == fixed


def test_the_path_loses_outer_quotes_backslashes_and_spaces() -> None:
    rec = record({"a": {"b c": 1}})
    out = run("_.set(` \\\"a['b c']\\\" `, 5);", rec)
    assert out.record["stat_data"] == {"a": {"b c": 5}}


# -- §4 values -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "value"), [
    ("true", True), ("null", None), ("undefined", MISSING), ('"x"', "x"), ("[1, 2]", [1, 2]),
    ("['a', {b: 1,}]", ["a", {"b": 1}]), ("10 + 2", 12), ("'10 + 2'", "10 + 2"), ("2024-01-01", 2022),
    ("09:15", "[9, 10, 11, 12, 13, 14, 15]"), ("Math.sqrt(16)", 4), ("math.pi * 2", 6.28318530718),
    ("0.1 + 0.2", 0.3), ("1/3", 0.333333333333), ("hello", "hello"), ("a: 1", {"a": 1}), ("yes", "yes"),
    ("'新来的牧师'", "新来的牧师"), ("3.14159265358979", 3.14159265358979)])
def test_parse_command_value(text: str, value: object) -> None:
    assert parse_command_value(text) == value
    assert type(parse_command_value(text)) is type(value)


def test_parse_string_reads_yaml_json5_and_repaired_json() -> None:
    assert parse_string("a: 1\nb: [x, y]") == {"a": 1, "b": ["x", "y"]}
    assert parse_string("{a: 'x', /* c */ b: [1,],}") == {"a": "x", "b": [1]}
    assert parse_string('{"a": 1, "b": 2') == {"a": 1, "b": 2}  # jsonrepair closes it
    assert parse_string("on: off") == {"on": "off"}  # YAML 1.2 core schema: not booleans


# -- §5 set ----------------------------------------------------------------------------------------------

def test_set_needs_an_existing_path_and_takes_the_last_argument() -> None:
    out = run("_.set('missing', 1);_.set('a', 'ignored old', 7);//r", record({"a": 1}))
    assert out.record["stat_data"] == {"a": 7}
    assert out.refused[0].reason == "Path 'missing' does not exist in stat_data, skipping set command "
    assert out.record["display_data"] == {"a": "1->7 (r)"}
    assert out.record["delta_data"] == {"a": "1->7 (r)"}


def test_set_on_a_value_with_description_replaces_element_0_as_a_number() -> None:
    out = run("_.set('hp', '20');_.set('dead', null);_.set('name', 'Bob');",
              record({"hp": [10, "health"], "dead": [3, "x"], "name": ["Al", "who"]}))
    assert out.record["stat_data"] == {"hp": [20, "health"], "dead": [None, "x"], "name": ["Bob", "who"]}
    assert out.record["display_data"]["hp"] == "10->20 "


def test_set_turns_a_string_into_a_number_for_a_number_even_nan() -> None:
    out = run("_.set('n', '42');_.set('m', 'abc');", record({"n": 1, "m": 2}))
    assert out.record["stat_data"] == {"n": 42, "m": None}  # NaN, stored as JSON.stringify writes it


def test_set_with_an_empty_path_replaces_stat_data_and_ignores_the_schema() -> None:
    out = run("_.set('', {\"x\": 1});", record({"a": 1}))
    assert out.record["stat_data"] == {"x": 1}


def test_strict_set_from_meta_takes_effect_from_the_next_update() -> None:
    # tests/function.test.ts "strictSet 从 $meta 读取配置"
    rec = {"stat_data": {"$meta": {"strictSet": True}, "level": [5, "等级描述"]}, "display_data": {},
           "delta_data": {}, "initialized_lorebooks": {}}
    first = run("_.set('level[0]', 6);//升级", rec)
    assert first.changed is True
    second = run("_.set('level', [5, '等级描述'], 6);//升级", first.record)
    assert second.changed is True
    assert second.record["stat_data"]["level"] == 6


# -- §5 insert -------------------------------------------------------------------------------------------

def test_insert_never_creates_and_refuses_a_top_level_target_without_schema() -> None:
    rec = {"stat_data": {"list": [1]}, "schema": {"type": "object", "properties": {}}}
    out = run("_.insert('nope', 1);_.insert('list', 2);", rec)
    assert [r.reason for r in out.refused] == [
        "Cannot assign into path 'nope' because it holds a primitive value (undefined). Operation skipped. ",
        "Cannot assign into non-existent path 'list' without an extensible parent. "]


def test_insert_follows_the_schema() -> None:
    rec = record({"bag": ["$__META_EXTENSIBLE__$", "sword"], "fixed": ["a"],
                  "obj": {"k": 1}, "open": {"$meta": {"extensible": True}, "k": 1}})
    out = run("_.insert('bag', 'shield');_.insert('fixed', 'b');_.insert('obj', {\"z\": 1});"
              "_.insert('obj', 'k', 2);_.insert('obj', 'new', 3);_.insert('open', 'new', 3);_.insert('bag', 0, 'axe');"
              "_.insert('bag', '-', 'bow');", rec)
    assert out.record["stat_data"]["bag"] == ["axe", "sword", "shield", "bow"]
    assert out.record["stat_data"]["obj"] == {"k": 2}
    assert out.record["stat_data"]["open"] == {"k": 1, "new": 3}
    assert [r.reason.split(" at path")[0] for r in out.refused] == [
        "SCHEMA VIOLATION: Cannot assign elements into non-extensible array",
        "SCHEMA VIOLATION: Cannot merge data into non-extensible object",
        "SCHEMA VIOLATION: Cannot assign new key 'new' into non-extensible object"]
    assert out.record["display_data"]["bag"] == "ASSIGNED \"bow\" into 'bag' at index tail "


def test_insert_applies_the_template_and_cleans_meta() -> None:
    rec = record({"npcs": {"$meta": {"extensible": True, "template": {"hp": 10, "tags": []}}, "a": {"hp": 1}}})
    out = run("_.insert('npcs', 'b', {\"name\": \"B\", \"$meta\": {\"extensible\": true}});", rec)
    assert out.record["stat_data"]["npcs"]["b"] == {"hp": 10, "tags": [], "name": "B"}
    assert schema_for_path(out.record["schema"], "npcs")["template"] == {"hp": 10, "tags": []}


@pytest.mark.parametrize(("value", "template", "strict", "concat", "result"), [
    ({"a": 1}, {"a": 0, "b": 2}, False, True, {"a": 1, "b": 2}),
    ([1], [2, 3], False, True, [1, 2, 3]),
    ([1], [2, 3], False, False, [1, 3]),
    (5, ["x"], False, True, [5, "x"]),
    (5, ["x"], True, True, 5),
    ({"a": 1}, ["x"], False, True, {"a": 1}),
    (5, {"a": 1}, False, True, 5),
])
def test_apply_template(value: object, template: object, strict: bool, concat: bool, result: object) -> None:
    assert apply_template(value, template, strict, concat) == result


# -- §5 delete -------------------------------------------------------------------------------------------

def test_delete_by_index_path_skips_the_schema_and_writes_no_display() -> None:
    out = run("_.remove('list[1]');", record({"list": [1, 2, 3]}))
    assert out.record["stat_data"]["list"] == [1, 3]
    assert out.record["display_data"]["list"] == [1, 2, 3]  # nothing written for it


def test_delete_respects_required_keys_and_extensible_arrays() -> None:
    rec = record({"fixed": {"a": 1}, "open": {"$meta": {"extensible": True}, "a": 1, "b": 2},
                  "bag": ["$__META_EXTENSIBLE__$", "x", "y"], "locked": ["p", "q"]})
    out = run("_.unset('fixed.a');_.delete('open.a');_.remove('bag', 'y');_.remove('locked', 'p');"
              "_.remove('open', 0);", rec)
    assert out.record["stat_data"]["fixed"] == {"a": 1}
    assert out.record["stat_data"]["open"] == {}
    assert out.record["stat_data"]["bag"] == ["x"]
    assert out.record["stat_data"]["locked"] == ["p", "q"]
    assert [r.reason.split(" from")[0].split(" at path")[0] for r in out.refused] == [
        "SCHEMA VIOLATION: Cannot remove required key 'a'",
        "SCHEMA VIOLATION: Cannot remove element"]
    assert out.record["display_data"]["open"] == "REMOVED 1th entry ('b') from object 'open' "


# -- §5 add ----------------------------------------------------------------------------------------------

def test_add_numbers_vwd_and_dates() -> None:
    rec = record({"n": 0.1, "hp": [10, "health"], "t": "2024-01-01T00:00:00.000Z", "s": "text"})
    out = run("_.add('n', 0.2);_.add('hp', -3);_.add('t', 3600000);_.add('s', 1);_.add('n', 'x');", rec)
    assert out.record["stat_data"]["n"] == 0.3
    assert out.record["stat_data"]["hp"] == [7, "health"]
    assert out.record["stat_data"]["t"] == "2024-01-01T01:00:00.000Z"
    assert out.record["display_data"]["hp"] == "10->7 "
    assert [r.reason for r in out.refused] == ["Path 's' value is not a date or number; skipping add command ",
                                               "Delta ''x'' is not a number, skipping add command "]  # the raw argument


# -- §6 JSON patch ---------------------------------------------------------------------------------------

def test_json_patch_ops() -> None:
    rec = record({"a": 1, "n": 5, "bag": ["$__META_EXTENSIBLE__$", "x"], "o": {"$meta": {"extensible": True}},
                  "g": 0, "a/b": 9})
    text = ("<json_patch>\n```yaml\n- op: replace\n  path: /a\n  value: 2\n- op: delta\n  path: /n\n  value: 3\n"
            "- op: add\n  path: /bag/-\n  value: y\n- op: add\n  path: /o/k\n  value: v\n- op: move\n  from: /a\n"
            "  path: /g\n- op: copy\n  from: /a\n  path: /g\n- op: replace\n  path: /a~1b\n  value: 0\n```\n"
            "</json_patch>")
    out = run(text, rec)
    assert out.record["stat_data"] == {"a": 2, "n": 8, "bag": ["x", "y"], "o": {"k": "v"}, "g": 0, "a/b": 9}
    assert [c.type for c in out.commands] == ["set", "add", "insert", "insert", "move", "set"]  # copy dropped
    # ~1 is not decoded (probe): the path stays "a~1b", which does not exist; move is a no-op.
    assert [r.reason for r in out.refused] == ["Path 'a~1b' does not exist in stat_data, skipping set command "
                                               "(json_patch)"]


def test_a_patch_without_outer_brackets_and_an_invalid_one() -> None:
    found = extract_commands('<JsonPatch>{"op": "replace", "path": "/a", "value": 1}, {"op": "remove", "path": "/b"}'
                             '</JsonPatch><jsonpatch>[{"path": "/c"}]</jsonpatch>')
    assert [(c.type, c.args) for c in found] == [("set", ("a", "1")), ("delete", ("b",))]


# -- §8 schema -------------------------------------------------------------------------------------------

def test_generate_schema_defaults_and_meta() -> None:
    schema = generate_schema({"a": 1, "o": {"$meta": {"extensible": True, "required": ["k"]}, "k": "x", "j": True},
                              "r": {"$meta": {"recursiveExtensible": True}, "in": {"deep": []}}})
    assert schema["extensible"] is False
    assert schema["properties"]["a"] == {"type": "number", "required": True}
    o = schema["properties"]["o"]
    assert (o["extensible"], o["properties"]["k"]["required"], o["properties"]["j"]["required"]) == (True, True, False)
    inner = schema["properties"]["r"]["properties"]["in"]
    assert (inner["extensible"], inner["properties"]["deep"]["extensible"]) == (True, True)


def test_an_old_schemas_required_wins() -> None:
    old = generate_schema({"o": {"$meta": {"extensible": True}, "k": 1}})
    new = generate_schema({"o": {"k": 1}}, old)
    assert new["properties"]["o"]["properties"]["k"]["required"] is False


# -- §9 [InitVar] and the greeting ------------------------------------------------------------------------

def test_initvar_entries_merge_in_order_and_books_shallowly() -> None:
    first = InitBook("global", (("[InitVar] one", "a: 1\nlist: [1, 2, 3]\nobj: {x: 1}"),
                                ("[INITVAR] two", "```json\n{\"list\": [9], \"obj\": {\"y\": 2}}\n```"),
                                ("not init", "ignored: true")))
    second = InitBook("char", (("[initvar]", "<initvar>\n{a: 5, b: 6}\n</initvar>"),))
    result = initial_record([first, second], "Hello.")
    assert result is not None
    assert result.record["stat_data"] == {"a": 1, "list": [9], "obj": {"x": 1, "y": 2}, "b": 6}
    assert result.record["initialized_lorebooks"] == {"global": [], "char": []}


def test_a_broken_entry_marks_its_book_and_adds_nothing() -> None:
    broken = InitBook("bad", (("[InitVar] x", "a: 1"), ("[InitVar] y", "a: b: c")))
    good = InitBook("good", (("[InitVar]", "b: 2"),))
    result = initial_record([broken, good], "Hi.")
    assert result is not None
    assert result.record["stat_data"] == {"b": 2}
    assert result.record["initialized_lorebooks"] == {"bad": [], "good": []}
    assert result.errors and "world book 'bad', entry '[InitVar] y'" in result.errors[0]


def test_a_greeting_initvar_block_replaces_stat_data_then_its_commands_run() -> None:
    book = InitBook("char", (("[InitVar]", "hp: [10, 'health']\nname: x"),))
    greeting = "Hi!\n<initvar>\n```yaml\nhp: [50, 'health']\n```\n</initvar>\n_.set('hp', 60);//start"
    result = initial_record([book], greeting, primary_book="char")
    assert result is not None
    assert result.record["stat_data"] == {"hp": [60, "health"]}
    assert result.record["delta_data"] == {"hp": "50->60 (start)"}


def test_no_material_no_record() -> None:
    assert initial_record([InitBook("b", (("lore", "a: 1"),))], "Hi. _.set('a', 1);") is None


@pytest.mark.parametrize(("value", "text"), [(1e16, "10000000000000000"), (1e21, "1e+21"), (1e-7, "1e-7"),
                                             (0.1, "0.1"), ([1.0, "x"], '[1,"x"]')])
def test_json_stringify_prints_numbers_as_javascript_does(value: object, text: str) -> None:
    from tavern_tui.mvu.jsutil import js_stringify
    assert js_stringify(value) == text


@pytest.mark.parametrize(("text", "stored"), [
    # handleVariablesInMessage (update_variables.ts:1476-1496): the placeholder is appended unless present, then
    # `/<(status_current_variable)>(?:(?!<\1>).)*<\/\1?>/gis` blocks are removed
    ("她笑了。", "她笑了。\n\n<StatusPlaceHolderImpl/>"),
    ("a <StatusPlaceHolderImpl/> b", "a <StatusPlaceHolderImpl/> b"),
    ("x<status_current_variable>\n{…}\n</status_current_variable>y", "xy\n\n<StatusPlaceHolderImpl/>"),
    ("x<status_current_variable>a</>y", "xy\n\n<StatusPlaceHolderImpl/>"),
    ("<status_current_variable>a</status_current_variable>b<status_current_variable>c</status_current_variable>",
     "b\n\n<StatusPlaceHolderImpl/>"),
    ("<STATUS_CURRENT_VARIABLE>a</STATUS_CURRENT_VARIABLE>", "<STATUS_CURRENT_VARIABLE>a</STATUS_CURRENT_VARIABLE>"
     "\n\n<StatusPlaceHolderImpl/>"),  # the `includes` check before the regex is case-sensitive
])
def test_the_text_mvu_stores_back(text: str, stored: str) -> None:
    from tavern_tui.mvu.update import message_after_update

    assert message_after_update(text) == stored
