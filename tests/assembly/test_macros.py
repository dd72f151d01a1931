"""The macro engine (`substitute`): SillyTavern 1.18 macro semantics, with injected time and randomness."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from tavern_tui.assembly.macros import MacroContext, substitute
from tavern_tui.text.names import substitute_names

NOW = datetime(2024, 3, 5, 14, 7, 9, tzinfo=UTC)  # a Tuesday


def scripted(*rolls: float) -> Callable[[], float]:
    """A random source returning `rolls` in turn; asking for more fails the test."""
    queue = list(rolls)

    def roll() -> float:
        assert queue, "the macro drew more random numbers than expected"
        return queue.pop(0)

    return roll


def no_rng() -> float:
    raise AssertionError("this macro must not draw from ctx.rng")


def make(**fields: Any) -> MacroContext:
    base: dict[str, Any] = {
        "char": "Alice", "user": "Bob", "persona": "Bob is a sailor.", "description": "A knight.",
        "personality": "Brave.", "scenario": "A castle.", "mes_examples": "<START>\nAlice: Hi",
        "mes_examples_raw": "<START>\n{{char}}: Hi", "char_prompt": "Main override", "char_instruction": "PHI override",
        "char_depth_prompt": "Depth note", "creator_notes": "By someone", "char_version": "1.2",
        "first_message": "Hello there!", "input": "typed text", "last_message": "last one",
        "last_user_message": "from user", "last_char_message": "from char", "last_message_id": 7, "last_swipe_id": 3,
        "current_swipe_id": 2, "now": lambda: NOW, "rng": no_rng, "chat_id": "chat-1",
    }
    base.update(fields)
    return MacroContext(**base)


def sub(text: str, **fields: Any) -> str:
    return substitute(text, make(**fields))


# --- names, card fields, chat state ---------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("{{char}}", "Alice"), ("<BOT>", "Alice"), ("<CHAR>", "Alice"), ("<bot>", "Alice"),
    ("{{user}}", "Bob"), ("<USER>", "Bob"), ("{{Char}}", "Alice"), ("{{ CHAR }}", "Alice"), ("{{USER}}", "Bob"),
    ("{{persona}}", "Bob is a sailor."), ("{{description}}", "A knight."), ("{{personality}}", "Brave."),
    ("{{scenario}}", "A castle."), ("{{mesExamples}}", "<START>\nAlice: Hi"),
    ("{{mesExamplesRaw}}", "<START>\n{{char}}: Hi"),  # a macro's output is not evaluated again
    ("{{charPrompt}}", "Main override"), ("{{charInstruction}}", "PHI override"),
    # 1.18's engine registers no `charJailbreak` (env-macros.js; only the legacy macros.js had it)
    ("{{charJailbreak}}", "{{charJailbreak}}"), ("{{charDepthPrompt}}", "Depth note"),
    ("{{charCreatorNotes}}", "By someone"), ("{{creatorNotes}}", "By someone"), ("{{charVersion}}", "1.2"),
    ("{{charFirstMessage}}", "Hello there!"),
    ("{{charIfNotGroup}}", "Alice"), ("<CHARIFNOTGROUP>", "Alice"), ("{{group}}", "Alice"), ("<GROUP>", "Alice"),
    ("{{groupNotMuted}}", "Alice"), ("{{notChar}}", "Bob"),
    ("{{input}}", "typed text"), ("{{lastMessage}}", "last one"), ("{{lastUserMessage}}", "from user"),
    ("{{lastCharMessage}}", "from char"), ("{{lastMessageId}}", "7"), ("{{lastSwipeId}}", "3"),
    ("{{currentSwipeId}}", "2"),
])
def test_simple_macro(text: str, expected: str) -> None:
    assert sub(text) == expected


def test_chat_state_ids_are_empty_when_unknown() -> None:
    assert sub("[{{lastMessageId}}|{{lastSwipeId}}|{{currentSwipeId}}]", last_message_id=None, last_swipe_id=None,
               current_swipe_id=None) == "[||]"


def test_names_inside_text_and_markers() -> None:
    assert sub("{{user}} meets <BOT>; <USER> waves at {{Char}}.") == "Bob meets Alice; Bob waves at Alice."


def test_original_is_filled_at_the_first_occurrence_only() -> None:
    ctx = make(original="ORIG")
    assert substitute("{{original}} and {{original}}", ctx) == "ORIG and "
    assert substitute("{{original}}", ctx) == "ORIG"  # once per substitute() call
    # Without an original, MacroEnvBuilder defines no `functions.original`; the call fails and the macro stays.
    assert sub("[{{original}}]") == "[{{original}}]"


# --- syntax ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["{{getvar::mood}}", "{{getvar:mood}}", "{{getvar mood}}", "{{ getvar :: mood }}",
                                  "{{GetVar::mood}}", "{{getvar: mood }}"])
def test_argument_forms(text: str) -> None:
    assert sub(text, local_vars={"mood": "calm"}) == "calm"


@pytest.mark.parametrize("text", [
    "{{foo}}", "{{foo::bar}}", "{{ hello world }}", "{{}}", "{{123}}", "{{char::extra}}", "{{char", "{{.1var}}",
    "{{if}}a{{/if}}", "{{charJailbreak}}", "{{setvar::only-name}}", "{{datetimeformat}}", "{{newline::x}}",
    "{{time_UTC}}",
    "{{getvar:}}", "}} {{ {",
])
def test_unknown_or_malformed_macros_are_left_as_written(text: str) -> None:
    assert sub(text) == text


def test_unknown_macro_keeps_its_resolved_nested_macros() -> None:
    assert sub("{{unknown::{{char}}}}") == "{{unknown::Alice}}"
    assert sub("{{char {{user}}") == "{{char Bob"


def test_escaped_braces_stay_literal_without_backslashes() -> None:
    assert sub(r"\{\{char\}\} is {{char}}") == "{{char}} is Alice"
    assert sub(r"\{\{x\}\}") == "{{x}}"


def test_extra_braces_around_a_macro() -> None:
    assert sub("{{{char}}}") == "{Alice}"
    assert sub("{{{{char}}}}") == "{{Alice}}"


def test_nested_macros_resolve_inside_out() -> None:
    assert sub("{{getvar::{{char}}_mood}}", local_vars={"Alice_mood": "happy"}) == "happy"
    assert sub("{{reverse::{{char}}}}") == "ecilA"


def test_a_nested_result_is_one_argument_even_if_it_contains_separators() -> None:
    ctx = make(local_vars={"src": "a::b"})
    assert substitute("{{setvar::dst::{{getvar::src}}}}", ctx) == ""
    assert ctx.local_vars["dst"] == "a::b"


# --- utilities ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("a{{newline}}b", "a\nb"), ("a{{newline::3}}b", "a\n\n\nb"), ("a{{space}}b", "a b"), ("a{{space::4}}b", "a    b"),
    ("a{{noop}}b", "ab"), ("a{{// a comment}}b", "ab"), ("a{{//no space}}b", "ab"),
    ("a{{// says {{char}} :: twice}}b", "ab"), ("{{reverse:abc}}", "cba"), ("{{reverse::I am Lana}}", "anaL ma I"),
    ('{{banned "delve"}}x', "x"), ("{{banned::delve}}x", "x"),
])
def test_utility_macro(text: str, expected: str) -> None:
    assert sub(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("a\n\n{{trim}}\n\nb", "ab"), ("a\r\n{{trim}}\r\nb", "ab"), ("a \n{{trim}}\n b", "a  b"),
    ("{{trim}}\n\nstart", "start"), ("a\n{{trim}}\n{{trim}}\nb", "ab"),
    # {{noop}} is "" at once (core-macros.js); the legacy-trim post-processor then sees "a\n\n{{trim}}\nb"
    ("a\n{{noop}}\n{{trim}}\nb", "ab"),
    ("a{{newline}}{{trim}}b", "ab"),  # newlines produced by macros are trimmed too
])
def test_trim_removes_itself_and_adjacent_newlines(text: str, expected: str) -> None:
    assert sub(text) == expected


def test_outlet() -> None:
    assert sub("[{{outlet::Lore}}][{{outlet::Missing}}]", outlets={"Lore": "outlet text"}) == "[outlet text][]"


# --- randomness -----------------------------------------------------------------------------------------------

def test_random_picks_by_rng_each_evaluation() -> None:
    assert sub("{{random::a::b::c}}", rng=scripted(0.0)) == "a"
    assert sub("{{random::a::b::c}}", rng=scripted(0.99)) == "c"
    assert sub("{{random::a::b}} {{random::a::b}}", rng=scripted(0.1, 0.9)) == "a b"
    assert sub("{{random:: a :: b }}", rng=scripted(0.9)) == "b"


def test_random_accepts_a_random_instance() -> None:
    assert sub("{{random::x::y}}", rng=random.Random(3)) in {"x", "y"}


def test_legacy_random_with_commas_and_escaped_comma() -> None:
    assert sub(r"{{random:a\,b,c}}", rng=scripted(0.0)) == "a,b"
    assert sub(r"{{random:a\,b,c}}", rng=scripted(0.9)) == "c"
    assert sub("{{random: x , y }}", rng=scripted(0.9)) == "y"
    assert sub("{{random::one,two}}", rng=scripted(0.9)) == "two"  # a single argument splits on commas too
    assert sub("{{random}}") == ""


def test_nested_random_gives_only_the_four_outcomes_and_all_of_them() -> None:
    text = "{{random::None::{{random::Alice::Bob}} appears.::The world ends.}}"
    allowed = {"None", "Alice appears.", "Bob appears.", "The world ends."}
    seen = {sub(text, rng=random.Random(seed)) for seed in range(300)}
    assert seen == allowed


def test_pick_is_stable_for_the_same_chat_and_text() -> None:
    text = "{{pick::a::b::c::d::e::f}}"
    first = sub(text)  # draws nothing from ctx.rng
    assert all(sub(text) == first for _ in range(5))
    assert first in {"a", "b", "c", "d", "e", "f"}
    picks = {sub(text, chat_id=f"chat-{n}") for n in range(40)}
    assert len(picks) > 1  # the chat id is part of the seed


def test_pick_depends_on_position_and_legacy_list() -> None:
    text = " ".join(["{{pick::1::2::3::4::5::6::7::8::9}}"] * 12)
    assert len(set(sub(text).split())) > 1  # the macro's offset is part of the seed
    assert sub(r"{{pick:x\,y}}") == "x,y"


def test_roll_uses_the_rng_and_dice_grammar() -> None:
    assert sub("{{roll:d20}}", rng=scripted(0.0)) == "1"
    assert sub("{{roll:d20}}", rng=scripted(0.999)) == "20"
    assert sub("{{roll 2d6+3}}", rng=scripted(0.0, 0.999)) == "10"
    assert sub("{{roll:20}}", rng=scripted(0.5)) == "11"  # digits alone mean 1dN
    assert sub("{{roll::3d4-2}}", rng=scripted(0.0, 0.0, 0.0)) == "1"


@pytest.mark.parametrize("formula", ["abc", "0", "d0", "0d6", "2d6 + 3", "1d", "101d6", "1d1001", "2d6+3+1", "1.5d6"])
def test_invalid_roll_is_empty(formula: str) -> None:
    assert sub(f"[{{{{roll:{formula}}}}}]") == "[]"


def test_roll_bounds() -> None:
    rng = random.Random(7)
    d20 = [int(sub("{{roll:d20}}", rng=rng)) for _ in range(400)]
    assert min(d20) == 1 and max(d20) == 20
    totals = [int(sub("{{roll 2d6+3}}", rng=rng)) for _ in range(400)]
    assert min(totals) >= 5 and max(totals) <= 15
    big = [int(sub("{{roll:100d1000}}", rng=rng)) for _ in range(20)]
    assert all(100 <= total <= 100_000 for total in big)


# --- time -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("{{time}}", "2:07 PM"), ("{{date}}", "March 5, 2024"), ("{{weekday}}", "Tuesday"), ("{{isotime}}", "14:07"),
    ("{{isodate}}", "2024-03-05"), ("{{time::UTC+2}}", "4:07 PM"), ("{{time_UTC+2}}", "4:07 PM"),
    ("{{time_UTC-10}}", "4:07 AM"), ("{{time::nonsense}}", "2:07 PM"),
    ("{{datetimeformat::YYYY-MM-DD HH:mm:ss}}", "2024-03-05 14:07:09"),
    ("{{datetimeformat dddd, MMMM Do YYYY}}", "Tuesday, March 5th 2024"),
    ("{{datetimeformat DD.MM.YY [at] h:mm a}}", "05.03.24 at 2:07 pm"),
    ("{{datetimeformat::LLLL}}", "Tuesday, March 5, 2024 2:07 PM"),
    ("{{datetimeformat::ddd MMM D, Z}}", "Tue Mar 5, +00:00"),
])
def test_time_macro(text: str, expected: str) -> None:
    assert sub(text) == expected


def test_numbers_of_thousands_of_digits_are_read_as_out_of_range_not_raised() -> None:
    # Python refuses int() past 4,300 digits (found by the fuzz test): such a count or offset is
    # past every limit, so the macro does what it does for any number past it.
    huge = "9" * 5000
    assert sub("a{{newline::" + huge + "}}b") == "a{{newline::" + huge + "}}b"  # past _MAX_REPEAT: left raw
    assert sub("{{time_UTC+" + huge + "}}") == "2:07 PM"  # no such offset: the time of `now`
    assert sub("{{time_UTC-" + huge + "}}") == "2:07 PM"


def test_time_uses_the_zone_of_now() -> None:
    tokyo = timezone(timedelta(hours=9))
    assert sub("{{time}} {{isodate}}", now=lambda: datetime(2024, 3, 5, 0, 5, tzinfo=tokyo)) == "12:05 AM 2024-03-05"
    assert sub("{{time::UTC+2}}", now=lambda: datetime(2024, 3, 5, 0, 5, tzinfo=tokyo)) == "5:05 PM"


@pytest.mark.parametrize(("ago", "expected"), [
    (timedelta(seconds=10), "a few seconds"), (timedelta(seconds=44), "a few seconds"),
    (timedelta(seconds=45), "a minute"), (timedelta(seconds=89), "a minute"), (timedelta(seconds=90), "2 minutes"),
    (timedelta(minutes=44), "44 minutes"), (timedelta(minutes=45), "an hour"), (timedelta(minutes=89), "an hour"),
    (timedelta(minutes=90), "2 hours"), (timedelta(hours=21), "21 hours"), (timedelta(hours=22), "a day"),
    (timedelta(hours=35), "a day"), (timedelta(hours=36), "2 days"), (timedelta(days=25), "25 days"),
    (timedelta(days=26), "a month"), (timedelta(days=46), "2 months"), (timedelta(days=320), "a year"),
    (timedelta(days=548), "2 years"), (-timedelta(minutes=5), "5 minutes"),
])
def test_idle_duration_is_humanized_like_moment(ago: timedelta, expected: str) -> None:
    assert sub("{{idle_duration}}", last_user_message_at=NOW - ago) == expected
    assert sub("{{idleDuration}}", last_user_message_at=NOW - ago) == expected


def test_idle_duration_without_a_user_message() -> None:
    assert sub("{{idle_duration}}") == "just now"


# --- variables ------------------------------------------------------------------------------------------------

def test_setvar_getvar_and_numbers_print_like_javascript() -> None:
    ctx = make()
    assert substitute("{{setvar::n::5}}[{{getvar::n}}]", ctx) == "[5]"
    assert ctx.local_vars == {"n": "5"}
    assert substitute("{{setvar::n::05.50}}{{getvar::n}}", ctx) == "5.5"
    assert substitute("{{getvar::missing}}|{{getvar::f}}|{{getvar::big}}", make(local_vars={"f": 3.0, "big": 1e21})) \
        == "|3|1e+21"


def test_addvar_adds_numbers_and_appends_strings() -> None:
    ctx = make(local_vars={"n": "5", "s": "ab"})
    assert substitute("{{addvar::n::2.5}}{{getvar::n}}", ctx) == "7.5"
    assert ctx.local_vars["n"] == 7.5
    assert substitute("{{addvar::n::0.5}}{{getvar::n}}", ctx) == "8"
    assert ctx.local_vars["n"] == 8
    assert substitute("{{addvar::s::cd}}{{getvar::s}}", ctx) == "abcd"
    assert substitute("{{addvar::new::x}}{{getvar::new}}", ctx) == "x"
    assert substitute("{{addvar::n::x}}{{getvar::n}}", ctx) == "8x"
    assert substitute("{{setvar::p::0.1}}{{addvar::p::0.2}}{{getvar::p}}", ctx) == "0.30000000000000004"


def test_addvar_pushes_onto_a_json_array() -> None:
    ctx = make(local_vars={"list": '["a",1]'})
    assert substitute("{{addvar::list::b}}{{getvar::list}}", ctx) == '["a",1,"b"]'


def test_incvar_and_decvar_return_the_new_value() -> None:
    ctx = make(local_vars={"n": "2"})
    assert substitute("{{incvar::n}} {{incvar::n}} {{decvar::n}}", ctx) == "3 4 3"
    assert ctx.local_vars["n"] == 3
    assert substitute("{{decvar::fresh}}", ctx) == "-1"
    assert substitute("{{incvar::word}}", make(local_vars={"word": "abc"})) == "abc1"  # ST appends


def test_hasvar_and_deletevar() -> None:
    ctx = make(local_vars={"x": ""})
    assert substitute("{{hasvar::x}} {{hasvar::y}}", ctx) == "true false"
    assert substitute("{{deletevar::x}}{{hasvar::x}}", ctx) == "false"
    assert ctx.local_vars == {}


def test_global_variables_are_separate() -> None:
    ctx = make(local_vars={"n": "1"}, global_vars={"n": "10"})
    text = ("{{getvar::n}} {{getglobalvar::n}} {{addglobalvar::n::5}}{{getglobalvar::n}} {{incglobalvar::n}} "
            "{{decglobalvar::n}} {{hasglobalvar::n}} {{setglobalvar::g::hi}}{{getglobalvar::g}} "
            "{{deleteglobalvar::n}}{{hasglobalvar::n}} {{getvar::n}}")
    assert substitute(text, ctx) == "1 10 15 16 15 true hi false 1"
    assert ctx.global_vars == {"g": "hi"}
    assert ctx.local_vars == {"n": "1"}


def test_variables_set_and_read_in_one_pass_in_order() -> None:
    assert sub("{{setvar::mood::calm}}{{char}} is {{getvar::mood}}.") == "Alice is calm."


# --- hostile input --------------------------------------------------------------------------------------------

HOSTILE = {
    "1 MB of {{": "{{" * 500_000,
    "spaced {{": "{{ " * 333_333,
    "deep unknown nesting": "{{a " * 100_000 + "}}" * 100_000,
    "deep known nesting": "{{reverse::xxxxxxxx" * 20_000 + "}}" * 20_000,
    "many macros": "{{char}}" * 125_000,
    "many }}": "}}" * 500_000,
    "newlines before trim": "\n" * 1_000_000 + "{{trim}}",
    "long argument list": "{{random" + "::a" * 300_000 + "}}",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_input_completes(name: str) -> None:
    text = HOSTILE[name]
    result = substitute(text, make(rng=random.Random(0)))
    assert isinstance(result, str)
    assert len(result) <= len(text)


def test_self_doubling_variable_is_bounded() -> None:
    text = "{{setvar::a::xx}}" + "{{addvar::a::{{getvar::a}}}}" * 60 + "{{getvar::a}}" * 100
    result = substitute(text, make())
    assert len(result) < 50_000_000


def test_substitute_names_is_unchanged() -> None:
    assert substitute_names("{{Char}} <user> {{random::a::b}}", "Alice", "Bob") == "Alice Bob {{random::a::b}}"
    assert substitute_names("", "Alice", "Bob") == ""
