"""Provides `tavern template save|list|show|delete`: configuration templates, a playthrough's
selection intent (strategy, preset, chat lore, persona) under a name. `tavern new CHARACTER
--template NAME` and `tavern chat CHARACTER --template NAME` start from one; a template never
holds messages, trace, inbox or resource bodies."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

from tavern_tui.cli.context import open_service
from tavern_tui.cli.diagnostics import EXIT_OK
from tavern_tui.cli.output import print_json, print_rows

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands
    from tavern_tui.service.templates import TemplateView


def add_templates(commands: Commands) -> None:
    """`tavern template save NAME --from PLAYTHROUGH [--force]`, `list [--json]`, `show NAME [--json]`
    and `delete NAME`."""
    p_template = commands.add("template", help="configuration templates: a playthrough's selections under a name")
    sub = commands.group(p_template, dest="template_command", metavar="SUBCOMMAND")
    p_save = sub.add("save", cmd_template_save,
                     help="save a playthrough's strategy, preset, chat lore and persona (never its messages)")
    p_save.add_argument("name", metavar="NAME")
    p_save.add_argument("--from", dest="playthrough", type=int, required=True, metavar="PLAYTHROUGH")
    p_save.add_argument("--force", "--replace", dest="force", action="store_true",
                        help="replace the template of that name")
    p_list = sub.add("list", cmd_template_list, help="the saved templates")
    p_list.add_argument("--json", action="store_true")
    p_show = sub.add("show", cmd_template_show, help="one template, with the names of what it selects")
    p_show.add_argument("name", metavar="NAME")
    p_show.add_argument("--json", action="store_true")
    p_delete = sub.add("delete", cmd_template_delete,
                       help="remove a template (playthroughs made from it keep their selections)")
    p_delete.add_argument("name", metavar="NAME")


def template_line(template: TemplateView) -> str:
    """One list line: name · strategy · preset id · persona id · chat-lore book ids."""
    books = f" · lore {', '.join(f'#{b}' for b in template.lore)}" if template.lore else ""
    preset = f"#{template.preset_id}" if template.preset_id is not None else "default"
    persona = f" · persona #{template.persona_id}" if template.persona_id is not None else ""
    return f"{template.name} · {template.strategy or 'compat'} · preset {preset}{persona}{books}"


def cmd_template_save(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Save the template and print its line."""
    with open_service(args) as tavern:
        template = tavern.templates.save(args.name, args.playthrough, replace=args.force)
    out.write(f"saved {template_line(template)}\n")
    return EXIT_OK


def cmd_template_list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The templates by name (JSON with --json)."""
    with open_service(args) as tavern:
        templates = tavern.templates.templates()
    return print_rows(out, templates, as_json=args.json, line=template_line,
                      empty_hint="no templates yet; save one with `tavern template save NAME --from PLAYTHROUGH`")


def _named(name: Any, ident: int | None) -> str:
    """"Name (#3)", "#3 (gone)" for a resource removed since the template was saved."""
    return f"{name} (#{ident})" if name else f"#{ident} (gone)"


def cmd_template_show(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The template, each selection by name (JSON with --json)."""
    with open_service(args) as tavern:
        shown = tavern.templates.show(args.name)
    if args.json:
        return print_json(out, shown)
    snapshot = shown["strategy_snapshot"]
    strategy = f"{snapshot.get('name') or 'compat'} v{snapshot.get('version', 1)}" if snapshot else "compat"
    preset = "default" if shown["preset_id"] is None else _named(shown["preset_name"], shown["preset_id"])
    persona = "default" if shown["persona_id"] is None else _named(shown["persona_name"], shown["persona_id"])
    books = [_named(n, b) for n, b in zip(shown["lore_names"], shown["lore"])]
    out.write(f"template {shown['name']} (saved {shown['updated_at']})\n"
              f"  strategy  {strategy}\n  preset    {preset}\n  persona   {persona}\n"
              f"  lore      {', '.join(books) if books else 'none'}\n")
    return EXIT_OK


def cmd_template_delete(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Remove the template."""
    with open_service(args) as tavern:
        tavern.templates.delete(args.name)
    out.write(f"deleted template {args.name.strip()}\n")
    return EXIT_OK
