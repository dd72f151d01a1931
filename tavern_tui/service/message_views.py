"""Provides the chat's messages as the person sees them (`MessageView`): `message_view` (one
surface message: its speaker, error, summary and tool facts), `event_view` (a just-stored event),
`surface_views` (a head session's messages, with a reply a killed process left mid-stream) and
`as_shown` (the display texts MVU and the regex scripts set).

Separate from `playthroughs` because it is how messages look, not which playthroughs there are:
`PlaythroughService.messages` and `view_of` read the playthrough and call these, and
`CompactionService` shows its summaries through the same `message_view`.

Rules: a line keeps the name it was written under (issue 20 item 6; SillyTavern keeps `name`); a
reply a killed process left open shows as the partial it will be settled as, before anything
settles it (a read, no write).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tavern_tui.engine.events import Event, EventKind
from tavern_tui.engine.log import HIDDEN_KEY, SYSTEM_PROMPT_SOURCE, SurfaceMessage, derive_messages, inspect, tail
from tavern_tui.engine.step import INTERRUPTED_REASON, open_step
from tavern_tui.service.context import ServiceContext
from tavern_tui.views import MessageView, PlaythroughView

PLACEHOLDER = "<StatusPlaceHolderImpl/>"  # mvu.update.PLACEHOLDER, not imported: the chat opens without MVU's parsers


def written_name(role: str | None, body: Any) -> str | None:
    """The name a line was written under, from its stored body: a person's line's `speaker` or
    `name` (the persona's name then, or an imported line's), a group member's reply's `name`
    beside its `character_id`; None when it names none (the playthrough's names then apply).
    The chat, the tree and search all name a line by it, so a later rename or switch relabels
    no old line (SillyTavern keeps `name` on each message)."""
    if not isinstance(body, dict):
        return None
    if role == "user":
        written = body.get("speaker") or body.get("name")
        return written if isinstance(written, str) and written.strip() else None
    if role == "assistant" and isinstance(body.get("character_id"), int):
        named = body.get("name")
        return named if isinstance(named, str) and named else None
    return None


def message_view(message: SurfaceMessage, char: str, user: str) -> MessageView:
    """One surface message as the chat shows it, `char` and `user` naming the speakers whose
    lines carry no name of their own (`written_name`)."""
    origin = message.effective_origin
    if message.role in ("user", "assistant"):
        speaker = written_name(message.role, message.body) or (user if message.role == "user" else char)
    elif message.role == "tool":
        speaker = str(message.body.get("name") or "tool")
    else:
        speaker = "System"
    error = message.body.get("error")
    error = error if isinstance(error, dict) else {}
    return MessageView(message.ref, message.role, origin.value if origin else "engine", message.origin is None,
                       message.kind, message.source, message.content, speaker, message.created_at,
                       str(message.body.get("reasoning") or ""), message.partial,
                       str(error["message"]) if "message" in error else None,
                       str(error["category"]) if "category" in error else None,
                       summary if isinstance(summary := message.body.get("summary"), dict) else None,
                       *_tool_facts(message.body, message.role),
                       character_id=cid if isinstance(cid := message.body.get("character_id"), int) else None,
                       hidden=bool(message.body.get(HIDDEN_KEY)))


def event_view(event: Event, char: str, user: str) -> MessageView:
    """A just-stored event as the chat shows it (a step's reply with tool calls, a tool
    result: issue 19); no database read, so a screen may call it on its event loop."""
    message = SurfaceMessage(event.ref, event.kind, event.role or "system", event.content, event.origin,
                             event.source, event.created_at, event.body)
    return message_view(message, char, user)


def surface_views(ctx: ServiceContext, view: PlaythroughView, *, include_system: bool = False,
                  last: int | None = None) -> list[MessageView]:
    """The playthrough's messages in order (its head session's surface, failed replies
    included), then a reply left open (`left_open`), as stored: no display text set yet.
    `include_system` and `last` as `PlaythroughService.messages`."""
    if last is not None:
        log = ctx.store.events
        recent = tail(log, inspect(log, view.session_id), last, include_failed=True)
        views = [message_view(m, view.character_name, view.user_name) for m in recent]
    else:
        surface = derive_messages(ctx.store.events, view.session_id, include_failed=True)
        views = [message_view(m, view.character_name, view.user_name) for m in surface
                 if include_system or m.source != SYSTEM_PROMPT_SOURCE]
    return views + left_open(ctx, view)


def left_open(ctx: ServiceContext, view: PlaythroughView) -> list[MessageView]:
    """A reply a killed process left mid-stream, shown as the partial it will be settled as
    (`recover_interrupted`'s text and reason) before anything settles it: a read, no write, so
    `show`, `export` and every window see it at once. [] when no step is open, or a live
    process still owns it."""
    step = open_step(ctx.store.events, view.session_id)
    if step is None or ctx.store.claims.held(view.session_id, ctx.stale_after):
        return []
    text = "".join(str(e.body.get("content", "")) for e in step.checkpoints)
    thought = "".join(str(e.body.get("reasoning", "")) for e in step.checkpoints)
    ref = step.checkpoints[-1].ref if step.checkpoints else (view.session_id, 0)
    why = {"category": "interrupted", "message": f"{INTERRUPTED_REASON}; the text that had arrived is kept"}
    message = SurfaceMessage(ref, EventKind.ASSISTANT_ATTEMPT.value, "assistant", text, None, None,
                             step.last_activity, {"recovered": True, "reasoning": thought, "error": why})
    return [message_view(message, view.character_name, view.user_name)]


def as_shown(views: list[MessageView], character_id: int, texts: dict[tuple[int, int], str] | None,
             display: Callable[[int, list[MessageView]], list[MessageView]] | None) -> list[MessageView]:
    """`views` with their display texts: MVU's derived `texts` first (None or empty: none), then
    the character's `display` (its regex scripts; None: the raw text), then a status
    placeholder no script drew taken out."""
    if texts:
        views = [replace(v, display=texts[v.ref]) if v.ref in texts else v for v in views]
    # Both windows end at the newest message, so display depths count from the end of the window.
    views = display(character_id, views) if display is not None else views
    # A status placeholder no script drew is an unknown tag: SillyTavern's sanitiser shows nothing for it.
    return [replace(v, display=v.display.replace(PLACEHOLDER, "").rstrip())
            if v.display is not None and PLACEHOLDER in v.display else v for v in views]


def _tool_facts(body: dict[str, Any], role: str) -> tuple[tuple[dict[str, Any], ...], dict[str, Any] | None]:
    """(an assistant message's tool calls, a tool result's facts) for `MessageView` (issue 19)."""
    calls = body.get("tool_calls")
    calls = tuple(c for c in calls if isinstance(c, dict)) if role == "assistant" and isinstance(calls, list) else ()
    if role != "tool":
        return calls, None
    detail = found if isinstance(found := body.get("detail"), dict) else {}
    result = {"toolCallId": body.get("toolCallId"), "name": body.get("name"), "arguments": body.get("arguments"),
              "status": body.get("status"), "summary": detail.get("summary"), "reason": detail.get("reason")}
    return calls, result
