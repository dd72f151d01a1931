"""Provides `CompactionService`: the context a playthrough's requests fit, and summaries that
replace old turns (`tavern.compaction`).

Rules: issue 16 and seed 000 §1.1. The limit follows `assembly.fit.resolve_limit` (bound
preset, config, endpoint report, default). A compaction asks the model for a recap of a
contiguous range of the oldest visible messages and records it as one `surface/replaced`
event (origin engine, source `SUMMARY_SOURCE`) obscuring exactly that range; the originals stay
in the log. Each summary request runs through a step's stages (DESIGN.md "One step", engine
`step.aside`): it holds the playthrough's step lease (one step at a time: a step meanwhile is
refused as busy, and so is the request while a step runs), the provider prepares the call before
anything is written, and it is traced like a step's (`request/assembly` + `request/header` +
`request/context` + `trace/request`, generation "summary", with the stream's HTTP attempts, a
record per retry, and the stage times), written only once the summary arrived, so a failed
compaction stores nothing. A summary is a surface node: it can be edited (a replacement of it,
still a summary) and summarised again with later messages. A fork made before the compaction
does not see it (its surface stops at the fork point); one made after does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from tavern_tui.assembly.fit import ContextLimit, message_cost, resolve_limit
from tavern_tui.engine.events import EventKind, NewEvent, Origin
from tavern_tui.engine.log import (
    SUMMARY_SOURCE,
    SYSTEM_PROMPT_SOURCE,
    SurfaceMessage,
    derive_messages,
    sent_to_model,
)
from tavern_tui.engine.step.aside import Streamed, held_step, prepare_aside, stream_text
from tavern_tui.engine.step.errors import CallNotPrepared
from tavern_tui.engine.step.header import context_record
from tavern_tui.engine.step.stream import retry_records
from tavern_tui.engine.step.timing import Stopwatch
from tavern_tui.engine.stream import CallContext, ChatRequest, Provider
from tavern_tui.engine.trace import SentMessage, message_hash, trace_record
from tavern_tui.errors import NotFound, TavernError
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.presets import PresetService
from tavern_tui.text.names import substitute_names
from tavern_tui.views import MessageView, PlaythroughView

DEFAULT_SUMMARY_PROMPT = (
    "Summarise the roleplay transcript below as a factual recap, in the third person and the past tense. "
    "Name every character and place that matters, say what happened in order, what was decided or revealed, "
    "and list the threads still open. Do not invent anything, do not continue the story, and write only the "
    "recap.")
"""What a compaction asks when the config sets no `summary_prompt` (issue 16 §3)."""

DEFAULT_KEEP = 10
"""Newest visible messages a compaction leaves as they are when `--keep` is not given."""


@dataclass(frozen=True, slots=True)
class Compaction:
    """What one compaction recorded.

    Attributes:
        summary: ref of the `surface/replaced` event (the summary node).
        covers: original messages it stands for (a summary it replaced counts its own).
        targets: the surface refs it obscured (every part's, as visible before), oldest first.
        trace: "SESSION:SEQ" of the summary request's trace.
        text: the summary.
        requests: summary requests it took (a range too long for one is summarised in parts).
    """

    summary: tuple[int, int]
    covers: int
    targets: tuple[tuple[int, int], ...]
    trace: str
    text: str
    requests: int = 1

    def to_json(self) -> dict[str, Any]:
        """`{"summary", "covers", "targets", "trace", "text", "requests"}` (refs as "SESSION:SEQ")."""
        return {"summary": _ref(self.summary), "covers": self.covers, "targets": [_ref(t) for t in self.targets],
                "trace": self.trace, "text": self.text, "requests": self.requests}


def _ref(ref: Sequence[int]) -> str:
    return f"{ref[0]}:{ref[1]}"


def covers_of(message: SurfaceMessage) -> int:
    """Original messages a surface message stands for: a summary's `covers`, else 1."""
    meta = message.body.get("summary")
    value = meta.get("covers") if isinstance(meta, dict) else None
    return value if isinstance(value, int) and value > 0 else 1


class CompactionService:
    """Context limits and compaction (`tavern.compaction`).

    Args:
        ctx: settings (limits, summary prompt), store, provider, token counter.
        playthroughs: the playthrough's head session and names.
        presets: the preset bound to a playthrough.
    """

    def __init__(self, ctx: ServiceContext, playthroughs: PlaythroughService, presets: PresetService) -> None:
        self.ctx = ctx
        self.playthroughs = playthroughs
        self.presets = presets

    # -- the limit -------------------------------------------------------------------------

    def limit_for(self, playthrough_id: int) -> ContextLimit:
        """The context this playthrough's next request fits (`resolve_limit`; the endpoint is
        asked, once per provider, unless `probe_context` is off). Runs SQL: call off the loop.

        Raises:
            NotFound: no such playthrough.
        """
        with self.ctx.store.unit_of_work() as uow:
            preset_id = uow.playthroughs.get(playthrough_id).preset_id
        return self.limit_for_preset(preset_id)

    def limit_for_preset(self, preset_id: int | None) -> ContextLimit:
        """`limit_for` with the preset given by id (None: none bound): an opening draft's
        preview, or a preview with another preset, fits the limit it would have.
        Raises NotFound (no such preset)."""
        settings = self.ctx.settings
        preset_settings = self.presets.preset_of(preset_id)[0].settings if preset_id is not None else None
        endpoint = None
        if settings.probe_context and (not preset_settings or "openai_max_context" not in preset_settings) \
                and not settings.max_context:
            probe = getattr(self.ctx.provider, "context_window", None)
            endpoint = probe() if callable(probe) else None
        return resolve_limit(preset_settings, settings.max_context, settings.max_tokens, endpoint)

    # -- compaction -------------------------------------------------------------------------

    def plan(self, playthrough_id: int, through: tuple[int, int] | None = None,
             keep: int | None = None, until: tuple[int, int] | None = None, *, cut: bool = True,
             ) -> tuple[int, list[SurfaceMessage], ContextLimit]:
        """(head session, the contiguous range a compaction would summarise, the limit): the
        oldest visible chat messages through `through` (inclusive), or up to `until`
        (exclusive: auto-compaction passes the first message the fit kept), or all but the
        newest `keep` (default `DEFAULT_KEEP`), cut (unless `cut` is False) to the oldest ones
        whose transcript fits one summary request (`compact` summarises the rest in further parts).

        Raises:
            NotFound: no such playthrough, or `through` is not a visible message.
            TavernError: nothing to summarise (too few messages).
        """
        view = self.playthroughs.playthrough(playthrough_id)
        chat = [m for m in derive_messages(self.ctx.store.events, view.session_id)
                if m.source != SYSTEM_PROMPT_SOURCE]
        point = through if through is not None else until
        if point is not None:
            index = next((i for i, m in enumerate(chat) if m.ref == tuple(point)), None)
            if index is None:
                raise NotFound(f"{_ref(point)} is not a message visible in playthrough {playthrough_id} "
                               "(see `tavern show` for the refs)")
            end = index + 1 if through is not None else index
        else:
            end = len(chat) - (DEFAULT_KEEP if keep is None else max(0, keep))
        chosen = chat[:max(0, end)]
        if len([m for m in chosen if sent_to_model(m)]) < 2 and not any(m.source == SUMMARY_SOURCE for m in chosen):
            asked = keep is not None or point is not None  # the CLI's --keep / --through
            raise TavernError(f"nothing to compact in playthrough {playthrough_id} yet: of its {len(chat)} visible "
                              f"messages the newest {len(chat) - len(chosen)} stay as they are, which leaves fewer "
                              f"than 2 to summarise" + ("; lower --keep or name a later --through" if asked else ""))
        limit = self.limit_for(playthrough_id)
        if not cut:
            return view.session_id, chosen, limit
        count = self.ctx.token_counter
        room = limit.limit - message_cost(count, self._prompt(view.character_name, view.user_name)) - 3
        used, taken = 0, 0
        for message in chosen:
            cost = message_cost(count, self._line(message, view.character_name, view.user_name)) \
                if sent_to_model(message) else 0
            if used + cost > room:
                break
            used, taken = used + cost, taken + 1
        if taken == 0:
            raise TavernError(f"the oldest message alone does not fit the summary request's context of "
                              f"{limit.limit} tokens; raise the context")
        return view.session_id, chosen[:taken], limit

    def _prompt(self, char: str, user: str) -> str:
        return substitute_names(self.ctx.settings.summary_prompt or DEFAULT_SUMMARY_PROMPT, char, user)

    @staticmethod
    def _line(message: SurfaceMessage, char: str, user: str) -> str:
        if message.source == SUMMARY_SOURCE:
            return f"[Summary of earlier events] {message.content}"
        name = message.body.get("name") if isinstance(message.body.get("name"), str) else None
        speaker = name or (user if message.role == "user" else char if message.role == "assistant" else "Narrator")
        return f"{speaker}: {message.content}"

    def summary_messages(self, range_: Sequence[SurfaceMessage], char: str, user: str) -> list[dict[str, Any]]:
        """The summary request's messages: the summary prompt (system), then the range as one
        transcript (user), "Name: text" a line, an earlier summary marked as one."""
        transcript = "\n\n".join(self._line(m, char, user) for m in range_ if sent_to_model(m))
        return [{"role": "system", "content": self._prompt(char, user)}, {"role": "user", "content": transcript}]

    async def compact(self, playthrough_id: int, *, through: tuple[int, int] | None = None, keep: int | None = None,
                      until: tuple[int, int] | None = None,
                      progress: Callable[[int], None] | None = None,
                      on_part: Callable[[int, int], None] | None = None) -> Compaction:
        """Summarise the oldest visible messages (`plan`'s range) and record the summary node.

        A range whose transcript does not fit one summary request is summarised in parts, oldest
        first: each part's summary replaces that part, and the next request summarises that
        summary together with the following messages (issue 16: "summarised again with later
        messages"), until the summary covers the whole range. Every part is a traced request;
        a failure keeps the parts already recorded (each is a whole summary node).

        Args:
            through, keep, until: the range, as `plan`.
            progress: called with the characters received so far (all parts), as the summary streams.
            on_part: called before each request with (messages of the range summarised so far,
                messages in the range).

        Returns:
            The last part's summary node; `targets` are all the range's originally visible refs,
            `requests` how many summary requests it took.

        Raises:
            NotFound / TavernError: as `plan`; the provider is the offline demo (a placeholder
                cannot summarise); a part that cannot grow (the summary so far and the next
                message do not fit together); the provider refused the call as configured (its
                `prepare`: the message says what to fix; that part is not sent nor stored).
                StepBusy: a step (or another compaction) holds the playthrough's step lease (that
                part is not sent nor stored). ProviderError: the model failed (that part is not
                stored).
        """
        if self.ctx.provider.placeholder:
            raise TavernError("compaction needs a model: the offline demo provider cannot summarise; configure "
                              "TAVERN_API_BASE / TAVERN_MODEL (or [provider] in the config file)")
        view = await asyncio.to_thread(self.playthroughs.playthrough, playthrough_id)
        whole = await asyncio.to_thread(self._whole_range, playthrough_id, through, keep, until)
        received = 0

        def on_text(text: str) -> None:
            nonlocal received
            received += len(text)
            if progress is not None:
                progress(received)

        done: Compaction | None = None
        requests = 0
        while True:
            done = await self._summarise_part(playthrough_id, view, whole, done, on_part, on_text)
            requests += 1
            if done.targets[-1] == whole[-1].ref:
                break
        return replace(done, targets=tuple(m.ref for m in whole), requests=requests)

    async def _summarise_part(self, playthrough_id: int, view: PlaythroughView, whole: Sequence[SurfaceMessage],
                              done: Compaction | None, on_part: Callable[[int, int], None] | None,
                              on_text: Callable[[str], None]) -> Compaction:
        """One summary request of `compact`, through a step's stages (engine `step.aside`), each timed
        (`Stopwatch`): `claim` (the playthrough's step lease, held until its records are written:
        a step meanwhile gets `StepBusy`, as this request does while a step runs), `assemble` (the
        part, `plan`, and its messages), `prepare` (the provider validates the call before
        anything is written), then `first_byte` and `stream`; then its records (`_record`).

        Raises:
            StepBusy: a step (or another compaction) holds the playthrough's lease; nothing is written.
            TavernError: as `compact`; the provider refused the call (`_prepare`); an empty summary.
            ProviderError: the model failed (nothing of this part is stored).
        """
        watch = Stopwatch()
        async with held_step(self.ctx.store.events, view.session_id, self.ctx.store.claims, self.ctx.stale_after):
            watch.lap("claim")
            session_id, range_, limit = await asyncio.to_thread(self.plan, playthrough_id, whole[-1].ref, None, None)
            if done is not None and len(range_) < 2:
                raise TavernError(f"the summary so far and the next message do not fit one summary request of "
                                  f"{limit.limit} tokens; {done.covers} messages are summarised, raise the "
                                  f"context to summarise the rest")
            if on_part is not None:
                position = {m.ref: i for i, m in enumerate(whole)}
                on_part(position.get(range_[0].ref, 0) if done is None else position.get(range_[1].ref, 0),
                        len(whole))
            messages = self.summary_messages(range_, view.character_name, view.user_name)
            watch.lap("assemble")
            provider = self.ctx.provider
            model = provider.model
            call = self._prepare(provider, model)
            watch.lap("prepare")
            streamed = await stream_text(provider, ChatRequest(messages, model, {}), watch.laps, on_text=on_text)
            text = streamed.text.strip()
            if not text:
                raise TavernError("the model returned an empty summary; nothing more was recorded")
            return await asyncio.to_thread(self._record, session_id, range_, messages, text, limit, provider, model,
                                           call, streamed)

    @staticmethod
    def _prepare(provider: Provider, model: str) -> CallContext:
        """The summary request's prepare stage (`prepare_aside`), before anything is written.

        Raises:
            TavernError: the provider refused the call (`CallNotPrepared`); the message names what to fix.
        """
        try:
            return prepare_aside(provider, model, {})
        except CallNotPrepared as exc:
            raise TavernError(f"the summary request could not be built ({exc.problem}); nothing was sent or "
                              "recorded") from exc

    def _whole_range(self, playthrough_id: int, through: tuple[int, int] | None, keep: int | None,
                     until: tuple[int, int] | None) -> list[SurfaceMessage]:
        """The visible messages a compaction covers in all (`plan`'s choice before its cut to fit)."""
        return self.plan(playthrough_id, through, keep, until, cut=False)[1]

    def _record(self, session_id: int, range_: Sequence[SurfaceMessage], messages: list[dict[str, Any]], text: str,
                limit: ContextLimit, provider: Provider, model: str, call: CallContext,
                streamed: Streamed) -> Compaction:
        """Write the summary request's records (`request/assembly`, `request/header`,
        `request/context`), its trace (one record a provider request: retries after the first,
        `stream.retry_records`) and the summary node, which settles the request."""
        log = self.ctx.store.events
        targets = tuple(m.ref for m in range_)
        context = {"limit": limit.limit, "source": limit.source, "summarised": len(targets)}
        assembly, header, call_event = log.append(session_id, [
            NewEvent(EventKind.REQUEST_ASSEMBLY, None, {
                "messages": messages, "parts": [{"source": "summary_prompt"}, {"source": "transcript"}],
                "generation": "summary"}),
            NewEvent(EventKind.REQUEST_HEADER, None, {
                "provider": provider.name, "model": model, "config": {}, "stream": True,
                "generation": "summary", "assembly": {"strategy": "summary", "context": context}}),
            context_record(call, None)])
        sent = [SentMessage(m["role"], "request-only", assembly.ref, i, message_hash(m))
                for i, m in enumerate(messages)]
        covers = sum(covers_of(m) for m in range_)
        meta = {"covers": covers, "first": list(targets[0]),
                "last": list(targets[-1]),
                "from": range_[0].created_at.isoformat(), "to": range_[-1].created_at.isoformat(),
                "targets": len(targets)}
        first = trace_record(header, provider.name, model, strategy="summary", generation="summary", config={},
                             submitted_at=streamed.timing["submitted"], context=context, sent=sent,
                             request_context=list(call_event.ref), timing=streamed.timing,
                             **({"attempts": streamed.attempts} if streamed.attempts else {}))
        node = NewEvent(EventKind.SURFACE_REPLACED, "system", {
            "targets": [list(t) for t in targets], "request": list(header.ref),
            "message": {"role": "system", "content": text, "summary": meta},
            **({"usage": streamed.usage} if streamed.usage else {})}, Origin.ENGINE, SUMMARY_SOURCE)
        if len(streamed.attempts) < 2:  # the one request: its trace and the summary in one batch
            trace, summary = log.append(session_id, [first, node])
        else:  # the retries' records name the first one's ref: it is stored first
            trace = log.append(session_id, [first])[0]
            retries = retry_records(trace, streamed.attempts, datetime.now(UTC).isoformat())
            summary = log.append(session_id, [*retries, node])[-1]
        return Compaction(summary.ref, covers, targets, _ref(trace.ref), text)

    def edit_summary(self, playthrough_id: int, ref: tuple[int, int], text: str) -> tuple[int, int]:
        """Replace a visible summary node with the person's text (a replacement of it, still a
        summary, origin operator; the earlier text stays in the log).

        Returns:
            The new summary node's ref.

        Raises:
            NotFound: `ref` is not a visible summary of the playthrough.
            TavernError: empty text.
        """
        if not text.strip():
            raise TavernError("a summary cannot be empty; compact again or keep the old one")
        view = self.playthroughs.playthrough(playthrough_id)
        node = next((m for m in derive_messages(self.ctx.store.events, view.session_id)
                     if m.ref == tuple(ref) and m.source == SUMMARY_SOURCE), None)
        if node is None:
            raise NotFound(f"{_ref(ref)} is not a summary visible in playthrough {playthrough_id}")
        meta = dict(node.body.get("summary") or {})
        event = NewEvent(EventKind.SURFACE_REPLACED, "system", {
            "targets": [list(node.ref)], "message": {"role": "system", "content": text, "summary": meta}},
            Origin.OPERATOR, SUMMARY_SOURCE)
        return self.ctx.store.events.append(view.session_id, [event])[0].ref

    def originals(self, summary: SurfaceMessage) -> list[SurfaceMessage]:
        """The original messages a summary node stands for, oldest first (read-only, not sent):
        its targets, and for a target that is itself a summary (or an edit of one), that one's
        originals in its place (`surface_of` would show them replaced; this reads the log)."""
        log = self.ctx.store.events
        out: list[SurfaceMessage] = []
        session_id, seq = summary.ref
        pending = [(session_id, seq)]
        seen: set[tuple[int, int]] = set()
        while pending:
            ref = pending.pop(0)
            if ref in seen:
                continue
            seen.add(ref)
            event = log.events_at([ref]).get(ref)
            if event is None:
                continue
            if event.kind == EventKind.SURFACE_REPLACED:
                targets = [(int(t[0]), int(t[1])) for t in event.body.get("targets", ())]
                pending = targets + pending
                continue
            out.append(SurfaceMessage(event.ref, event.kind, event.role or "system", event.content, event.origin,
                                      event.source, event.created_at, event.body))
        return out


    def replaced_views(self, playthrough_id: int) -> dict[tuple[int, int], list[MessageView]]:
        """summary ref → the originals it replaced, as display views (`tavern show --all`, the
        chat's expanded summary block), for every summary on the playthrough's surface."""
        view = self.playthroughs.playthrough(playthrough_id)
        make = self.playthroughs._message_view  # noqa: SLF001 - the one way a message is displayed
        return {m.ref: [make(o, view.character_name, view.user_name) for o in self.originals(m)]
                for m in derive_messages(self.ctx.store.events, view.session_id) if m.source == SUMMARY_SOURCE}
