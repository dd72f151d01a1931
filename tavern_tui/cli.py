"""Provides the `tavern` command line. Every command calls the `Tavern` service, never the store.

    tavern                      launch the TUI (also: tavern tui)
    tavern import PATH... [--character NAME] [--json]   cards, world books, chats (.jsonl)
    tavern lore list|bind|unbind|export|test …
    tavern chat CHARACTER (--say TEXT | --swipe | --continue | --impersonate | --reply) [--new | --playthrough ID] [--json]
                [--preset NAME] [--lore BOOK]... [--strategy NAME] [--allow-secrets]
    tavern sessions [--json] [--character NAME]
    tavern presets [--json]
    tavern strategies [--json] | tavern strategy save NAME --base B [--option K=V]... [--expected-version N]
                               | tavern strategy apply PLAYTHROUGH NAME [--version N]
    tavern preview PLAYTHROUGH [--input TEXT] [--strategy NAME] [--preset NAME] [--json]
    tavern show PLAYTHROUGH [--json] [--system]
    tavern tree PLAYTHROUGH [--json]
    tavern export PLAYTHROUGH --jsonl FILE
    tavern trace list [--playthrough P | --session S] | show ID | verify ID|--all | replay ID [--model M]
    tavern edit PLAYTHROUGH SESSION:SEQ --text TEXT [--allow-secrets] | tavern delete PLAYTHROUGH SESSION:SEQ [--to-end]
    tavern persona show | edit --expected-version N [--add TEXT | --remove ID | --file F] | history |
                   nominations | affirm ID | decline ID | import FILE | ceiling P LEVEL | consolidate
    tavern beliefs [--search TEXT] [--json]
    tavern serve [--host 127.0.0.1] [--port 8765]   persona HTTP routes, with TAVERN_PERSONA_API_ENABLED
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from tavern_tui import __version__
from tavern_tui.cli_lore import add_lore_parser, cmd_lore
from tavern_tui.cli_output import print_json
from tavern_tui.cli_persona import add_persona_parser, cmd_persona
from tavern_tui.cli_trace import add_trace_parser, cmd_trace
from tavern_tui.config import Settings, load_settings
from tavern_tui.engine.step import StepFailed, StepSettled, StepStarted
from tavern_tui.engine.stream import ReasoningDelta, TextDelta
from tavern_tui.errors import SecretRefused, TavernError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _global_options(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("--db", metavar="URL", default=default,
                        help="database URL (default: SQLite in the user data folder; env TAVERN_DB_URL)")
    parser.add_argument("--api-base", metavar="URL", default=default,
                        help="OpenAI-compatible API root, e.g. http://localhost:8080/v1 (env TAVERN_API_BASE)")
    parser.add_argument("--model", default=default, help="model id (env TAVERN_MODEL)")
    parser.add_argument("--api-key", default=default,
                        help="API key (prefer env TAVERN_API_KEY: flags show up in process lists)")
    parser.add_argument("-v", "--verbose", action="store_true", default=default, help="log details to stderr")


def _selection_options(parser: argparse.ArgumentParser) -> None:
    """--preset / --lore / --strategy: bound to the playthrough and remembered (issue 5 §7)."""
    parser.add_argument("--preset", metavar="NAME", help="bind this imported preset to the playthrough (remembered)")
    parser.add_argument("--lore", action="append", default=[], metavar="BOOK",
                        help="bind this imported world book to the playthrough (repeatable; remembered)")
    parser.add_argument("--strategy", metavar="NAME", help="apply this assembly strategy (compat, preset-slots-first, projection)")


def _resolve_selection(tavern: Any, args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The preset and books --preset/--lore name, and the --strategy checked, before anything is
    created or bound (an unknown name changes nothing).

    Raises:
        NotFound: an unknown preset, book or strategy (the message lists the known ones).
    """
    preset = tavern.find_preset(args.preset) if args.preset else None
    books = [tavern.find_world_book(book) for book in args.lore]
    if args.strategy:
        tavern.strategy_spec(args.strategy)
    return preset, books


def _apply_selection(tavern: Any, args: argparse.Namespace, playthrough_id: int, err: TextIO,
                     resolved: tuple[Any, list[Any]] | None = None) -> None:
    """Bind what --preset/--lore/--strategy name (remembered by the playthrough, issue 5 §7) and say so."""
    preset, books = resolved or _resolve_selection(tavern, args)
    if preset is not None:
        tavern.bind_preset(playthrough_id, preset.id)
        err.write(f"bound preset {preset.name} to playthrough {playthrough_id} (remembered)\n")
    for book in books:
        tavern.bind_world_book(book.id, "playthrough", playthrough_id)
        err.write(f"bound world book {book.name} to playthrough {playthrough_id} (remembered)\n")
    if args.strategy:
        spec = tavern.apply_strategy(playthrough_id, args.strategy)
        err.write(f"applied strategy {spec.name} v{spec.version} to playthrough {playthrough_id} (remembered)\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tavern", description="Terminal roleplay client for SillyTavern cards.")
    parser.add_argument("--version", action="version", version=f"tavern-tui {__version__}")
    _global_options(parser, None)
    # The same options after the command (`tavern sessions --db URL`); SUPPRESS keeps the
    # values given before it when they are not repeated.
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=argparse.ArgumentParser)
    _add = commands.add_parser

    def add_parser(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return _add(name, parents=[common], **kwargs)

    commands.add_parser = add_parser  # type: ignore[method-assign]

    commands.add_parser("tui", help="launch the terminal UI (the default)")

    p_import = commands.add_parser("import", help="import character cards, world books, presets, persona backups "
                                                  "and SillyTavern chats (.jsonl)")
    p_import.add_argument("paths", nargs="+", metavar="PATH")
    p_import.add_argument("--character", metavar="NAME", help="the character imported chats are with "
                                                             "(default: the name in the chat file)")
    p_import.add_argument("--json", action="store_true", help="print a JSON list of results")

    p_chat = commands.add_parser("chat", help="send one message and print the streamed reply")
    p_chat.add_argument("character", metavar="CHARACTER", help="character name or id")
    action = p_chat.add_mutually_exclusive_group(required=True)
    action.add_argument("--say", metavar="TEXT", help="what you say")
    action.add_argument("--swipe", action="store_true", help="regenerate the last reply as a new sibling (a swipe)")
    action.add_argument("--continue", dest="continue_", action="store_true", help="extend the last reply")
    action.add_argument("--impersonate", action="store_true", help="have the model write your next line")
    action.add_argument("--reply", action="store_true",
                        help="answer your last line without saying more (e.g. after --impersonate)")
    which = p_chat.add_mutually_exclusive_group()
    which.add_argument("--new", action="store_true", help="start a new playthrough")
    which.add_argument("--playthrough", type=int, metavar="ID", help="continue this playthrough")
    p_chat.add_argument("--json", action="store_true", help="print the stored reply as JSON at the end")
    p_chat.add_argument("--allow-secrets", action="store_true",
                        help="send a --say text that looks like a key or token anyway (never the configured API key)")
    _selection_options(p_chat)

    p_sessions = commands.add_parser("sessions", help="list playthroughs, newest first")
    p_sessions.add_argument("--character", metavar="NAME", help="only this character's playthroughs")
    p_sessions.add_argument("--json", action="store_true")

    p_show = commands.add_parser("show", help="print a playthrough's messages with role and origin")
    p_show.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_show.add_argument("--json", action="store_true")
    p_show.add_argument("--system", action="store_true", help="include the system section sent to the model")

    p_preview = commands.add_parser("preview", help="print the exact request the next step would send (no model call)")
    p_preview.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_preview.add_argument("--input", default="", metavar="TEXT", help="what you would send")
    p_preview.add_argument("--json", action="store_true")
    _selection_options(p_preview)

    p_presets = commands.add_parser("presets", help="list imported chat-completion presets")
    p_presets.add_argument("--json", action="store_true")

    p_strategies = commands.add_parser("strategies", help="list assembly strategies (built-in and saved versions)")
    p_strategies.add_argument("--json", action="store_true")
    p_strategy = commands.add_parser("strategy", help="save a strategy version, or apply one to a playthrough")
    strategy_sub = p_strategy.add_subparsers(dest="strategy_command", metavar="SUBCOMMAND", required=True)
    p_save = strategy_sub.add_parser("save", help="save a new strategy or its next version (never applies it)")
    p_save.add_argument("name")
    p_save.add_argument("--base", required=True, help="compat, preset-roles-first, preset-slots-first or projection")
    p_save.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    p_save.add_argument("--expected-version", type=int, default=0, metavar="N",
                        help="the newest saved version you read (0 for a new name)")
    p_apply = strategy_sub.add_parser("apply", help="apply a strategy (version) to a playthrough")
    p_apply.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_apply.add_argument("name")
    p_apply.add_argument("--version", type=int)

    p_tree = commands.add_parser("tree", help="print a playthrough's timeline: every message variant")
    p_tree.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_tree.add_argument("--json", action="store_true")

    p_edit = commands.add_parser("edit", help="replace a message's text (the original stays in the log)")
    p_edit.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_edit.add_argument("ref", type=_ref, metavar="SESSION:SEQ", help="the message, as `tavern tree` or `show --json` names it")
    p_edit.add_argument("--text", required=True)
    p_edit.add_argument("--allow-secrets", action="store_true",
                        help="store a text that looks like a key or token anyway (never the configured API key)")

    p_delete = commands.add_parser("delete", help="hide a message from the chat (the original stays in the log)")
    p_delete.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_delete.add_argument("ref", type=_ref, metavar="SESSION:SEQ")
    p_delete.add_argument("--to-end", action="store_true", help="also every message after it")

    p_export = commands.add_parser("export", help="write a playthrough as a SillyTavern chat (.jsonl)")
    p_export.add_argument("playthrough", type=int, metavar="PLAYTHROUGH")
    p_export.add_argument("--jsonl", required=True, metavar="FILE", help="where to write it ('-' for stdout)")

    add_lore_parser(commands)
    add_trace_parser(commands)
    add_persona_parser(commands)
    p_serve = commands.add_parser("serve", help="serve the optional persona HTTP routes on 127.0.0.1 "
                                                "(only with TAVERN_PERSONA_API_ENABLED set)")
    p_serve.add_argument("--host", default="127.0.0.1", help="a loopback address (default 127.0.0.1)")
    p_serve.add_argument("--port", type=int, default=8765)
    return parser


def _ref(text: str) -> tuple[int, int]:
    """"12:7" → (12, 7): a message's session and seq."""
    session, _, seq = text.partition(":")
    if not (session.isdigit() and seq.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not SESSION:SEQ (e.g. 12:7, as `tavern tree` prints)")
    return int(session), int(seq)


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(db_url=args.db, base_url=args.api_base, model=args.model, api_key=args.api_key)


def _open(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from tavern_tui.service import Tavern

    return Tavern(_settings(args))


@contextmanager
def _service(args: argparse.Namespace) -> Iterator[Any]:
    """The service for one command, closed (database released) when the command ends."""
    tavern = _open(args)
    try:
        yield tavern
    finally:
        tavern.close()


def cmd_import(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Import cards, world books, presets, personas and chats; exit 1 when any file failed or
    there was nothing to import."""
    with _service(args) as tavern:
        results = tavern.import_paths(args.paths, character=args.character)
    if args.json:
        json.dump([r.to_json() for r in results], out, ensure_ascii=False, indent=2)
        out.write("\n")
    else:
        for r in results:
            if r.error:
                err.write(f"error: {r.error}\n")
            else:
                note = " (already imported)" if r.duplicate else ""
                kind = r.kind.replace("_", " ")
                if r.kind == "persona":  # its id is the persona's new version, not a new record
                    out.write(f"imported persona {r.name}: persona is now v{r.id}{note}  [{r.path}]\n")
                else:
                    out.write(f"imported {kind} {r.id}: {r.name}{note}  [{r.path}]\n")
            for warning in r.warnings:
                err.write(f"warning: {r.path}: {warning}\n")
        if len(results) > 1:
            failed = sum(1 for r in results if r.error)
            out.write(f"{len(results) - failed} imported, {failed} failed "
                      "(in folders, only .png, .json and .jsonl files are read)\n")
        elif not results:
            err.write("nothing to import: no .png, .json or .jsonl file there\n")
    return EXIT_FAILED if any(r.error for r in results) or not results else EXIT_OK


def _refused(exc: SecretRefused, err: TextIO) -> int:
    """Report a refused secret (the kind, never the text) and how to override it when allowed."""
    hint = "; pass --allow-secrets to go ahead" if exc.overridable else ""
    err.write(f"error: {exc}{hint}\n")
    return EXIT_FAILED


async def _chat(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    tavern = _open(args)
    try:
        if args.say is not None:
            try:  # before a playthrough is created or anything bound
                tavern.check_message(args.say, allow_secrets=args.allow_secrets)
            except SecretRefused as exc:
                return _refused(exc, err)
        character = tavern.find_character(args.character)
        resolved = _resolve_selection(tavern, args)
        if args.playthrough is not None:
            playthrough = tavern.playthrough(args.playthrough)
            if playthrough.character_id != character.id:
                err.write(f"error: playthrough {playthrough.id} belongs to {playthrough.character_name}, not {character.name}\n")
                return EXIT_FAILED
        else:
            playthrough = None if args.new else tavern.latest_playthrough(character.id)
            if playthrough is None:
                playthrough = tavern.new_playthrough(character.id)
                err.write(f"started playthrough {playthrough.id} with {character.name}\n")
        tavern.open_playthrough(playthrough.id)
        _apply_selection(tavern, args, playthrough.id, err, resolved)
        err.write(f"[{tavern.provider_label}] playthrough {playthrough.id}\n")
        settled = None
        in_reasoning = False
        if args.swipe:
            updates = tavern.regenerate(playthrough.id)
        elif args.continue_:
            updates = tavern.continue_reply(playthrough.id)
        elif args.impersonate:
            updates = tavern.impersonate(playthrough.id)
        elif args.reply:
            updates = tavern.reply(playthrough.id)
        else:
            updates = tavern.send(playthrough.id, args.say, allow_secrets=args.allow_secrets)
        try:
            async for update in updates:
                if isinstance(update, ReasoningDelta):
                    if not in_reasoning:
                        err.write("(thinking) ")
                        in_reasoning = True
                    err.write(update.text)
                    err.flush()
                elif isinstance(update, TextDelta):
                    if in_reasoning:
                        err.write("\n")
                        in_reasoning = False
                    if not args.json:
                        out.write(update.text)
                        out.flush()
                elif isinstance(update, StepSettled):
                    settled = update
                elif isinstance(update, StepStarted):
                    pass
        except StepFailed as exc:
            if not args.json:
                out.write("\n")
            kept = f" (partial reply kept: {len(exc.attempt.content)} characters)" if exc.attempt and exc.attempt.content else ""
            err.write(f"error ({exc.category}): {exc.cause}{kept}\n")
            return EXIT_FAILED
        if args.json and settled is not None:
            event = settled.event
            json.dump({"playthrough": playthrough.id, "session_id": event.session_id, "seq": event.seq,
                       "role": event.role, "origin": event.origin.value if event.origin else None,
                       "content": event.content, "usage": event.body.get("usage"),
                       "swipe": tavern.swipe_state(playthrough.id).label}, out, ensure_ascii=False)
        out.write("\n")
        return EXIT_OK
    finally:
        await tavern.aclose()


def cmd_chat(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """One headless step; Ctrl+C keeps the partial reply as an attempt."""
    try:
        return asyncio.run(_chat(args, out, err))
    except KeyboardInterrupt:
        err.write("\ncancelled; the partial reply is kept\n")
        return 130


def cmd_sessions(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """List playthroughs, most recently played first."""
    with _service(args) as tavern:
        character_id = tavern.find_character(args.character).id if args.character else None
        items = tavern.playthroughs(character_id)
    if args.json:
        return print_json(out, [p.to_json() for p in items])
    if not items:
        out.write("no playthroughs yet; start one with `tavern chat CHARACTER --say TEXT` or in the TUI\n")
    for p in items:
        out.write(f"{p.id:>4}  {p.character_name:<24} {p.message_count:>4} {'message ' if p.message_count == 1 else 'messages'}  last played {p.updated_at:%Y-%m-%d %H:%M} UTC\n")
    return EXIT_OK


def cmd_show(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print a playthrough's messages with role and origin."""
    with _service(args) as tavern:
        view = tavern.playthrough(args.playthrough)
        messages = tavern.messages(view.id, include_system=args.system)
    if args.json:
        json.dump({"playthrough": view.to_json(), "messages": [m.to_json() for m in messages]}, out,
                  ensure_ascii=False, indent=2)
        out.write("\n")
        return EXIT_OK
    out.write(f"playthrough {view.id}: {view.character_name} with {view.user_name}\n")
    for m in messages:
        marks = [m.role, m.origin]
        if m.partial:
            marks.append("partial" + (f": {m.error}" if m.error else ""))
        body = m.content if m.content or not m.partial else "(no text arrived)"
        out.write(f"\n[{' · '.join(marks)}] {m.speaker}:\n{body}\n")
    return EXIT_OK


def cmd_preview(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The request the next step would send: messages with their source, config, tokens."""
    with _service(args) as tavern:
        _apply_selection(tavern, args, args.playthrough, err)  # remembered, as with `tavern chat` (issue 5 §7)
        shown = tavern.preview(args.playthrough, args.input)
    if args.json:
        return print_json(out, shown)
    out.write(f"PREVIEW (not sent) · strategy {shown['strategy']} · ~{shown['tokens'].get('total', 0):,} tokens"
              f" · config {json.dumps(shown['config'])}\n")
    for message in shown["messages"]:
        name = f" ({message['name']})" if message.get("name") else ""
        out.write(f"\n[{message['role']}{name} · {message['source']}]\n{message['content']}\n")
    for note in shown["adjustments"]:
        out.write(f"\nadjusted: {note}")
    if shown["adjustments"]:
        out.write("\n")
    return EXIT_OK


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise TavernError(f"--option {text!r}: expected KEY=VALUE")
    return key.strip(), {"true": True, "false": False}.get(value.strip().lower(), value.strip())


def cmd_strategies(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """List strategies: built-in, then the newest version of each saved one."""
    with _service(args) as tavern:
        items = tavern.strategies()
    if args.json:
        return print_json(out, [{**s.snapshot(), "builtin": s.builtin} for s in items])
    for spec in items:
        options = ", ".join(f"{k}={v}" for k, v in spec.options.items())
        kind = "built in" if spec.builtin else f"v{spec.version} of {spec.base}"
        out.write(f"{spec.name:<28} {kind}" + (f"  ({options})" if options else "") + "\n")
    return EXIT_OK


def cmd_strategy(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern strategy save|apply`."""
    with _service(args) as tavern:
        if args.strategy_command == "save":
            spec = tavern.save_strategy(args.name, args.base, dict(_option(o) for o in args.option),
                                        expected_version=args.expected_version)
            out.write(f"saved {spec.name} v{spec.version} ({spec.base}); not applied anywhere\n")
        else:
            spec = tavern.apply_strategy(args.playthrough, args.name, args.version)
            out.write(f"applied {spec.name} v{spec.version} to playthrough {args.playthrough}\n")
    return EXIT_OK


def cmd_presets(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """List imported presets."""
    with _service(args) as tavern:
        items = tavern.presets()
    if args.json:
        return print_json(out, [p.to_json() for p in items])
    if not items:
        out.write("no presets yet; import a SillyTavern chat-completion preset with `tavern import FILE.json`\n")
    for p in items:
        out.write(f"{p.id:>4}  {p.name:<32} {p.prompts:>4} prompts, {p.enabled} sent (order {p.order_source})\n")
    return EXIT_OK


def cmd_tree(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the playthrough's variant tree (indented by branch) or its JSON."""
    with _service(args) as tavern:
        tree = tavern.timeline(args.playthrough)
    if args.json:
        return print_json(out, tree.to_json())
    branch_depth: dict[tuple[int, int] | None, int] = {None: 0}
    for v in tree.variants:
        # Indent only where the story branches, so a long chat stays readable.
        parent_depth = branch_depth.get(v.parent, 0)
        depth = parent_depth + (1 if v.position[1] > 1 else 0)
        branch_depth[v.ref] = depth
        marks = ["*" if v.active else " "]
        counter = f"{v.position[0]}/{v.position[1]} " if v.position[1] > 1 else ""
        flags = "".join(f" [{flag}]" for flag, on in (("edited", v.edited), ("deleted", v.deleted),
                                                      ("partial", v.partial)) if on)
        links = "".join(f" -> playthrough {b}" for b in v.branches)
        out.write(f"{marks[0]} {'  ' * depth}{v.ref[0]}:{v.ref[1]} {counter}{v.role}/{v.origin}: {v.preview}{flags}{links}\n")
    return EXIT_OK


def cmd_edit(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Replace a message's text as a surface replacement."""
    with _service(args) as tavern:
        try:
            tavern.edit_message(args.playthrough, args.ref, args.text, allow_secrets=args.allow_secrets)
        except SecretRefused as exc:
            return _refused(exc, err)
    out.write(f"edited {args.ref[0]}:{args.ref[1]}\n")
    return EXIT_OK


def cmd_delete(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Hide a message (and with --to-end the rest) from the chat."""
    with _service(args) as tavern:
        hidden = tavern.delete_message(args.playthrough, args.ref, to_end=args.to_end)
    out.write(f"hid {hidden} message{'s' if hidden != 1 else ''}\n")
    return EXIT_OK


def cmd_export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Write the playthrough's active path (with swipes) as SillyTavern JSONL."""
    with _service(args) as tavern:
        text = tavern.export_chat(args.playthrough)
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


def cmd_tui(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Launch the Textual app (imported lazily: the other commands never load textual)."""
    from tavern_tui.tui.app import run

    with _service(args) as tavern:
        run(tavern)
    return EXIT_OK


def cmd_trace_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern trace …` (see cli_trace)."""
    with _service(args) as tavern:
        return cmd_trace(tavern, args, out, err)


def cmd_persona_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern persona …` and `tavern beliefs` (see cli_persona)."""
    with _service(args) as tavern:
        return cmd_persona(tavern, args, out, err)


def cmd_serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern serve`: the HTTP routes (persona routes only when enabled; see http_api)."""
    from tavern_tui.http_api import enabled_from_env, serve

    if not enabled_from_env():
        err.write("note: TAVERN_PERSONA_API_ENABLED is not set: only /v1/health is served\n")
    with _service(args) as tavern:
        serve(tavern, host=args.host, port=args.port)
    return EXIT_OK


def cmd_lore_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern lore …` (see cli_lore)."""
    with _service(args) as tavern:
        return cmd_lore(tavern, args, out, err)


COMMANDS: dict[str, Any] = {"lore": cmd_lore_command, "trace": cmd_trace_command, "persona": cmd_persona_command,
                            "beliefs": cmd_persona_command, "serve": cmd_serve, "strategies": cmd_strategies,
                            "strategy": cmd_strategy, "import": cmd_import, "chat": cmd_chat,
                            "sessions": cmd_sessions, "show": cmd_show, "tree": cmd_tree, "export": cmd_export, "presets": cmd_presets, "preview": cmd_preview,
                            "edit": cmd_edit, "delete": cmd_delete, "tui": cmd_tui, None: cmd_tui}


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 failed, 2 usage)."""
    out = out or sys.stdout
    err = err or sys.stderr
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=err,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(COMMANDS[args.command](args, out, err))
    except TavernError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_FAILED
    except BrokenPipeError:
        # The reader went away (`tavern show 3 | head`): stop quietly, as other CLI tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED
