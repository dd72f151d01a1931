"""Provides `tavern persona …` and `tavern beliefs`: the persona document, its history, the
nominations learned from what the person said, affirm and decline.

Everything here calls the `Tavern` service (`service/persona.py`), as the TUI pane and the HTTP
routes do. Rules: seed 002 (ADR-0079) decisions 4-12.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tavern_tui.cli.context import open_service
from tavern_tui.cli.diagnostics import EXIT_FAILED, EXIT_OK
from tavern_tui.cli.output import ljust, print_json, print_rows
from tavern_tui.errors import TavernError
from tavern_tui.persona.model import SENSITIVITIES, Belief, PersonaDocument, PersonaView

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands
    from tavern_tui.persona.model import PersonaEntry


def add_persona(commands: Commands) -> None:
    """`tavern persona` and its subcommands."""
    p_persona = commands.add("persona", help="your persona: the standing text the model reads on every call")
    sub = commands.group(p_persona, dest="persona_command", metavar="SUBCOMMAND")
    p_list = sub.add("list", cmd_persona_list, help="your personas: name, version, entries, which is the default")
    p_list.add_argument("--json", action="store_true")
    p_new = sub.add("new", cmd_persona_new, help="make a persona with this name")
    p_new.add_argument("name", metavar="NAME")
    p_use = sub.add("use", cmd_persona_use, help="play as a persona: the default, or this chat's lock (--playthrough)")
    p_use.add_argument("name", metavar="NAME", nargs="?", help="the persona's name or id")
    p_use.add_argument("--id", type=int, metavar="N", help="the persona with this id (when names are shared)")
    p_use.add_argument("--playthrough", type=int, metavar="P",
                       help="lock this chat to the persona (SillyTavern's chat-locked persona)")
    p_use.add_argument("--unlock", action="store_true", help="with --playthrough: remove the chat's lock")
    p_rename = sub.add("rename", cmd_persona_rename, help="rename a persona (old lines keep the old name)")
    p_rename.add_argument("old", metavar="OLD", help="the persona's name or id")
    p_rename.add_argument("new", metavar="NEW")
    p_show = sub.add("show", cmd_persona_show, help="the persona's entries (provenance, sensitivity, stale marks)")
    p_show.add_argument("--playthrough", type=int, metavar="P", help="show what renders in this playthrough")
    p_show.add_argument("--json", action="store_true")
    _persona_option(p_show)
    p_edit = sub.add("edit", cmd_persona_edit, help="add, remove or rewrite entries (no option: open $EDITOR)")
    p_edit.add_argument("--expected-version", type=int, required=True, metavar="N",
                        help="the version you read (`persona show`); a newer one is a conflict")
    what = p_edit.add_mutually_exclusive_group()
    what.add_argument("--add", metavar="TEXT", help="a new entry")
    what.add_argument("--remove", type=int, metavar="ENTRY_ID")
    what.add_argument("--file", metavar="FILE", help='the whole entry list: JSON [{"id"?, "text", "sensitivity"?}]')
    p_edit.add_argument("--sensitivity", choices=SENSITIVITIES, help="of the entry --add adds (default normal)")
    p_edit.add_argument("--name", help="the persona's name ({{user}})")
    p_edit.add_argument("--json", action="store_true")
    _persona_option(p_edit)
    p_history = sub.add("history", cmd_persona_history, help="every revision, newest first")
    p_history.add_argument("--json", action="store_true")
    _persona_option(p_history)
    p_noms = sub.add("nominations", cmd_persona_nominations,
                     help="beliefs offered for the persona, with the messages behind them")
    p_noms.add_argument("--json", action="store_true")
    _persona_option(p_noms, "(default: every persona's)")
    p_affirm = sub.add("affirm", cmd_persona_affirm, help="copy a nominated belief into the persona")
    p_affirm.add_argument("belief_id", type=int, metavar="ID")
    p_affirm.add_argument("--expected-version", type=int, metavar="N")
    p_affirm.add_argument("--json", action="store_true")
    p_decline = sub.add("decline", cmd_persona_decline, help="never nominate this belief again")
    p_decline.add_argument("belief_id", type=int, metavar="ID")
    p_decline.add_argument("--json", action="store_true")
    p_import = sub.add("import", cmd_persona_import,
                       help="import a SillyTavern persona backup (name, description, lore)")
    p_import.add_argument("file", metavar="FILE")
    p_import.add_argument("--persona", metavar="NAME", help="only this persona of a backup (default: every one)")
    p_ceiling = sub.add("ceiling", cmd_persona_ceiling,
                        help="the most sensitive entries a playthrough's persona section includes")
    p_ceiling.add_argument("playthrough", type=int, metavar="P")
    p_ceiling.add_argument("level", choices=SENSITIVITIES)
    p_cons = sub.add("consolidate", cmd_persona_consolidate,
                     help="learn beliefs from your messages now (runs after every reply too)")
    p_cons.add_argument("--playthrough", type=int, metavar="P")
    p_cons.add_argument("--json", action="store_true")


def _persona_option(parser: Any, default: str = "(default: the default persona)") -> None:
    parser.add_argument("--persona", metavar="NAME", help=f"which persona, by name or id {default}")


def _persona_id(tavern: Any, args: argparse.Namespace) -> int | None:
    """The id `--persona` names (None when not given)."""
    return tavern.persona.find_persona(args.persona).id if getattr(args, "persona", None) else None


def _persona_line(view: PersonaView) -> str:
    marks = ["default"] if view.default else []
    if view.lorebook:
        marks.append(f"lore: {view.lorebook}")
    noun = "entry" if view.entries == 1 else "entries"
    return (f"{view.id:>4}  {ljust(view.name or '(no name)', 24)} v{view.version}  {view.entries} {noun}"
            + (f"  ({', '.join(marks)})" if marks else ""))


def cmd_persona_list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern persona list`: every persona, oldest first, the default marked."""
    with open_service(args) as tavern:
        views = tavern.persona.personas()
    return print_rows(out, views, as_json=args.json, line=_persona_line)


def cmd_persona_new(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern persona new NAME`."""
    with open_service(args) as tavern:
        view = tavern.persona.new_persona(args.name)
    out.write(f"made persona {view.id}: {view.name} (play as it with `tavern persona use {shlex.quote(view.name)}`)\n")
    return EXIT_OK


def cmd_persona_use(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern persona use NAME [--playthrough P] [--unlock]`: the default, or a chat's lock."""
    if args.unlock:
        if args.playthrough is None:
            raise TavernError("--unlock needs --playthrough P")
        with open_service(args) as tavern:
            tavern.persona.unlock_persona(args.playthrough)
            view = tavern.persona.playthrough_persona(args.playthrough)
        out.write(f"playthrough {args.playthrough} is unlocked: it plays as the default persona, "
                  f"{view.name or '(no name)'}\n")
        return EXIT_OK
    if (args.name is None) == (args.id is None):
        raise TavernError("name the persona: NAME (its name or id) or --id N")
    with open_service(args) as tavern:
        view = tavern.persona.use_persona(str(args.id) if args.id is not None else args.name, args.playthrough)
    if args.playthrough is None:
        out.write(f"{view.name or '(no name)'} is the default persona: new chats and chats without a lock play as it\n")
    else:
        out.write(f"playthrough {args.playthrough} is locked to {view.name or '(no name)'}\n")
    return EXIT_OK


def cmd_persona_rename(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern persona rename OLD NEW`: a new revision with the name; old lines keep theirs."""
    with open_service(args) as tavern:
        view = tavern.persona.rename_persona(args.old, args.new)
    out.write(f"persona {view.id} is now {view.name} (v{view.version}); lines written before keep their name\n")
    return EXIT_OK


def add_beliefs(commands: Commands) -> None:
    """`tavern beliefs [--search TEXT] [--snapshot] [--json]`."""
    p_beliefs = commands.add("beliefs", cmd_beliefs, help="beliefs learned from what you said, with their status")
    p_beliefs.add_argument("--search", metavar="TEXT")
    p_beliefs.add_argument("--snapshot", action="store_true",
                           help="print the memory snapshot as it would be sent (beliefs not in the persona)")
    p_beliefs.add_argument("--json", action="store_true")


def _entry_line(entry: PersonaEntry, rendered_ids: set[int] | None) -> str:
    marks = [entry.provenance + (f" #{entry.belief_id}" if entry.belief_id else ""), entry.sensitivity]
    if entry.stale:
        marks.append("STALE: its belief was superseded; review it")
    if rendered_ids is not None and entry.id not in rendered_ids:
        marks.append("left out: above this playthrough's ceiling")
    return f"  [{entry.id}] {entry.text}  ({', '.join(marks)})\n"


def _print_document(doc: PersonaDocument, out: TextIO, rendered_ids: set[int] | None = None) -> None:
    name = doc.name or "(no name: {{user}} is the playthrough's user name)"
    out.write(f"persona v{doc.version} · {name}" + (f" · lore: {doc.lorebook}" if doc.lorebook else "") + "\n")
    if not doc.entries:
        out.write("  (empty: nothing is sent)\n")
    for entry in doc.entries:
        out.write(_entry_line(entry, rendered_ids))


def _status(belief: Belief) -> str:
    if belief.status == "superseded":
        return f"superseded by #{belief.superseded_by}"
    if belief.promoted:
        return f"in the persona (entry {belief.entry_id})"
    if belief.nominated:
        return "nominated"
    return "declined" if belief.declined else "active"


def _edit_in_editor(doc: PersonaDocument) -> list[dict[str, Any]]:
    """Open $EDITOR (or $VISUAL, else vi) on the entry list as JSON; returns the edited list."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    entries = [{"id": e.id, "text": e.text, "sensitivity": e.sensitivity} for e in doc.entries]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as handle:
        json.dump(entries, handle, ensure_ascii=False, indent=2)
        path = handle.name
    try:
        subprocess.run([*shlex.split(editor), path], check=True)
        return _read_entries(path)
    except subprocess.CalledProcessError as exc:
        raise TavernError(f"the editor exited with status {exc.returncode}; nothing was changed") from exc
    finally:
        os.unlink(path)


def _read_entries(path: str) -> list[dict[str, Any]]:
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise TavernError(f"{path}: cannot read: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise TavernError(f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from exc
    if not isinstance(value, list):
        raise TavernError(f"{path}: expected a JSON list of entries")
    return value


def cmd_persona_show(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern persona show`: the entries, and what renders (in --playthrough, or by default)."""
    with open_service(args) as tavern:
        if args.playthrough and not args.persona:
            doc = tavern.persona.persona(tavern.persona.playthrough_persona(args.playthrough).id)
        else:
            doc = tavern.persona.persona(_persona_id(tavern, args))
        rendered = tavern.persona.rendered_persona(args.playthrough, document=doc)
    if args.json:
        return print_json(out, {**doc.to_json(), "rendered": rendered.to_json()})
    _print_document(doc, out, set(rendered.entry_ids) if args.playthrough else None)
    out.write(f"renders {rendered.tokens} tokens from {len(rendered.entry_ids)} entries")
    out.write(f"; {len(rendered.blocked)} injection hit(s) shown as [BLOCKED]\n" if rendered.blocked else "\n")
    return EXIT_OK


def cmd_persona_edit(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern persona edit`: --add, --remove, --file, --name, or (none of them) $EDITOR."""
    with open_service(args) as tavern:
        entries = None
        if args.file:
            entries = _read_entries(args.file)
        elif args.add is None and args.remove is None and args.name is None:
            entries = _edit_in_editor(tavern.persona.persona(_persona_id(tavern, args)))
        doc = tavern.persona.edit_persona(args.expected_version, add=args.add, sensitivity=args.sensitivity,
                                          remove=args.remove, entries=entries, name=args.name, where="persona edit",
                                          persona=_persona_id(tavern, args))
    if args.json:
        return print_json(out, doc.to_json())
    out.write(f"persona is now v{doc.version}\n")
    return EXIT_OK


def _revision_line(doc: PersonaDocument) -> str:
    when = doc.created_at.strftime("%Y-%m-%d %H:%M") if doc.created_at else ""
    return f"v{doc.version}  {when}  {doc.reason}  {len(doc.entries)} entries"


def cmd_persona_history(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern persona history`: every revision, newest first."""
    with open_service(args) as tavern:
        docs = tavern.persona.persona_history(_persona_id(tavern, args))
    return print_rows(out, docs, as_json=args.json, line=_revision_line)


def _nomination_lines(belief: Belief, messages: list[tuple[tuple[int, int], str]]) -> str:
    head = (f"#{belief.id} {belief.statement}  (confidence {belief.confidence:.2f}, "
            f"{belief.corroborations} messages, {belief.sensitivity})")
    return "\n".join([head, *(f"    {ref[0]}:{ref[1]}  {text[:100]}" for ref, text in messages)])


def cmd_persona_nominations(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern persona nominations`: each outstanding nomination with the messages behind it."""
    with open_service(args) as tavern:
        return print_rows(
            out, tavern.persona.nominations(_persona_id(tavern, args)), as_json=args.json,
            empty_hint="no outstanding nominations",
            line=lambda b: _nomination_lines(b, tavern.persona.supporting_messages(b)),
            to_json=lambda b: {**b.to_json(), "messages": [
                {"ref": list(ref), "text": text} for ref, text in tavern.persona.supporting_messages(b)]})


def cmd_persona_affirm(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern persona affirm`: the nominated belief copied into the persona."""
    with open_service(args) as tavern:
        doc = tavern.persona.affirm(args.belief_id, expected_version=args.expected_version)
        # A name belief becomes an entry only; say so, and how to set the name (stderr under --json).
        note = tavern.persona.affirm_name_note(tavern.persona.belief(args.belief_id), doc)
    if args.json:
        if note:
            err.write(f"note: {note}\n")
        return print_json(out, doc.to_json())
    out.write(f"affirmed #{args.belief_id}: persona is now v{doc.version}\n")
    if note:
        out.write(f"{note}\n")
    return EXIT_OK


def cmd_persona_decline(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern persona decline`: the belief is never nominated again."""
    with open_service(args) as tavern:
        belief = tavern.persona.decline(args.belief_id)
    if args.json:
        return print_json(out, belief.to_json())
    out.write(f"declined #{belief.id}: {belief.key!r} will not be nominated again\n")
    return EXIT_OK


def cmd_persona_import(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern persona import`: a SillyTavern persona backup becomes the next persona version."""
    path = Path(args.file)
    if not path.is_file():  # as `tavern import` says it, not a traceback
        err.write(f"error: {args.file}: no such file or folder\n")
        return EXIT_FAILED
    with open_service(args) as tavern:
        result = tavern.persona.import_persona_bytes(path.read_bytes(), args.file, persona=args.persona)
    for warning in result.warnings:
        err.write(f"warning: {args.file}: {warning}\n")
    if result.error:
        err.write(f"error: {result.error}\n")
        return EXIT_FAILED
    out.write(f"imported persona(s) {result.name}\n")
    return EXIT_OK


def cmd_persona_ceiling(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern persona ceiling`: the most sensitive entries a playthrough is sent."""
    with open_service(args) as tavern:
        tavern.persona.set_persona_ceiling(args.playthrough, args.level)
    out.write(f"playthrough {args.playthrough}: persona entries up to {args.level} are sent\n")
    return EXIT_OK


def cmd_persona_consolidate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern persona consolidate`: learn beliefs from the person's messages now."""
    with open_service(args) as tavern:
        report = tavern.persona.consolidate(args.playthrough)
    if args.json:
        return print_json(out, {"messages": report.messages, "added": report.added, "supported": report.supported,
                                "superseded": report.superseded, "nominated": list(report.nominated)})
    out.write(f"read {report.messages} of your messages: {report.added} new beliefs, {report.supported} "
              f"corroborated, {report.superseded} superseded, {len(report.nominated)} nominated\n")
    return EXIT_OK


def _belief_line(belief: Belief) -> str:
    return (f"#{belief.id} [{_status(belief)}] {belief.statement}  ({belief.kind}, {belief.category}, "
            f"confidence {belief.confidence:.2f}, {belief.corroborations} messages)")


def cmd_beliefs(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern beliefs`: what was learned, with its status; --snapshot: the memory snapshot as sent."""
    with open_service(args) as tavern:
        if args.snapshot:
            from tavern_tui.service.persona import render_snapshot

            snapshot = tavern.persona.memory_snapshot()
            if args.json:
                return print_json(out, [b.to_json() for b in snapshot])
            out.write((render_snapshot(snapshot) or "(empty: no beliefs outside the persona yet)") + "\n")
            return EXIT_OK
        beliefs = tavern.persona.beliefs(search=args.search)
    return print_rows(out, beliefs, as_json=args.json, line=_belief_line,
                      empty_hint="no beliefs yet: they are learned from what you say in chats")
