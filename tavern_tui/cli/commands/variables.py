"""Provides `tavern vars` (macro variables of a playthrough) and `tavern macro eval` (expand macro text).

Everything here calls the `Tavern` service (`service/variables.py`). `vars --set/--delete` are durable
operator commits; `macro eval` never commits anything, even with `--playthrough`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tavern_tui.cli.context import open_service
from tavern_tui.cli.diagnostics import EXIT_OK
from tavern_tui.cli.output import print_json
from tavern_tui.errors import TavernError

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands
    from tavern_tui.service.variables import VariablesView


def add_vars(commands: Commands) -> None:
    """`tavern vars PLAYTHROUGH [--json] [--set NAME=VALUE]… [--delete NAME]… [--global]`."""
    p_vars = commands.add("vars", cmd_vars, help="macro variables of a playthrough (local) and of the profile (global)")
    p_vars.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_vars.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="set a variable (repeatable)")
    p_vars.add_argument("--delete", action="append", default=[], metavar="NAME", help="delete a variable (repeatable)")
    p_vars.add_argument("--global", dest="scope", action="store_const", const="global", default="local",
                        help="--set/--delete change global variables instead of local ones")
    p_vars.add_argument("--json", action="store_true")


def add_macro(commands: Commands) -> None:
    """`tavern macro eval TEXT | --file FILE`."""
    p_macro = commands.add("macro", help="the macro engine: expand text as SillyTavern 1.18 would")
    sub = commands.group(p_macro, dest="macro_command", metavar="SUBCOMMAND")
    p_eval = sub.add("eval", cmd_macro_eval, help="expand macros in TEXT (or in each JSON string line of --file)")
    source = p_eval.add_mutually_exclusive_group(required=True)
    source.add_argument("text", nargs="?", metavar="TEXT")
    source.add_argument("--file", type=Path, metavar="FILE",
                        help="one JSON string per line in; one JSON result per line out, fresh variables each")
    p_eval.add_argument("--user", metavar="NAME")
    p_eval.add_argument("--char", metavar="NAME")
    p_eval.add_argument("--playthrough", type=int, metavar="P",
                        help="start from its variables and names (read only: nothing is committed)")
    p_eval.add_argument("--seed", type=int, metavar="N", help="seed {{random}} and {{roll}}")
    p_eval.add_argument("--json", action="store_true", help='print {"output", "variables"}')


def _show(out: TextIO, view: VariablesView, as_json: bool) -> int:
    if as_json:
        return print_json(out, view.to_json())
    for title, values in (("local", view.local), ("global", view.global_)):
        out.write(f"{title} ({len(values)}):\n")
        if not values:
            out.write("  (none)\n")
        for name in sorted(values):
            out.write(f"  {name} = {json.dumps(values[name], ensure_ascii=False)}\n")
    return EXIT_OK


def cmd_vars(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern vars`: show the variables at the head; `--set`/`--delete` change them first (in the order given)."""
    with open_service(args) as tavern:
        for item in args.set:
            name, sep, value = item.partition("=")
            if not sep:
                raise TavernError(f"--set {item!r}: expected NAME=VALUE")
            tavern.variables.set(args.playthrough, name, value, scope=args.scope)
        for name in args.delete:
            tavern.variables.delete(args.playthrough, name, scope=args.scope)
        view = tavern.variables.variables(args.playthrough)
        if args.json:  # issue 18: the MVU record at the head (null: no MVU state)
            return print_json(out, {**view.to_json(), "mvu": tavern.mvu.head(args.playthrough).record})
        return _show(out, view, args.json)


def _read_lines(path: Path) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TavernError(f"{path}: cannot read: {exc}") from None
    texts = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TavernError(f"{path}: line {number}: not JSON ({exc.msg})") from None
        if not isinstance(value, str):
            raise TavernError(f"{path}: line {number}: expected a JSON string, got {type(value).__name__}")
        texts.append(value)
    return texts


def cmd_macro_eval(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern macro eval`: the expansion (with `--json` and always with `--file`: `{"output", "variables"}`)."""
    texts = _read_lines(args.file) if args.file is not None else [args.text]
    with open_service(args) as tavern:
        for text in texts:
            result: dict[str, Any] = tavern.variables.evaluate(
                text, user=args.user, char=args.char, playthrough_id=args.playthrough, seed=args.seed)
            for limit in result["limits"]:
                err.write(f"note: macro evaluation stopped: {limit}\n")
            if args.file is not None:
                out.write(json.dumps({"output": result["output"], "variables": result["variables"]},
                                     ensure_ascii=False) + "\n")
            elif args.json:
                print_json(out, {"output": result["output"], "variables": result["variables"]})
            else:
                out.write(result["output"] + "\n")
    return EXIT_OK
