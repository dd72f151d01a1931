"""Hostile replies and cards cannot stall MVU: command extraction is linear, YAML/JSON5 expansion is capped.

Reproductions: 5,000 unclosed `_.set(` took 22 s (each rescanned the rest of the reply); a YAML
anchor bomb in `[InitVar]` or a `<JsonPatch>` grew past 1.5 GB.
"""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from pathlib import Path

from tavern_tui.mvu.commands import (
    _COMMAND,
    _COMMENT,
    _MIN_ARGS,
    Command,
    extract_commands,
    find_matching_close_paren,
    parse_parameters,
)


def _reference(text: str) -> list[Command]:
    """MVU's `extractCommands` loop as written (quadratic): the oracle for the linear scanner."""
    found, i = [], 0
    while i < len(text):
        m = _COMMAND.search(text, i)
        if m is None:
            break
        kind, start, open_paren = m.group(1), m.start(), m.end()
        close = find_matching_close_paren(text, open_paren)
        if close == -1:
            i = open_paren
            continue
        end = close + 1
        if end >= len(text) or text[end] != ";":
            i = close + 1
            continue
        end += 1
        comment = _COMMENT.match(text, end)
        reason = comment.group(1).strip() if comment else ""
        end = comment.end() if comment else end
        params = parse_parameters(text[open_paren:close])
        if (len(params) == 2) if kind == "add" else (len(params) >= _MIN_ARGS[kind]):
            found.append(Command(kind, tuple(params), reason, text[start:end], start))
        i = end
    return found


def test_linear_scanner_agrees_with_mvu_loop_on_random_replies() -> None:
    rnd = random.Random(20240605)
    pieces = ["_.set(", "_.add(", "_.delete(", "(", ")", ");", "'", '"', "`", "\\", "a", ",", " 1", "//r\n", "x'"]
    for _ in range(5000):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 30)))
        assert extract_commands(text) == _reference(text), text


def test_commands_after_unclosed_calls_and_apostrophes_are_found() -> None:
    text = "It's late. _.set('a', (" + " _.set(" * 50 + "\n_.set('hp', 3);//hit\n_.add('gold', 2);"
    assert [(c.type, c.args, c.reason) for c in extract_commands(text)] == _reference_summary(text)


def _reference_summary(text: str) -> list[tuple[str, tuple[str, ...], str]]:
    return [(c.type, c.args, c.reason) for c in _reference(text)]


def test_many_unclosed_calls_finish_within_bounds() -> None:
    # Before: 22 s for 5,000. Bound, not timing: 80,000 of each shape in a subprocess under a 60 s timeout.
    script = textwrap.dedent("""
        from tavern_tui.mvu.commands import extract_commands
        for unit in ["_.set(", "'_.set(", "_.set('a', (", "x'_.set(\\""]:
            print(len(extract_commands(unit * 80_000 + "_.set('ok', 1);")))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1", "1", "1"]  # the closed call at the end, as MVU finds it


def _anchor_bomb() -> str:
    """Ten levels of nine aliases each: 9**10 (3.4 billion) strings from eleven lines."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return "\n".join(lines)


def test_anchor_bomb_is_refused_with_the_reason() -> None:
    from tavern_tui.mvu.values import ParseError, parse_string

    try:
        parse_string(_anchor_bomb())
    except ParseError as exc:
        assert str(exc) == "YAML: expands to more than 200000 values (YAML aliases repeat their anchor); refused"
    else:
        raise AssertionError("the bomb parsed")
    assert parse_string("a: &x [1, 2]\nb: *x") == {"a": [1, 2], "b": [1, 2]}  # ordinary aliases still work


def test_a_text_longer_than_the_reader_takes_is_refused_with_the_reason() -> None:
    # 2,000,000 newlines (a card's `{{newline::1000}}` x 2,000 in an [InitVar]) took the YAML reader 7 s.
    from tavern_tui.mvu.init import InitBook, load_initvar
    from tavern_tui.mvu.values import MAX_TEXT, ParseError, parse_string

    try:
        parse_string("a: 1\n" + "\n" * MAX_TEXT)
    except ParseError as exc:
        assert str(exc) == f"{MAX_TEXT + 5} characters, above the {MAX_TEXT} this reader accepts; refused"
    else:
        raise AssertionError("the long text parsed")
    assert parse_string("a: 1\n" + "\n" * (MAX_TEXT - 6)) == {"a": 1}
    errors: list[str] = []
    record: dict = {}
    load_initvar(record, [InitBook("Lore", (("[InitVar] start", "{{newline::1000}}" * 2000),))],
                 substitute=lambda text: text.replace("{{newline::1000}}", "\n" * 1000), errors=errors)
    assert errors == [f"world book 'Lore', entry '[InitVar] start': 2000000 characters, above the {MAX_TEXT} "
                      "this reader accepts; refused"]


def test_initvar_blocks_are_unwrapped_as_mvu_does_with_text_around_the_tags() -> None:
    # MVU's pattern allows text before <initvar> and after </initvar> on their lines; a line of 30,000
    # characters without the tag once took 2 s to search.
    from tavern_tui.mvu.init import InitBook, load_initvar

    for content, stat in [("intro <initvar> tail\na: 1\nb: 2\n  </initvar> outro", {"a": 1, "b": 2}),
                          ("x<initvar><initvar>\nc: 3\n</initvar>", {"c": 3}),
                          ("_.set(" * 5000 + "\nd: 4", None)]:
        errors: list[str] = []
        record: dict = {}
        load_initvar(record, [InitBook("Lore", (("[InitVar]", content),))], errors=errors)
        if stat is None:
            assert errors and errors[0].startswith("world book 'Lore', entry '[InitVar]': ")
        else:
            assert (record["stat_data"], errors) == (stat, [])


def test_anchor_bomb_in_initvar_and_json_patch_stays_small() -> None:
    # Before: past 1.5 GB (InitVar) and 60 s / 693 MB (JsonPatch). Bound: 1 GiB of address space.
    script = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from tavern_tui.mvu.commands import extract_commands
        from tavern_tui.mvu.init import InitBook, load_initvar
        bomb = {_anchor_bomb()!r}
        errors = []
        record = {{}}
        load_initvar(record, [InitBook("Lore", (("[InitVar] start", bomb),))], errors=errors)
        print(errors)
        print(extract_commands("<JsonPatch>\\n" + bomb + "\\n</JsonPatch>"))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "[\"world book 'Lore', entry '[InitVar] start': YAML: expands to more than 200000 values (YAML aliases "
        "repeat their anchor); refused\"]",
        "[]",
    ]


def test_a_refused_initvar_entry_is_named_with_the_initial_record(tmp_path: Path, corpus_dir: Path) -> None:
    # The chat's state pane and trace read the record's commit: an [InitVar] entry refused at
    # initialisation (here an alias bomb) must say so there, not only in `tavern mvu init`.
    import json

    from tavern_tui.config import Settings
    from tavern_tui.service import Tavern
    from tests.conftest import ScriptedModel

    card = json.loads((corpus_dir / "cards" / "ai_v3_with_book.json").read_text(encoding="utf-8"))
    entries = card["data"]["character_book"]["entries"]
    entries[0].update(comment="[InitVar] bomb", enabled=False, content=_anchor_bomb())
    path = tmp_path / "bomb.json"
    path.write_text(json.dumps(card, ensure_ascii=False), encoding="utf-8")
    tavern = Tavern(Settings(db_url=f"sqlite:///{tmp_path / 't.db'}"), provider=ScriptedModel(delay=0))
    try:
        [result] = tavern.imports.import_paths([path])
        pid = tavern.playthroughs.new_playthrough(result.id).id  # type: ignore[arg-type]
        assert tavern.mvu.ensure_initialised(pid)
        head = tavern.mvu.head(pid)
        assert head.committed and head.record is not None
        assert head.refused == [{"command": "initial variables",
                                 "reason": "world book '爱', entry '[InitVar] bomb': YAML: expands to more than "
                                           "200000 values (YAML aliases repeat their anchor); refused"}]
    finally:
        tavern.close()
