"""Provides `tavern import`, `sessions`, `show`, `tree` and `export`: what is in the library and
a playthrough's messages, read or written."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from tavern_tui.cli.context import open_service, service_for, settings
from tavern_tui.cli.diagnostics import EXIT_FAILED, EXIT_OK
from tavern_tui.cli.output import ljust, print_json, print_rows
from tavern_tui.errors import TavernError

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands
    from tavern_tui.views import PlaythroughView


def add_import(commands: Commands) -> None:
    """`tavern import PATH... [--character NAME | --group GROUP] [--json]`."""
    p_import = commands.add("import", cmd_import, help="import character cards, world books, presets, persona backups, "
                                                       "SillyTavern chats (.jsonl), groups and group chats")
    p_import.add_argument("paths", nargs="+", metavar="PATH")
    whose = p_import.add_mutually_exclusive_group()
    whose.add_argument("--character", metavar="NAME", help="the character imported chats are with "
                                                          "(default: the name in the chat file)")
    whose.add_argument("--group", metavar="GROUP",
                       help="the group (id or name) imported chats are of: each becomes a playthrough of it "
                            "(default for a group chat: the imported group that lists its file name)")
    p_import.add_argument("--json", action="store_true", help="print a JSON list of results")


def add_sessions(commands: Commands) -> None:
    """`tavern sessions [--character NAME] [--json]`."""
    p_sessions = commands.add("sessions", cmd_sessions, help="list playthroughs, newest first")
    p_sessions.add_argument("--character", metavar="NAME", help="only this character's playthroughs")
    p_sessions.add_argument("--all", action="store_true", help="archived ones too (marked)")
    p_sessions.add_argument("--json", action="store_true")


def add_show(commands: Commands) -> None:
    """`tavern show PLAYTHROUGH [--json] [--system] [--all]`."""
    p_show = commands.add("show", cmd_show, help="print a playthrough's messages with role and origin")
    p_show.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_show.add_argument("--json", action="store_true")
    p_show.add_argument("--system", action="store_true", help="include the system section sent to the model")
    p_show.add_argument("--all", action="store_true",
                        help="also list the originals each summary replaced (marked; never sent)")


def add_tree(commands: Commands) -> None:
    """`tavern tree PLAYTHROUGH [--json]`."""
    p_tree = commands.add("tree", cmd_tree, help="print a playthrough's timeline: every message variant")
    p_tree.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_tree.add_argument("--json", action="store_true")


def add_export(commands: Commands) -> None:
    """`tavern export PLAYTHROUGH --jsonl FILE` or `tavern export CHARACTER --png|--json FILE`."""
    p_export = commands.add("export", cmd_export, help="write a playthrough as a SillyTavern chat (.jsonl; a group's "
                                                       "as a group chat), or a character as a card (.png / .json)")
    p_export.add_argument("target", metavar="PLAYTHROUGH|CHARACTER",
                          help="a playthrough id with --jsonl; a character id or name with --png/--json")
    kinds = p_export.add_mutually_exclusive_group(required=True)
    kinds.add_argument("--jsonl", metavar="FILE", help="the playthrough as a chat ('-' for stdout)")
    kinds.add_argument("--png", metavar="FILE", help="the character's card in its picture (chara + ccv3 chunks)")
    kinds.add_argument("--json", metavar="FILE", help="the character's card as V2 JSON ('-' for stdout)")


def cmd_import(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Import cards, world books, presets, personas and chats; exit 1 when any file failed or
    there was nothing to import."""
    with open_service(args) as tavern:
        results = tavern.imports.import_paths(args.paths, character=args.character, group=args.group)
    if args.json:
        print_json(out, [r.to_json() for r in results])
    else:
        for r in results:
            if r.error:
                err.write(f"error: {r.error}\n")
            else:
                verb = "already imported" if r.duplicate else "imported"  # the stored one is kept as it was
                kind = r.kind.replace("_", " ")
                if r.kind == "persona":  # its id is the persona's new version, not a new record
                    out.write(f"{verb} persona(s) {r.name}  [{r.path}]\n")
                else:
                    out.write(f"{verb} {kind} {r.id}: {r.name}  [{r.path}]\n")
            for warning in r.warnings:
                err.write(f"warning: {r.path}: {warning}\n")
        if len(results) > 1:
            # Issue 21 item 6: what was there already is not counted as imported, and the
            # folder rule is said only when a folder was given.
            failed = sum(1 for r in results if r.error)
            again = sum(1 for r in results if r.ok and r.duplicate)
            line = f"{len(results) - failed - again} imported, " + (f"{again} already imported, " if again else "")
            folders = any(Path(p).expanduser().is_dir() for p in args.paths)
            out.write(f"{line}{failed} failed" + (" (in folders, only .png, .json, .charx and .jsonl files are read)"
                                                   if folders else "") + "\n")
        elif not results:
            err.write("nothing to import: no .png, .json, .charx or .jsonl file there\n")
    return EXIT_FAILED if any(r.error for r in results) or not results else EXIT_OK


def _session_line(p: PlaythroughView, group: str | None = None) -> str:
    """One `tavern sessions` line; a group chat under its group's name (`group`), not its first member's."""
    noun = "message " if p.message_count == 1 else "messages"
    name = f"{group} (group)" if group else p.character_name
    return (f"{p.id:>4}  {ljust(name, 24)} {p.message_count:>4} {noun}  "
            f"last played {p.updated_at:%Y-%m-%d %H:%M} UTC  {p.chat_title}{'  (archived)' if p.archived else ''}")


def cmd_sessions(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """List playthroughs, most recently played first: read before the service opens where it can be
    (`service.list_reads`; a `--character` that names none or several goes to the library, which says so)."""
    from tavern_tui.service.list_reads import SessionList, session_list

    loaded = settings(args)
    listed = session_list(loaded.db_url, loaded.user_name, include_archived=args.all, with_groups=not args.json,
                          character=args.character)
    if listed is None:
        with service_for(loaded) as tavern:
            character_id = tavern.library.find_character(args.character).id if args.character else None
            items = tavern.playthroughs.playthroughs(character_id, include_archived=args.all)
            groups = {} if args.json else tavern.groups.names_by_playthrough()
        listed = SessionList(items, groups)
    items, groups = listed.playthroughs, listed.groups
    return print_rows(out, items, as_json=args.json, line=lambda p: _session_line(p, groups.get(p.id)),
                      empty_hint="no playthroughs yet; start one with `tavern chat CHARACTER --say TEXT` or in the TUI")


def cmd_show(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print a playthrough's messages with role and origin."""
    with open_service(args) as tavern:
        view = tavern.playthroughs.playthrough(args.playthrough)
        messages = tavern.playthroughs.messages(view.id, include_system=args.system)
        replaced = tavern.compaction.replaced_views(view.id) if args.all else {}
    if args.json:
        rows = []
        for m in messages:
            rows.append(m.to_json())
            rows += [{**o.to_json(), "replaced_by": f"{m.ref[0]}:{m.ref[1]}", "sent": False}
                     for o in replaced.get(m.ref, [])]
        return print_json(out, {"playthrough": view.to_json(), "messages": rows})
    out.write(f"playthrough {view.id}: {view.character_name} with {view.user_name}\n")
    for m in messages:
        if m.ref in replaced:
            out.write(f"\n[summary of {len(replaced[m.ref])} messages · {m.ref[0]}:{m.ref[1]}]\n{m.content}\n")
            for o in replaced[m.ref]:
                out.write(f"  [replaced by {m.ref[0]}:{m.ref[1]} · not sent · {o.role} · {o.ref[0]}:{o.ref[1]}] "
                          f"{o.speaker}: {o.content}\n")
            continue
        if m.tool_result is not None:  # a tool call is one compact line (issue 19)
            out.write(f"\n[tool · {m.tool_result.get('status')}] {m.tool_line}\n")
            continue
        marks = [m.role, m.origin]
        if m.partial:
            marks.append("partial" + (f": {m.error}" if m.error else ""))
        body = m.content if m.content or not m.partial else "(no text arrived)"
        if m.tool_calls and not m.content:
            body = "(calls " + ", ".join(str(c.get("function", {}).get("name")) for c in m.tool_calls) + ")"
        out.write(f"\n[{' · '.join(marks)}] {m.speaker}:\n{body}\n")
    return EXIT_OK


def cmd_tree(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the playthrough's variant tree (indented by branch) or its JSON."""
    with open_service(args) as tavern:
        tree = tavern.timeline.timeline(args.playthrough)
    if args.json:
        return print_json(out, tree.to_json())
    branch_depth: dict[tuple[int, int] | None, int] = {None: 0}
    for v in tree.variants:
        # Indent only where the story branches, so a long chat stays readable.
        parent_depth = branch_depth.get(v.parent, 0)
        depth = parent_depth + (1 if v.position[1] > 1 else 0)
        branch_depth[v.ref] = depth
        mark = "*" if v.active else " "
        if v.summary_of is not None:  # the summary node, once, after the last message it folds
            out.write(f"{mark} {'  ' * depth}{v.ref[0]}:{v.ref[1]} summary of messages "
                      f"{v.summary_of[0]}–{v.summary_of[1]}: {v.preview}\n")
            continue
        counter = f"{v.position[0]}/{v.position[1]} " if v.position[1] > 1 else ""
        flags = "".join(f" [{flag}]" for flag, on in (("edited", v.edited), ("deleted", v.deleted),
                                                      ("partial", v.partial), ("summarised", v.summarised)) if on)
        links = "".join(f" -> playthrough {b}" for b in v.branches)
        out.write(f"{mark} {'  ' * depth}{v.ref[0]}:{v.ref[1]} "
                  f"{counter}{v.role}/{v.origin}{f' {v.speaker}' if v.speaker else ''}: {v.preview}{flags}{links}\n")
    return EXIT_OK


def _export_card(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    kind, path = ("png", args.png) if args.png else ("json", args.json)
    if kind == "png" and path == "-":
        raise TavernError("--png needs a file (a PNG is not written to the terminal)")
    with open_service(args) as tavern:
        character = tavern.library.find_character(args.target)
        payload = tavern.library.export_card(character.id, kind)
    if path == "-":
        out.write(payload.decode("utf-8") + "\n")
        return EXIT_OK
    try:
        Path(path).write_bytes(payload)
    except OSError as exc:
        raise TavernError(f"{path}: cannot write the card: {exc.strerror}") from exc
    err.write(f"wrote {character.name} (revision {character.revision}) to {path}\n")
    return EXIT_OK


def cmd_export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Write the playthrough's active path (with swipes) as SillyTavern JSONL (a group's as a group
    chat: `GroupFileService.export_chat`), or a character's card as SillyTavern writes one
    (`LibraryService.export_card`)."""
    if args.jsonl is None:
        return _export_card(args, out, err)
    if not args.target.strip().isdigit():
        raise TavernError(f"--jsonl exports a playthrough: give its id, not {args.target!r} "
                          "(a character's card: --png FILE or --json FILE)")
    with open_service(args) as tavern:
        text = tavern.group_files.export_chat(int(args.target))
    if args.jsonl == "-":
        out.write(text)
    else:
        try:
            with open(args.jsonl, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
        except OSError as exc:
            raise TavernError(f"{args.jsonl}: cannot write the chat: {exc.strerror}") from exc
        err.write(f"wrote {text.count(chr(10)) - 1} messages to {args.jsonl}\n")
    return EXIT_OK
