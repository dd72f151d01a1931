"""Provides `tavern trace list|show|verify|replay`: recorded requests, explained and verified.

Everything here calls the `Tavern` service (`service/traces.py`); a trace is history, so the
output says so, unlike `tavern preview`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tavern_tui.cli.context import open_service, service_for, settings
from tavern_tui.cli.diagnostics import EXIT_FAILED, EXIT_OK
from tavern_tui.cli.output import context_line, print_json, print_rows
from tavern_tui.errors import TavernError
from tavern_tui.views.traces import regex_script_lines

if TYPE_CHECKING:
    from tavern_tui.cli.app import Commands
    from tavern_tui.service import Tavern
    from tavern_tui.views import TraceView


def add_trace(commands: Commands) -> None:
    """`tavern trace` and its subcommands."""
    p_trace = commands.add("trace", help="recorded requests: list, show, verify against what was sent")
    sub = commands.group(p_trace, dest="trace_command", metavar="SUBCOMMAND")
    p_list = sub.add("list", cmd_trace_list, help="recorded requests, oldest first")
    which = p_list.add_mutually_exclusive_group()
    which.add_argument("--playthrough", type=int, metavar="P", help="only this playthrough's requests (every branch)")
    which.add_argument("--session", type=int, metavar="S", help="only the requests recorded in this session")
    p_list.add_argument("shown", nargs="?", type=int, metavar="PLAYTHROUGH",
                        help="as --playthrough (as `show` and `preview` take it)")
    p_list.add_argument("--json", action="store_true", help="a JSON list, one object per request")
    p_show = sub.add("show", cmd_trace_show, help="one request: message sources, refs, hashes, world info, config")
    p_show.add_argument("trace_id", metavar="ID", help="SESSION:SEQ, as `trace list` prints")
    p_show.add_argument("--json", action="store_true")
    p_show.add_argument("--bodies", action="store_true",
                        help="the request itself, rebuilt and verified from the log; exit 1 if a body changed")
    p_export = sub.add("export", cmd_trace_export, help="write a verified request's JSON body to FILE")
    p_export.add_argument("trace_id", metavar="ID")
    p_export.add_argument("file", metavar="FILE")
    p_replay = sub.add("replay", cmd_trace_replay,
                       help="send a verified past request again, byte for byte, as a new variant")
    p_replay.add_argument("trace_id", metavar="ID")
    p_replay.add_argument("--model", metavar="MODEL", help="another model (default: the one it was sent to)")
    p_verify = sub.add("verify", cmd_trace_verify, help="rebuild what was sent from the log; exit 1 on any mismatch")
    target = p_verify.add_mutually_exclusive_group(required=True)
    target.add_argument("trace_id", nargs="?", metavar="ID")
    target.add_argument("--all", action="store_true")
    p_verify.add_argument("--json", action="store_true")


_LIST_HEADER = (f"{'ID':>9}  {'SENT (UTC)':<19}  {'MODEL':<18} {'STRATEGY':<18} {'MSGS':>8}  {'TOKENS IN+OUT':>17}  "
                f"{'LATENCY':>8}  OUTCOME")


def _trace_line(t: TraceView) -> str:
    tokens = t.tokens_label()  # the request's prompt + the reply's completion
    latency = f"{t.latency_ms} ms" if t.latency_ms is not None else "-"
    retries = f"  attempt {t.attempt} (retry of {t.retry_of})" if t.retry_of else ""
    speaker = f"  for {t.speaker}" if t.speaker else ""  # a group chat: the member it was written for
    return (f"{t.id:>9}  {t.submitted_at[:19]}  {t.model or t.provider:<18} {t.strategy:<18} "
            f"{t.messages:>3} msgs  {tokens if tokens is not None else '-':>13} tok  {latency:>8}  "
            f"{t.outcome}{retries}{speaker}")


def cmd_trace_list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern trace list`: the recorded requests of a playthrough, a session or all, oldest first;
    read before the service opens where it can be (`service.list_reads`)."""
    from tavern_tui.service.list_reads import trace_list

    if args.shown is not None:
        if args.session is not None or args.playthrough not in (None, args.shown):
            raise TavernError("trace list: give the playthrough once (PLAYTHROUGH or --playthrough), "
                              "or --session alone")
        args.playthrough = args.shown
    loaded = settings(args)
    items = trace_list(loaded.db_url, args.playthrough, args.session)
    if items is None:
        with service_for(loaded) as tavern:
            items = tavern.traces.traces(args.playthrough, session_id=args.session)
    return print_rows(out, items, as_json=args.json, line=_trace_line, header=_LIST_HEADER,
                      empty_hint="no recorded requests yet")


async def _replay(tavern: Tavern, args: argparse.Namespace, out: TextIO) -> int:
    from tavern_tui.engine.stream import TextDelta
    try:
        async for update in tavern.traces.replay(args.trace_id, model=args.model):
            if isinstance(update, TextDelta):
                out.write(update.text)
                out.flush()
    finally:
        await tavern.aclose_provider()
    out.write("\n")
    return EXIT_OK


def cmd_trace_replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern trace replay`: the verified request sent again, the reply streamed to stdout."""
    with open_service(args) as tavern:
        return asyncio.run(_replay(tavern, args, out))


def cmd_trace_show(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern trace show`: one request's messages (source, ref, hash), resources, config and world info."""
    if args.bodies:
        return _show_bodies(args, out, err)
    with open_service(args) as tavern:
        shown = tavern.traces.trace(args.trace_id)
    if args.json:
        return print_json(out, shown)
    view = shown["view"]
    speaker = f" · for {view['speaker']}" if view.get("speaker") else ""  # a group chat's member
    out.write(f"HISTORY (sent {view['submitted_at']}) · trace {shown['id']} · {view['provider']} · {view['model']} · "
              f"strategy {view['strategy']} · {view['outcome']}{speaker}\n")
    stages = (shown.get("timing") or {}).get("stages")
    if stages:
        from tavern_tui.engine.step import stages_text

        out.write(f"stages: {stages_text(stages)}\n")
    _write_messages(shown, out)
    record = shown["record"]
    _write_resources(shown, out)
    if record.get("retry_of"):
        session_id, seq = record["retry_of"]
        out.write(f"retry {record.get('attempt')} of {session_id}:{seq}; omitted: "
                  f"{json.dumps(record.get('omitted', {}))}\n")
    out.write(f"config requested: {json.dumps(record.get('config', {}))}\n")
    _write_request_context(shown.get("request_context"), out)
    inbox = record.get("inbox")
    if inbox:  # the inbox events this step consumed (seed 000 §5: claimed before assembly)
        queued = ", ".join(f"item {i['id']} (queued at {i['ref'][0]}:{i['ref'][1]})" for i in inbox.get("items", []))
        out.write(f"inbox: claim {inbox['claim'][0]}:{inbox['claim'][1]} answered {queued}\n")
    _write_tools(record, out)
    if shown.get("config_adjusted"):
        out.write(f"config effective: {json.dumps(shown['config_adjusted'])}\n")
    for attempt in view["attempts"]:
        out.write(f"attempt: {json.dumps(attempt)}\n")
    _write_world_info(shown.get("world_info") or {}, out)
    _write_variables(shown.get("variables") or {}, out)
    _write_mvu(shown.get("mvu"), out)
    for line in regex_script_lines(shown.get("regex_scripts")):
        out.write(f"{line}\n")
    return EXIT_OK


def _write_messages(shown: dict[str, Any], out: TextIO) -> None:
    """One line per sent message (source, ref, hash), its attributed parts, the token breakdown."""
    from tavern_tui.assembly.attribution import breakdown_text, describe  # on use: other commands skip it

    attribution = shown.get("attribution") or {}
    parts_of = attribution.get("messages") or []
    imported = set(shown.get("imported") or ())
    for position, message in enumerate(shown["record"]["messages"]):
        index = f"#{message['index']}" if message.get("index") is not None else ""
        mark = "  (imported)" if position in imported else ""
        out.write(f"  {position:>3} {message['role']:<9} {message['source']:<12} "
                  f"{message['ref'][0]}:{message['ref'][1]}{index}  sha256 {message['sha256'][:16]}…{mark}\n")
        parts = parts_of[position] if position < len(parts_of) else None
        for part in parts or []:
            out.write(f"        · {part['start']}-{part['end']} ~{part['tokens']} tok  {describe(part)}\n")
    if attribution.get("breakdown"):
        out.write(f"tokens by category ({attribution.get('counter')}): {breakdown_text(attribution['breakdown'])}\n")


def _write_resources(shown: dict[str, Any], out: TextIO) -> None:
    """What the request was built with: the context use, strategy, world books and persona."""
    if shown.get("context"):
        context = shown["context"]
        if "used" in context:
            out.write(context_line(context) + "\n")
        else:  # a compaction's summary request
            out.write(f"summary request over {context.get('summarised')} messages (context {context.get('limit')} "
                      f"tokens, {context.get('source')})\n")
    snap = shown["record"].get("strategy_snapshot") or {}
    if snap:
        out.write(f"strategy {snap.get('name')} v{snap.get('version')} ({snap.get('base')}) "
                  f"sha256 {str(snap.get('sha256'))[:16]}…\n")
    resources = shown.get("resources") or {}
    for book in resources.get("world_books") or []:
        out.write(f"world book {book.get('name')} ({book.get('source')}, {book.get('entries')} entries) "
                  f"sha256 {str(book.get('sha256'))[:16]}…\n")
    persona = shown.get("persona") or {}
    if persona:
        rotation = persona.get("rotation")
        turned = f", rotated from v{rotation['from']} ({rotation['reason']})" if rotation else ""
        out.write(f"persona v{persona.get('version')}: {len(persona.get('entries', []))} entries, "
                  f"{persona.get('tokens')} tokens{turned}\n")


def _write_world_info(lore: dict[str, Any], out: TextIO) -> None:
    """The world-info decisions of the step: fired and skipped entries, then the no-match count."""
    from tavern_tui.lore.result import count_uids  # not loaded by the commands that do not show one

    for decision in lore.get("fired", []):
        out.write(f"world info fired: {decision.get('book')}#{decision.get('uid')} [{decision.get('reason')}]: "
                  f"{decision.get('detail') or decision.get('reason')}\n")
    for decision in lore.get("skipped", []):
        out.write(f"world info skipped: {decision.get('book')}#{decision.get('uid')} [{decision.get('reason')}]: "
                  f"{decision.get('detail') or decision.get('reason')}\n")
    unmatched = sum(count_uids(uids) for uids in lore.get("no_match", {}).values())
    if unmatched:
        out.write(f"world info: {unmatched} entries had no key match\n")


def _write_variables(variables: dict[str, Any], out: TextIO) -> None:
    """The chat variables the step read, set and deleted, and the record that committed them."""
    if variables.get("read"):
        out.write("variables read: " + ", ".join(f"{scope} {name}" for scope, name in variables["read"]) + "\n")
    for verb, key in (("set", "set"), ("deleted", "deleted")):
        for scope, names in (variables.get(key) or {}).items():
            out.write(f"variables {verb} ({scope}): {', '.join(names)}\n")
    commit = variables.get("commit")
    if commit:
        out.write(f"variables committed in {commit['ref'][0]}:{commit['ref'][1]} sha256 {commit['sha256'][:16]}…\n")


def _ref(ref: Any) -> str:
    return f"{ref[0]}:{ref[1]}" if isinstance(ref, list) and len(ref) == 2 else "none"


def _write_request_context(call: dict[str, Any] | None, out: TextIO) -> None:
    """The step's `request/context` record (seed 000 §1): the adapter context the request was made
    with, and the runtime context that applied, changed on refresh, or was cleared."""
    if not isinstance(call, dict):
        return
    adapter = call.get("adapter") or {}
    where = f" at {adapter['endpoint']}" if adapter.get("endpoint") else ""
    out.write(f"adapter: {adapter.get('provider')} · {adapter.get('model') or 'default model'}{where}\n")
    context = call.get("context") or {}
    parts = [f"{label} {', '.join(map(str, context[key]))}" for key, label in
             (("applied", "applied"), ("changed", "refreshed"), ("cleared", "cleared")) if context.get(key)]
    out.write(f"runtime context: {'; '.join(parts) if parts else 'none'}\n")


def _write_mvu(mvu: dict[str, Any] | None, out: TextIO) -> None:
    """Issue 18: the MVU record the request was built from, and what its step's commits changed and refused."""
    if not mvu:
        return
    built = mvu.get("built_from") or {}
    state = "committed" if built.get("committed") else "initial, not committed yet"
    out.write(f"mvu state: record {_ref(built.get('commit'))} of message {_ref(built.get('message'))} ({state}), "
              f"stat_data sha256 {str(built.get('stat_data_sha256'))[:16]}…\n")
    for pending in built.get("pending") or []:
        out.write(f"mvu state: the input's commands applied first ({len(pending.get('changes') or [])} changes, "
                  f"{len(pending.get('refused') or [])} refused)\n")
    if built.get("derived_texts"):
        out.write(f"mvu texts: {len(built['derived_texts'])} message(s) sent as MVU stored them back "
                  "(status placeholder; raw text in the log)\n")
    for commit in mvu.get("commits") or []:
        out.write(f"mvu commit {_ref(commit.get('ref'))} ({commit.get('origin')}) on message "
                  f"{_ref(commit.get('message'))}, base {_ref(commit.get('base'))}, stat_data sha256 "
                  f"{str(commit.get('stat_data_sha256'))[:16]}…\n")
        for change in commit.get("changes") or []:
            reason = f"  ({change['reason']})" if change.get("reason") else ""
            old, new = (json.dumps(change.get(k), ensure_ascii=False) for k in ("old", "new"))
            out.write(f"  changed {change.get('path') or '(stat_data)'}: {old} → {new}{reason}\n")
        for refused in commit.get("refused") or []:
            out.write(f"  refused {refused.get('command')}: {refused.get('reason')}\n")


_MESSAGE_KEYS = ("role", "content", "name")


def _show_bodies(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern trace show ID --bodies`: every message as rebuilt from the log (role, name, tool
    fields, content) and the call config; a changed or missing body is printed as such, never
    filled in, and makes the exit status 1."""
    with open_service(args) as tavern:
        shown = tavern.traces.request_bodies(args.trace_id)
    if args.json:
        print_json(out, shown)
    else:
        out.write(f"HISTORY · request of trace {shown['id']} as rebuilt from the log · {shown['provider']} · "
                  f"{shown['model'] or '(provider default model)'} · strategy {shown['strategy']} · "
                  f"attempt {shown['attempt']}\n")
        out.write(f"config: {json.dumps(shown['config'], ensure_ascii=False)}\n")
        if shown["omitted"]:
            out.write(f"omitted: {json.dumps(shown['omitted'], ensure_ascii=False)}\n")
        for check, message in zip(shown["checks"], shown["messages"]):
            where = f"{check['ref'][0]}:{check['ref'][1]}"
            if message is None:
                out.write(f"--- [{check['position']}] {check['role']} ({check['source']} {where}) "
                          f"{check['status'].upper()}: {check['detail']}; not shown\n")
                continue
            extras = "".join(f" {k}={json.dumps(v, ensure_ascii=False)}" for k, v in message.items()
                             if k not in _MESSAGE_KEYS)
            name = f" name={json.dumps(message['name'], ensure_ascii=False)}" if "name" in message else ""
            out.write(f"--- [{check['position']}] {message.get('role')}{name}{extras} "
                      f"({check['source']} {where}) ok\n")
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, indent=2)
            out.write(text + ("\n" if not text.endswith("\n") else ""))
    if not shown["ok"]:
        bad = [c for c in shown["checks"] if c["status"] != "ok"]
        err.write(f"error: trace {shown['id']}: {len(bad)} of {len(shown['checks'])} messages "
                  + ", ".join(f"{c['position']} {c['status']}" for c in bad) + "; the request cannot be shown whole\n")
        return EXIT_FAILED
    return EXIT_OK


def cmd_trace_export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern trace export ID FILE`: the verified request's JSON body (as the adapter posted it)
    written to FILE; nothing is written when a body changed or is missing (exit 1)."""
    with open_service(args) as tavern:
        shown = tavern.traces.request_bodies(args.trace_id)
    if shown["body"] is None:
        bad = [f"message {c['position']} {c['status']}" for c in shown["checks"] if c["status"] != "ok"]
        if shown["tools_status"] not in ("none", "ok"):
            bad.append(f"tools {shown['tools_status']}")
        why = ("its tools were recorded by name and hash only; the array sent is not kept"
               if bad == ["tools unrecorded"] else f"does not verify ({', '.join(bad)})")
        err.write(f"error: trace {shown['id']} {why}; nothing written\n")
        return EXIT_FAILED
    path = Path(args.file)
    temporary = path.with_name(path.name + ".part")
    temporary.write_text(json.dumps(shown["body"], ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    temporary.replace(path)  # whole or not at all
    count = len(shown["body"].get("tools") or [])
    tools = f", {count} tool{'s' if count != 1 else ''}" if count else ""
    out.write(f"wrote {path} ({len(shown['body']['messages'])} messages{tools})\n")
    return EXIT_OK


def cmd_trace_verify(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`tavern trace verify`: each request rebuilt from the log and compared; exit 1 on any mismatch."""
    with open_service(args) as tavern:
        results = (tavern.traces.verify_all() if args.all
                   else [(args.trace_id, tavern.traces.verify_trace(args.trace_id))])
    failed = False
    report = []
    for trace_id, result in results:
        bad = [c for c in result.checks if c.status != "ok"]
        failed = failed or not result.ok
        report.append({"id": trace_id, "ok": result.ok, "tools": result.tools_status, "checks": [
            {"position": c.position, "status": c.status, "ref": list(c.ref), "detail": c.detail}
            for c in result.checks]})
        if not args.json:
            mark = "verified" if result.ok else "MISMATCH"
            tools = f", tools {result.tools_status}" if result.tools_status != "none" else ""
            out.write(f"{trace_id:>9}  {mark}  {len(result.checks)} messages{tools}\n")
            for check in bad:
                out.write(f"           message {check.position} ({check.ref[0]}:{check.ref[1]}): {check.status}: "
                          f"{check.detail}\n")
            if result.tools_status in ("changed", "missing"):
                out.write(f"           tools: {result.tools_status}: the tools array kept with the request "
                          f"header {'no longer hashes as sent' if result.tools_status == 'changed' else 'is gone'}\n")
    if args.json:
        print_json(out, report)
    return EXIT_FAILED if failed else EXIT_OK


def _write_tools(record: dict[str, Any], out: TextIO) -> None:
    """A tool turn's lines (issue 19): the tools offered (names, schema hash), the step and the
    turn's first record, and each tool result this request answers (refusals named, with why)."""
    tools = record.get("tools")
    if isinstance(tools, dict) and tools.get("names"):
        out.write(f"tools offered: {', '.join(tools['names'])} (schemas sha256 {str(tools.get('sha256'))[:16]}…)\n")
    turn = record.get("turn")
    if isinstance(turn, dict) and turn.get("step", 1) > 1 and turn.get("first"):
        out.write(f"turn step {turn['step']}, first request {turn['first'][0]}:{turn['first'][1]}\n")
    for result in record.get("tool_results") or []:
        why = f": {result['reason']}" if result.get("reason") else ""
        out.write(f"tool result {result.get('name')} [{result.get('status')}]{why} "
                  f"at {result['ref'][0]}:{result['ref'][1]}\n")
