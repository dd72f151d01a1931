"""Provides `tavern mvu init | parse | apply` (MVU state from files, issue 18 item 6).

Nothing here opens the database: `init` reads a card file, `parse` and `apply` a reply text. Each takes
`--batch FILE`: one JSON input a line (a card path string for `init`, a reply text string for `parse`,
`{"state": {…}, "text": "…"}` for `apply`), one JSON result a line, each line on its own (a bad line prints
`{"error": "…"}` and the others still run; the exit status is then 1).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tavern_tui.cli.diagnostics import EXIT_OK
from tavern_tui.cli.output import print_json
from tavern_tui.errors import TavernError

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands

EXIT_SOME_FAILED = 1


def add_mvu(commands: Commands) -> None:
    """`tavern mvu init CARD [--greeting N]`, `tavern mvu parse FILE`, `tavern mvu apply STATE_JSON FILE`."""
    p_mvu = commands.add("mvu", help="MVU (MagVarUpdate) state: a card's initial record, a reply's commands")
    sub = commands.group(p_mvu, dest="mvu_command", metavar="SUBCOMMAND")
    p_init = sub.add("init", cmd_init, help="the initial MVU record of CARD ([InitVar] entries and a greeting)")
    p_init.add_argument("card", nargs="?", type=Path, metavar="CARD")
    p_init.add_argument("--greeting", type=int, default=1, metavar="N",
                        help="start on greeting N, counted from 1 as the chat's swipe counter does "
                             "(1 = first_mes, 2… = the alternate greetings)")
    p_init.add_argument("--user", default="User", metavar="NAME", help="the name {{user}} stands for")
    p_parse = sub.add("parse", cmd_parse, help="the commands found in a reply text: type, path, args, reason")
    p_parse.add_argument("file", nargs="?", type=Path, metavar="FILE")
    p_apply = sub.add("apply", cmd_apply, help="apply a reply text to a record {stat_data, schema}; print it after")
    p_apply.add_argument("state", nargs="?", type=Path, metavar="STATE_JSON")
    p_apply.add_argument("file", nargs="?", type=Path, metavar="FILE")
    for parser in (p_init, p_parse, p_apply):
        parser.add_argument("--batch", type=Path, metavar="FILE", help="one JSON input a line, one JSON result a line")
        parser.add_argument("--json", action="store_true")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TavernError(f"{path}: cannot read: {exc}") from None


def _batch(path: Path, out: TextIO, run: Callable[[Any], Any]) -> int:
    status = EXIT_OK
    for number, line in enumerate(_read(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            result = run(json.loads(line))
        except json.JSONDecodeError as exc:
            result, status = {"error": f"{path}: line {number}: not JSON ({exc.msg})"}, EXIT_SOME_FAILED
        except TavernError as exc:
            result, status = {"error": f"{path}: line {number}: {exc}"}, EXIT_SOME_FAILED
        out.write(json.dumps(result, ensure_ascii=False) + "\n")
    return status


def _need(value: Any, what: str) -> Any:
    if value is None:
        raise TavernError(f"give {what} or --batch FILE")
    return value


def _tree(out: TextIO, value: Any, indent: str = "") -> None:
    if isinstance(value, dict):
        for key, child in value.items():
            if isinstance(child, (dict, list)) and child and not _is_vwd(child):
                out.write(f"{indent}{key}:\n")
                _tree(out, child, indent + "  ")
            else:
                out.write(f"{indent}{key}: {json.dumps(child, ensure_ascii=False)}\n")
    elif isinstance(value, list):
        for child in value:
            out.write(f"{indent}- {json.dumps(child, ensure_ascii=False)}\n")


def _is_vwd(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and isinstance(value[1], str) and not isinstance(
        value[0], (dict, list))


def _changes(out: TextIO, result: dict[str, Any]) -> None:
    for change in result.get("changes") or []:
        out.write(f"changed {change['path'] or '(root)'}: {json.dumps(change['old'], ensure_ascii=False)} → "
                  f"{json.dumps(change['new'], ensure_ascii=False)}"
                  + (f" ({change['reason']})" if change.get("reason") else "") + "\n")
    for refusal in result.get("refused") or []:
        out.write(f"refused {refusal['command']}: {refusal['reason'].strip()}\n")


def _init(path: Path, greeting: int, user: str) -> dict[str, Any]:
    """`init_from_card` on the 1-based greeting a person typed; its result and errors count from 1 too."""
    from tavern_tui.service.mvu import init_from_card  # MVU's readers load with the command, not with the CLI

    try:
        result = init_from_card(path, greeting - 1, user=user)
    except TavernError as exc:
        found = re.search(r"no greeting -?\d+ \(the card has (\d+):", str(exc))
        if found is None:
            raise
        raise TavernError(f"{path}: no greeting {greeting} (the card has {found[1]}: 1 to {found[1]})") from None
    result["greeting"] = greeting
    return result


def cmd_init(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern mvu init`: the record (a tree, or `--json` the whole result)."""
    if args.greeting < 1:
        raise TavernError(f"--greeting counts from 1 (1 = the card's first greeting, 2… its alternate greetings), "
                          f"not {args.greeting}")
    if args.batch is not None:
        def one(item: Any) -> Any:
            if not isinstance(item, str):
                raise TavernError("expected a JSON string (a card file's path)")
            return _init(Path(item), args.greeting, args.user)
        return _batch(args.batch, out, one)
    result = _init(_need(args.card, "CARD"), args.greeting, args.user)
    for error in result["errors"]:
        err.write(f"warning: {error}\n")
    if args.json:
        return print_json(out, result)
    if result["record"] is None:
        out.write(f"{result['card']}: no MVU material ([InitVar] entries or a greeting <initvar>): no state\n")
        return EXIT_OK
    _tree(out, result["record"]["stat_data"])
    _changes(out, result)
    return EXIT_OK


def cmd_parse(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern mvu parse`: one line a command (or `--json` a list)."""
    from tavern_tui.service.mvu import parse_text

    if args.batch is not None:
        def one(item: Any) -> Any:
            if not isinstance(item, str):
                raise TavernError("expected a JSON string (a reply text)")
            return parse_text(item)
        return _batch(args.batch, out, one)
    commands = parse_text(_read(_need(args.file, "FILE")))
    if args.json:
        return print_json(out, commands)
    for c in commands:
        out.write(f"{c['type']} {c['path']} {json.dumps(c['args'][1:], ensure_ascii=False)}"
                  + (f"  // {c['reason']}" if c["reason"] else "") + "\n")
    if not commands:
        out.write("(no commands)\n")
    return EXIT_OK


def _state(path: Path) -> Any:
    try:
        return json.loads(_read(path))
    except json.JSONDecodeError as exc:
        raise TavernError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None


def cmd_apply(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern mvu apply`: the record after (a tree, or `--json` the whole result)."""
    from tavern_tui.service.mvu import apply_text

    if args.batch is not None:
        def one(item: Any) -> Any:
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                raise TavernError('expected {"state": {…}, "text": "…"}')
            return apply_text(item.get("state"), item["text"])
        return _batch(args.batch, out, one)
    result = apply_text(_state(_need(args.state, "STATE_JSON")), _read(_need(args.file, "FILE")))
    if args.json:
        return print_json(out, result)
    _tree(out, result["record"]["stat_data"])
    _changes(out, result)
    return EXIT_OK
