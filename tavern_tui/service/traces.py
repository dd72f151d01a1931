"""Provides `TraceService`: list, show, verify and replay recorded requests.

Rules: seed 000 §4, §6 and DESIGN.md "Trace" (see `engine.trace`): traces hold references and
hashes; `verify` re-reads the referenced bodies and rebuilds the exact array that was sent;
nothing here reads today's surface to fill in a past request.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, cast

from tavern_tui.engine.events import Event, EventKind
from tavern_tui.engine.limits import DEFAULT_MAX_STEPS
from tavern_tui.engine.state import STATE_KIND
from tavern_tui.engine.trace import TRACE_REQUEST, Verification, verify
from tavern_tui.errors import NotFound, TavernError
from tavern_tui.lore.timed import LORE_STATE_KIND
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.timeline import TimelineService
from tavern_tui.service.trace_views import firsts, list_traces, ref_text, request_facts, settlements, trace_view
from tavern_tui.views import TraceView

if TYPE_CHECKING:
    from tavern_tui.engine.step import Assembly, StepUpdate
    from tavern_tui.service.tools import ToolService

_RECORD_KINDS = frozenset({STATE_KIND, LORE_STATE_KIND, EventKind.REQUEST_ASSEMBLY})
"""Kinds a step appends in one batch with its request header (engine.step.header `write_header`)."""


def parse_trace_id(text: str) -> tuple[int, int]:
    """"12:7" → (12, 7). Raises NotFound for anything else."""
    session, _, seq = str(text).partition(":")
    if not (session.isdigit() and seq.isdigit()):
        raise NotFound(f"{text!r} is not a trace id (SESSION:SEQ, as `tavern trace list` prints)")
    return int(session), int(seq)


def _stat_sha(record: Any) -> str | None:
    """`service.mvu.stat_hash` without importing the MVU rules."""
    if not isinstance(record, dict):
        return None
    text = json.dumps(record.get("stat_data"), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class TraceService:
    """Recorded requests: list, show, verify, replay (`tavern.traces`).

    Args:
        ctx: the shared settings, store and provider (a replay streams from it).
        playthroughs: the playthrough a replayed reply belongs to.
        timeline: the fork a replay branches into.
        tools: returns the `ToolService` (built on first use: only a replay of a tool step needs it).
    """

    def __init__(self, ctx: ServiceContext, playthroughs: PlaythroughService, timeline: TimelineService,
                 tools: Callable[[], ToolService | None] = lambda: None) -> None:
        self.ctx = ctx
        self.playthroughs = playthroughs
        self.timeline = timeline
        self._tools = tools

    @property
    def tools(self) -> ToolService | None:
        """The playthroughs' tools (None: not wired, as in some tests)."""
        return self._tools()

    def _trace_sessions(self, playthrough_id: int | None = None, session_id: int | None = None) -> list[int] | None:
        """The sessions whose requests are listed: `session_id`'s, a playthrough's own, or all (None)."""
        sessions: list[int] | None = None
        if session_id is not None:
            sessions = [session_id]
        elif playthrough_id is not None:
            with self.ctx.store.unit_of_work() as uow:
                root = uow.playthroughs.get(playthrough_id).root_session_id
            sessions = [link.id for link in self.ctx.store.events.playthrough_sessions(playthrough_id, root)
                        if link.playthrough_id == playthrough_id]
        return sessions

    def traces(self, playthrough_id: int | None = None, *, session_id: int | None = None) -> list[TraceView]:
        """Recorded requests, oldest first: of one playthrough, one session, or all."""
        return list_traces(self.ctx.store.events, self._trace_sessions(playthrough_id, session_id))

    def trace(self, trace_id: str) -> dict[str, Any]:
        """One trace in full: the record (message sources, refs, hashes), the header it
        points at (world-info decisions, resources, requested config), the step's `request/context`
        body (`request_context`: `{"adapter", "context"}`, None for a trace from before that record
        or a summary request), attempts, usage, timing.

        Raises:
            NotFound: no such trace.
        """
        event = self._trace_event(trace_id)
        ref = event.ref
        settled = settlements(self.ctx.store.events, [event]).get(ref)
        first = firsts(self.ctx.store.events, [event])[ref]
        header_ref = tuple(event.body.get("header", ()))
        context_ref = tuple(event.body.get("request_context") or ())
        wanted = [r for r in (header_ref, context_ref) if len(r) == 2]
        found = self.ctx.store.events.events_at(wanted) if wanted else {}
        header = found.get(header_ref)
        call = found.get(context_ref)
        assembly = header.body.get("assembly", {}) if header is not None else {}
        reply = settled.body if settled is not None else {}
        variables = dict(assembly.get("variables") or {})
        if header is not None and (variables.get("set") or variables.get("deleted")):
            variables["commit"] = self._state_commit_before(header)
        sent = event.body.get("messages", [])
        bodies = self.ctx.store.events.events_at(sorted({tuple(m["ref"]) for m in sent if len(m.get("ref", ())) == 2}))
        # Lines of an imported chat are history as read-only records: the trace says which were sent.
        imported = [i for i, m in enumerate(sent)
                    if (line := bodies.get(tuple(m.get("ref", ())))) is not None and line.body.get("imported")]
        timing, _attempts = request_facts(reply, first)
        return {"id": trace_id, "view": trace_view(event, settled, first).to_json(), "record": event.body,
                "imported": imported,
                "attribution": self._attribution(event.body, assembly),
                "world_info": assembly.get("world_info"), "resources": {k: assembly.get(k) for k in (
                    "character_id", "character_sha256", "character_revision", "preset", "world_books")
                    if k in assembly},
                "persona": assembly.get("persona"),
                "adjustments": assembly.get("adjustments", []), "timing": timing or None,
                "context": event.body.get("context") or assembly.get("context"),
                "request_context": call.body if call is not None else None,
                "config_adjusted": reply.get("config"), "variables": variables or None,
                # Issue 18: the regex scripts applied to each message sent, and the templates' failures.
                "regex_scripts": assembly.get("regex_scripts"), "templates": assembly.get("templates"),
                "mvu": self._mvu_facts(assembly.get("mvu"), settled)}

    def _mvu_facts(self, built: Any, settled: Event | None) -> dict[str, Any] | None:
        """Issue 18 state facts: `{"built_from": {"commit", "message", "committed", "stat_data_sha256", "pending",
        "derived_texts"}, "commits": [{"ref", "origin", "message", "base", "changes", "refused"}]}`: the record
        the request was built from, and the MVU commits its step made after the reply settled (the person's
        messages first, then the reply), each with what changed (path, old → new, reason) and what was refused
        and why. None when the playthrough has no MVU state."""
        if not isinstance(built, dict):
            return None
        commits: list[dict[str, Any]] = []
        if settled is not None:
            later = [e for e in self.ctx.store.events.events_of_kind([STATE_KIND], [settled.session_id])
                     if e.seq > settled.seq and isinstance(e.body.get("mvu"), dict)]
            reply = next((i for i, e in enumerate(later) if e.body.get("origin") == "reply"
                          and tuple(e.body["mvu"].get("message") or ()) == settled.ref), None)
            replied = later[reply] if reply is not None else None
            for event in later[:reply + 1] if reply is not None else []:
                part = event.body["mvu"]
                if event.body.get("origin") == "user" or event is replied:
                    commits.append({"ref": list(event.ref), "origin": event.body.get("origin"),
                                    "message": part.get("message"), "base": part.get("base"),
                                    "stat_data_sha256": _stat_sha(part.get("record")),
                                    "changes": list(part.get("changes") or []),
                                    "refused": list(part.get("refused") or [])})
        return {"built_from": built, "commits": commits}

    def _state_commit_before(self, header: Event) -> dict[str, Any] | None:
        """The `state/commit` appended with this request's header (in the same batch, just before it):
        `{"ref", "sha256"}`, or None."""
        session_id, seq = header.ref
        refs = [(session_id, s) for s in range(max(1, seq - 4), seq)]
        found = self.ctx.store.events.events_at(refs)
        for ref in reversed(refs):
            event = found.get(ref)
            if event is not None and event.kind == STATE_KIND:
                return {"ref": list(event.ref), "sha256": event.body_sha256}
            if event is not None and event.kind not in _RECORD_KINDS:
                break
        return None

    def _attribution(self, record: dict[str, Any], assembly: dict[str, Any]) -> dict[str, Any]:
        """Each sent message's parts and the request's token breakdown (`assembly.attribution`),
        for the messages that still verify (a changed or missing body has none: nothing is
        rebuilt from today's state). Parts come from what was recorded with the request: the
        header's `system_parts` for the system section, the `request/assembly` event's per-message
        spans for a projected request; a history, input or context message is one part."""
        from tavern_tui.assembly.attribution import attribute, default_parts, split_persona

        result = verify(record, self.ctx.store.events.events_at)
        sent = record.get("messages", [])
        events = self.ctx.store.events.events_at(sorted({tuple(m["ref"]) for m in sent}))
        spans: list[Any] = []
        for entry, message in zip(sent, result.messages):
            event = events.get(tuple(entry["ref"]))
            if message is None or event is None:
                spans.append(None)
            elif entry.get("index") is not None:
                recorded = event.body.get("parts")
                part = recorded[entry["index"]] if isinstance(recorded, list) and entry["index"] < len(recorded) else {}
                spans.append(part.get("spans") if isinstance(part, dict) and part.get("spans")
                             else default_parts(message, "request-only"))
            elif entry.get("source") == "system":
                spans.append(assembly.get("system_parts"))
            else:
                spans.append(default_parts(message, str(entry.get("source")), entry["ref"],
                                           str(event.body.get("context") or "")))
        entry_ids = list((assembly.get("persona") or {}).get("entries") or [])
        spans = [split_persona(s, str(m.get("content") or ""), entry_ids) if m is not None else s
                 for m, s in zip(result.messages, spans)]
        return attribute(result.messages, spans, self.ctx.token_counter)

    def verify_trace(self, trace_id: str) -> Verification:
        """Re-read the bodies a trace references and rebuild the array that was sent; each
        message is ok, changed or missing (a changed body is reported, never replaced).

        Raises:
            NotFound: no such trace.
        """
        event = self._trace_event(trace_id)
        return verify(event.body, self.ctx.store.events.events_at)

    def request_bodies(self, trace_id: str) -> dict[str, Any]:
        """The request a trace recorded, rebuilt from the log and verified (seed 000 §4, §6:
        details cold-read and verify the referenced bodies; nothing fills a missing one).

        Returns:
            `{"id", "ok", "tools", "tools_status", "provider", "model", "strategy", "generation",
            "attempt", "config", "omitted", "messages", "checks", "body"}`: `tools` is the
            `tools` array sent (None when none, or not kept: `tools_status`, `trace.TOOLS_STATUSES`);
            `messages` is the array as sent, with
            `None` where a body is changed or missing (never filled in from today's surface);
            `checks` one `{"position", "role", "source", "ref", "status", "detail"}` per
            message; `body` the whole JSON body the adapter posted (`wire_body`), only when every
            message verified and the tools, if any were offered, were kept whole, else None.

        Raises:
            NotFound: no such trace.
        """
        event = self._trace_event(trace_id)
        record = event.body
        result = verify(record, self.ctx.store.events.events_at)
        sent = record.get("messages", [])
        checks = [{"position": c.position, "role": sent[c.position].get("role"),
                   "source": sent[c.position].get("source"), "ref": list(c.ref), "status": c.status,
                   "detail": c.detail} for c in result.checks]
        model = str(record.get("model") or "")
        omitted = dict(record.get("omitted") or {})
        from tavern_tui.providers.wire import wire_body

        sent_tools = () if "tools" in omitted else (result.tools or ())  # a retry the server made without them
        # `sendable`: every message verified, so none of them is None.
        body = (wire_body(model, cast("list[dict[str, Any]]", list(result.messages)), result.config, sent_tools)
                if result.sendable else None)
        return {"id": trace_id, "ok": result.ok, "tools": result.tools, "tools_status": result.tools_status,
                "provider": str(record.get("provider", "")), "model": model,
                "strategy": str(record.get("strategy", "")), "generation": str(record.get("generation", "")),
                "attempt": int(record.get("attempt") or 1), "config": result.config,
                "omitted": dict(record.get("omitted") or {}), "messages": result.messages, "checks": checks,
                "body": body}

    async def replay(self, trace_id: str, *, model: str | None = None) -> AsyncGenerator[StepUpdate, None]:
        """Send a recorded request again, byte for byte (the messages rebuilt by `verify` and the
        recorded config), to the same model or `model`, as a new sibling of the reply it
        produced; the new trace names the one replayed (`replay_of`).

        Raises:
            NotFound: no such trace, or its playthrough is gone.
            TavernError: the trace does not verify (a body changed or is missing), or it
                produced no reply to branch from.
        """
        from tavern_tui.engine.step import Generation, StepOptions, run_step

        # Off the event loop (the TUI awaits this there): every read, the fork and the head move.
        session_id, frozen, tools = await asyncio.to_thread(self._prepare_replay, trace_id, model)
        options = StepOptions(generation=Generation("regenerate"), stale_after=self.ctx.stale_after,
                              claims=self.ctx.store.claims, **tools)
        steps = run_step(self.ctx.store.events, session_id, self.ctx.provider,
                         lambda history, claimed: frozen, None, options=options)
        async with aclosing(steps):
            async for update in steps:
                yield update

    def _prepare_replay(self, trace_id: str, model: str | None) -> tuple[int, Assembly, dict[str, Any]]:
        """`replay`'s prelude, in a worker thread: verify the trace, fork before its reply and
        move the playthrough's head onto the fork (last, once the fork is complete).

        Returns:
            (the head session the replay steps in, the frozen assembly it sends, `StepOptions`'
            tool fields: the recorded `tools` array when the request offered one).

        Raises:
            NotFound / TavernError: as `replay`.
        """
        from tavern_tui.engine.step import Assembly
        from tavern_tui.tools import RecordedOffer

        result = self.verify_trace(trace_id)
        if not result.sendable:
            bad = [f"message {c.position} {c.status}" for c in result.checks if c.status != "ok"]
            if result.tools_status not in ("none", "ok"):
                bad.append(f"tools {result.tools_status}")
            raise TavernError(f"trace {trace_id} does not verify ({', '.join(bad)}); only an exact past request is "
                              "replayed")
        view = self._trace_view_of(trace_id)
        if view.reply is None:
            raise TavernError(f"trace {trace_id} produced no reply to branch from")
        reply_ref = parse_trace_id(view.reply)
        playthrough_id = self._playthrough_of_session(reply_ref[0])
        timeline, _members = self.timeline.variant_tree(playthrough_id)
        parent = timeline.variants[reply_ref].parent if reply_ref in timeline.variants else None
        if parent is None:
            raise TavernError(f"trace {trace_id}: its reply has no message before it to branch from")
        self.timeline.set_head(playthrough_id, self.timeline.fork(playthrough_id, parent, timeline))
        messages = [m for m in result.messages if m is not None]
        frozen = Assembly(system="", config=dict(result.config), model=model or view.model,
                          meta={"strategy": view.strategy, "replay_of": trace_id},
                          request=tuple(messages), request_parts=tuple({"source": "replay"} for _ in messages))
        tools: dict[str, Any] = {}
        retried_without = "tools" in (self._trace_event(trace_id).body.get("omitted") or {})
        if result.tools and not retried_without:  # the array it sent, again; a call runs through today's toolbox
            live = self.tools.toolbox(playthrough_id) if self.tools is not None else None
            tools = {"tools": RecordedOffer(result.tools, live),
                     "max_steps": self.tools.max_steps if self.tools is not None else DEFAULT_MAX_STEPS}
        return self.playthroughs.playthrough(playthrough_id).session_id, frozen, tools

    def _trace_event(self, trace_id: str) -> Event:
        """The `trace/request` event a trace id names. Raises NotFound."""
        ref = parse_trace_id(trace_id)
        event = self.ctx.store.events.events_at([ref]).get(ref)
        if event is None or event.kind != TRACE_REQUEST:
            raise NotFound(f"no trace {trace_id}")
        return event

    def _trace_view_of(self, trace_id: str) -> TraceView:
        event = self._trace_event(trace_id)
        ref = event.ref
        log = self.ctx.store.events
        return trace_view(event, settlements(log, [event]).get(ref), firsts(log, [event])[ref])

    def _playthrough_of_session(self, session_id: int) -> int:
        found = self.ctx.store.events.playthrough_of(session_id)
        if found is None:
            raise NotFound(f"session {session_id} belongs to no playthrough")
        return int(found)

    def verify_all(self) -> list[tuple[str, Verification]]:
        """Verify every recorded request, oldest first (reads each referenced body once)."""
        events = self.ctx.store.events.events_of_kind([TRACE_REQUEST])
        # The bodies each request sent and its header (where the tools array it offered is kept).
        wanted = sorted({tuple(m["ref"]) for e in events for m in e.body.get("messages", [])}
                        | {tuple(e.body["header"]) for e in events if e.body.get("header")})
        stored = self.ctx.store.events.events_at(wanted)
        return [(ref_text(e.ref), verify(e.body, lambda refs: {r: stored[r] for r in refs if r in stored}))
                for e in events]
