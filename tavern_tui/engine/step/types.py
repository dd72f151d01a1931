"""Provides what a step is asked for and what its assembler decides: `Generation`, `Assembly`,
the `Assembler` protocol, and the `source` names a step writes.

Rules: seed 000 §1 and §2, DESIGN.md "One step" (the engine knows nothing of SillyTavern
formats; the assembler the caller passes decides the system section, config and context).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tavern_tui.engine.events import Event, EventKind, NewEvent
from tavern_tui.engine.log import SurfaceMessage

OPENING_SOURCE = "opening"
"""`source` of the opening reference (a character's greeting): role assistant, origin engine."""

CONFIG_ADJUSTED = "request/config-adjusted"
"""Event kind: the provider retried without (or with renamed) rejected call parameters; body
`{"requested", "effective", "omitted": {field: reason}}`."""

IMPERSONATION_SOURCE = "impersonation"
"""`source` of a user-role line the model wrote (impersonate): origin agent (DESIGN.md)."""

CONTEXT_SOURCE = "runtime-context"
"""`source` of a runtime-context `user/message` a step admits (origin engine): the producer-owned
source of a context snapshot (seed 000 §1: "`runtime-context` for context snapshots")."""

LEGACY_CONTEXT_SOURCE = "context"
"""The `source` context messages were stored with before `CONTEXT_SOURCE`; still read as context."""

CONTEXT_SOURCES = frozenset({CONTEXT_SOURCE, LEGACY_CONTEXT_SOURCE})
"""Every `source` a stored runtime-context message may carry (test membership, never equality)."""

ContextSnapshot = tuple[tuple[str, str], ...]
"""A runtime-context snapshot: `(identifier, text)` each, in admission order."""

ContextRefresh = Callable[[ContextSnapshot], Awaitable[ContextSnapshot]]
"""Reads the runtime facts again (`StepOptions.refresh`, the refresh stage): given the assembler's
proposed snapshot, the snapshot that holds now (a context that stopped applying left out)."""

GENERATION_TYPES = ("normal", "regenerate", "swipe", "continue", "impersonate")
"""SillyTavern generation types a step can be (world-info `triggers` filter on them)."""


@dataclass(frozen=True, slots=True)
class Generation:
    """What a step asks the model for (SillyTavern `Generate(type)`).

    Attributes:
        type: one of `GENERATION_TYPES`. "normal" sends the person's text; "regenerate" and
            "swipe" answer the history as it is (no new input); "continue" extends
            `continue_text`; "impersonate" has the model write the person's next line, stored
            as `user/message` with origin agent and source "impersonation".
        continue_text: the reply being continued; sent as the last assistant message, and the
            settled reply is it plus the new text (SillyTavern continue without prefill).
        continues: (session, seq) of the message being continued (kept in the reply's body).
        instruction: a final system message for this request only (the continue nudge or the
            impersonation prompt); recorded in the step's `request/assembly` event.
        speaker, persona: the name and persona id the person writes under now; every user
            message the step stores keeps them (`speaker`, `persona` in its body; not `name`,
            which an imported line's body holds and the request sends as OpenAI `name`), so a later
            rename or persona switch relabels no old line.
        author_id, author_name: the character who replies, when it is not the playthrough's own
            (a group chat's speaker): the reply keeps them (`character_id`, `name` in its body,
            as an imported group line keeps its speaker's `name`).

    Raises:
        ValueError: `type` is not one of `GENERATION_TYPES`.
    """

    type: str = "normal"
    continue_text: str = ""
    continues: tuple[int, int] | None = None
    instruction: str = ""
    speaker: str = ""
    persona: int | None = None
    author_id: int | None = None
    author_name: str = ""

    def author_fields(self) -> dict[str, Any]:
        """`{"name", "character_id"}` for the reply's body when a speaker is set; else {}."""
        return {"name": self.author_name, "character_id": self.author_id} if self.author_id is not None else {}

    def speaker_fields(self) -> dict[str, Any]:
        """`{"speaker"?, "persona"?}` for a user message's body (empty when not set)."""
        fields: dict[str, Any] = {"speaker": self.speaker} if self.speaker else {}
        if self.persona is not None:
            fields["persona"] = self.persona
        return fields

    def settle_text(self, new: str) -> str:
        """The reply's text as settled: a continue joins the original and `new`; else `new`."""
        return join_continuation(self.continue_text, new) if self.type == "continue" else new

    def __post_init__(self) -> None:
        if self.type not in GENERATION_TYPES:
            raise ValueError(f"unknown generation type {self.type!r}; use one of {', '.join(GENERATION_TYPES)}")


def applied_context(events: Sequence[Event]) -> tuple[str, ...] | None:
    """The context identifiers that applied at the last step on this surface: the `applied` list of
    its newest `request/context` record that has a `context` (one without is a request beside
    the steps, a compaction's summary, which admits none: skipped); None when the surface has none
    (a chat from before the record: the context messages on the surface then stand for it)."""
    for event in reversed(events):
        if event.kind == EventKind.REQUEST_CONTEXT and "context" in event.body:
            context = event.body.get("context")
            applied = context.get("applied") if isinstance(context, dict) else None
            return tuple(str(i) for i in applied) if isinstance(applied, list) else ()
    return None


def join_continuation(original: str, addition: str) -> str:
    """The continued reply: the original, a space when neither side has one (SillyTavern's
    default `continue_postfix` " "), then the new text."""
    if not original or not addition or original[-1].isspace() or addition[0].isspace():
        return original + addition
    return f"{original} {addition}"


@dataclass(frozen=True, slots=True)
class Assembly:
    """What the assembler decided for one step.

    Attributes:
        system: the system section's text ("" for none); admitted as `system/message` when it
            differs from the effective one.
        config: call parameters (temperature, max_tokens, …); never history.
        model: model id for this request ("" = the provider's default).
        meta: assembly facts for the trace (resources used, token estimate, …).
        records: events the assembler wants kept with this step (e.g. world-info timed effects),
            appended just before the request header, so they exist only for steps really sent.
        request: a projected request (the `projection` strategy): when set, this exact message
            array is sent and recorded in a `request/assembly` event, no system section is
            admitted, and nothing of it but the person's input enters the chat history.
        request_parts: one `{"role", "source", "identifier", "ref"}` per projected message
            (where it came from), recorded with it.
        input: the claimed input as the assembler expanded it (macros: SillyTavern stores the person's
            text expanded when it is sent), one text per claimed one; None = admitted as claimed.
        context: runtime context for this step, `(identifier, text)` each: admitted as
            `user/message` (origin engine, source "runtime-context") just before the input, so it
            enters durable history; a context whose identifier's newest admitted text on the
            surface is the same is not admitted again (context-snapshot reuse; seed 000 §2.2).
            This is the proposed snapshot: the refresh stage re-reads it before admission.
        omit: refs of surface messages this request leaves out to fit the context (the oldest
            history, whole messages; `assembly.fit`); they stay in the log and on the surface.
        rewrite: the request message sent instead of a surface message's own, by ref (regex
            scripts): the log keeps the raw text; the sent message is kept in the
            `request/assembly` record (`rewritten`, after `append`), which the trace points at.
    """

    system: str
    config: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    records: tuple[NewEvent, ...] = ()
    request: tuple[dict[str, Any], ...] | None = None
    request_parts: tuple[dict[str, Any], ...] = ()
    context: tuple[tuple[str, str], ...] = ()
    input: tuple[str, ...] | None = None
    omit: frozenset[tuple[int, int]] = frozenset()
    rewrite: Mapping[tuple[int, int], dict[str, Any]] = field(default_factory=dict)


class Assembler(Protocol):
    """Builds the step's system section and call config from history plus the claimed input."""

    def __call__(self, history: list[SurfaceMessage], claimed: list[str]) -> Assembly: ...
