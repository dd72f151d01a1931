"""Provides `tavern presets`, `strategies`, `strategy save|apply` and `preview`: how the next
request is assembled, and the exact request it would be."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

from tavern_tui.cli.context import open_service, service_for, settings
from tavern_tui.cli.diagnostics import EXIT_OK
from tavern_tui.cli.output import context_line, ljust, print_json, print_rows
from tavern_tui.errors import TavernError

if TYPE_CHECKING:
    from tavern_tui.assembly.strategies import StrategySpec
    from tavern_tui.cli.app import Commands
    from tavern_tui.views import PresetView


def add_preview(commands: Commands) -> None:
    """`tavern preview PLAYTHROUGH [--input TEXT] [--json] [--preset/--lore/--strategy]`."""
    p_preview = commands.add("preview", cmd_preview,
                             help="print the exact request the next step would send (no model call, binds nothing)")
    p_preview.add_argument("playthrough", type=int, nargs="?", metavar="PLAYTHROUGH")
    p_preview.add_argument("--draft", type=int, metavar="DRAFT",
                           help="preview an opening draft instead: its first request without history or input")
    p_preview.add_argument("--input", default="", metavar="TEXT", help="what you would send")
    p_preview.add_argument("--json", action="store_true")
    # Preview is read-only (issue 20 item 3): these try a selection; binding is `strategy apply`, `lore bind`.
    p_preview.add_argument("--preset", metavar="NAME", help="preview with this preset (not bound)")
    p_preview.add_argument("--lore", action="append", default=[], metavar="BOOK",
                           help="preview with this world book added as chat lore (repeatable; not bound)")
    p_preview.add_argument("--strategy", metavar="NAME", help="preview with this strategy (not applied)")


def add_presets(commands: Commands) -> None:
    """`tavern presets [--json]`."""
    p_presets = commands.add("presets", cmd_presets, help="list imported chat-completion presets")
    p_presets.add_argument("--json", action="store_true")


def add_strategies(commands: Commands) -> None:
    """`tavern strategies [--json]`."""
    p_strategies = commands.add("strategies", cmd_strategies,
                                help="list assembly strategies (built-in and saved versions)")
    p_strategies.add_argument("--json", action="store_true")


def add_strategy(commands: Commands) -> None:
    """`tavern strategy save NAME --base B …` and `tavern strategy apply PLAYTHROUGH NAME [--version N]`."""
    p_strategy = commands.add("strategy", help="save a strategy version, or apply one to a playthrough")
    sub = commands.group(p_strategy, dest="strategy_command", metavar="SUBCOMMAND")
    p_save = sub.add("save", cmd_strategy_save, help="save a new strategy or its next version (never applies it)")
    p_save.add_argument("name")
    p_save.add_argument("--base", required=True, help="compat, preset-roles-first, preset-slots-first or projection")
    p_save.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    p_save.add_argument("--expected-version", type=int, default=0, metavar="N",
                        help="the newest saved version you read (0 for a new name)")
    p_apply = sub.add("apply", cmd_strategy_apply, help="apply a strategy (version) to a playthrough")
    p_apply.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_apply.add_argument("name")
    p_apply.add_argument("--version", type=int)
    # The one step past an endpoint that rejects a call parameter the fallback never drops.
    p_omit = commands.add("omit-param", cmd_omit_param,
                          help="leave a call parameter out of one playthrough's requests (the preset is unchanged)")
    p_omit.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_omit.add_argument("name", metavar="PARAMETER", help="e.g. top_p, frequency_penalty, seed")
    p_omit.add_argument("--send", action="store_true", help="send it again (undo)")


def cmd_omit_param(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern omit-param P NAME [--send]`: the parameters this playthrough leaves out, after the change."""
    with open_service(args) as tavern:
        left_out = tavern.presets.omit_parameter(args.playthrough, args.name, keep=args.send)
    out.write(f"playthrough {args.playthrough} leaves out: {', '.join(left_out) or 'nothing'}\n")
    return EXIT_OK


def cmd_preview(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The request the next step would send: messages with their source, config, tokens."""
    from tavern_tui.assembly.attribution import breakdown_text, describe
    from tavern_tui.tools import offer_line
    if (args.playthrough is None) == (args.draft is None):
        raise TavernError("give a PLAYTHROUGH or --draft DRAFT (one of them)")
    with open_service(args) as tavern:
        if args.draft is not None:
            if args.input or args.preset or args.lore or args.strategy:
                raise TavernError("a draft's preview is its own selections without input; "
                                  "change them with `tavern draft edit`")
            shown = tavern.steps.preview_draft(args.draft)
        else:
            preset, books = tavern.playthroughs.check_selection(preset=args.preset, lore=args.lore,
                                                                strategy=args.strategy)
            shown = tavern.steps.preview_selection(args.playthrough, args.input, strategy=args.strategy,
                                                   preset=preset.id if preset is not None else False,
                                                   lore=[b.id for b in books])
    if args.json:
        return print_json(out, shown)
    out.write(f"PREVIEW (not sent) · strategy {shown['strategy']} · ~{shown['tokens'].get('total', 0):,} tokens"
              f" · config {json.dumps(shown['config'])}\n")
    context = shown.get("context")
    if context:
        out.write(context_line(context) + "\n")
    for message, parts in zip(shown["messages"], shown.get("parts") or [None] * len(shown["messages"])):
        name = f" ({message['name']})" if message.get("name") else ""
        out.write(f"\n[{message['role']}{name} · {message['source']}]\n")
        if parts and len(parts) > 1:
            for part in parts:
                out.write(f"  · {part['start']}-{part['end']} ~{part['tokens']} tok  {describe(part)}\n")
        elif parts:
            out.write(f"  part: {describe(parts[0])} (~{parts[0]['tokens']} tok)\n")
        out.write(f"{message['content']}\n")
    if shown.get("breakdown"):
        out.write(f"\ntokens by category: {breakdown_text(shown['breakdown'])}\n")
    tools = shown.get("tools") or []
    out.write(f"\ntools offered: {offer_line(tools)}\n" if tools else "\ntools offered: none\n")
    for note in shown["adjustments"]:
        out.write(f"\nadjusted: {note}")
    if shown["adjustments"]:
        out.write("\n")
    return EXIT_OK


def _preset_line(p: PresetView, label: str) -> str:
    return f"{p.id:>4}  {ljust(label, 32)} {p.prompts:>4} prompts, {p.enabled} sent (order {p.order_source})"


def cmd_presets(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """List the presets: SillyTavern's built-in default first (what a playthrough without a bound
    preset uses; text output only), then the imported ones (presets that share a name show their
    file and id). `--json` lists the imported ones. Read before the service opens where it can be
    (`service.list_reads`)."""
    from tavern_tui.service.list_reads import PresetList, preset_list
    from tavern_tui.views import distinct_labels

    loaded = settings(args)
    listed = preset_list(loaded.db_url)
    if listed is None:
        with service_for(loaded) as tavern:
            listed = PresetList(tavern.presets.presets(), tavern.presets.preset_of(None)[0])
    items, default = listed.presets, listed.default
    if not args.json:
        enabled = sum(1 for item in default.order if item.enabled)
        out.write(f"{'-':>4}  {'SillyTavern default (built in)':<32} {len(default.prompts):>4} prompts, {enabled} sent "
                  f"(order {default.order_source}); used where no preset is bound\n")
    labels = distinct_labels(items)
    return print_rows(out, items, as_json=args.json, line=lambda p: _preset_line(p, labels[p.id]),
                      empty_hint="no presets imported; import a SillyTavern chat-completion preset with "
                                 "`tavern import FILE.json`")


def _strategy_line(spec: StrategySpec) -> str:
    options = ", ".join(f"{k}={v}" for k, v in spec.options.items())
    kind = "built in" if spec.builtin else f"v{spec.version} of {spec.base}"
    return f"{ljust(spec.name, 28)} {kind}" + (f"  ({options})" if options else "")


def cmd_strategies(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """List strategies: built-in, then the newest version of each saved one."""
    with open_service(args) as tavern:
        items = tavern.strategies.strategies()
    return print_rows(out, items, as_json=args.json, line=_strategy_line,
                      to_json=lambda s: {**s.snapshot(), "builtin": s.builtin})


def _option(text: str) -> tuple[str, Any]:
    """--option "KEY=VALUE": the value "true"/"false" (any case) becomes a bool, else stays text."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise TavernError(f"--option {text!r}: expected KEY=VALUE")
    return key.strip(), {"true": True, "false": False}.get(value.strip().lower(), value.strip())


def cmd_strategy_save(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern strategy save`: a new strategy or its next version; it is applied nowhere."""
    with open_service(args) as tavern:
        spec = tavern.strategies.save_strategy(args.name, args.base, dict(_option(o) for o in args.option),
                                    expected_version=args.expected_version)
    out.write(f"saved {spec.name} v{spec.version} ({spec.base}); not applied anywhere\n")
    return EXIT_OK


def cmd_strategy_apply(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern strategy apply`: the strategy (its newest version, or --version) for a playthrough."""
    with open_service(args) as tavern:
        spec = tavern.strategies.apply_strategy(args.playthrough, args.name, args.version)
    out.write(f"applied {spec.name} v{spec.version} to playthrough {args.playthrough}\n")
    return EXIT_OK
