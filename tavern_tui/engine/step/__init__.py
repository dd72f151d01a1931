"""Provides one agent step: submit → inbox → claim → assemble → pre-step → request → prepare →
refresh context → admit → header → stream → settle.

Rules: seed 000 §1 and §5 and DESIGN.md "One step". World info and prompt building happen in
the `Assembler` the caller passes (the engine knows nothing of SillyTavern formats); it sees the
durable history **plus the claimed batch**, before the user's text enters the log as a message.
A cancel or a provider error mid-stream keeps what arrived as `assistant/attempt`; periodic
`stream/checkpoint` events keep it across a crash (`recover_interrupted` settles them).
The step awaits every log call (`engine.log.AsyncSessionLog`; a synchronous log runs in worker
threads), so a database log never blocks the event loop.

One module a stage, in the order a step runs them:
- `run`: `run_step`, the entry point; holds the lease (`lease`) around a step or a tool turn.
- `opening`: the stages up to the sent request: `recovery` (recover or refuse), `claim`,
  `assemble`, `prestep` (hooks accept, replace or reject the proposed input; a rejection admits
  nothing and puts the input back), `request` (hooks own the call config alone), `prepare` (the
  provider validates the call config and binds its adapter; a failure admits nothing and puts the
  input back), `refresh` (the runtime context read again, clearing
  recorded), `admit`, `header` (with `request/context`), `freeze` (the frozen request and its trace
  record).
- `single`: one step: the opening, `stream` (deltas and checkpoints), `settle`.
- `tools` and `turn`: a turn with tools and a step's place in it.
- `aside`: the lease, prepare and stream stages for a request beside the steps (a compaction's
  summary request), which writes its own records once its text arrived.
- `types`, `updates`, `errors`, `options`, `timing`: what the stages share.
"""

from tavern_tui.engine.events import INTERRUPTED_REASON
from tavern_tui.engine.step.admit import admit_opening, context_events
from tavern_tui.engine.step.assemble import Prebuilt
from tavern_tui.engine.step.errors import CallNotPrepared, InboxEmpty, StepBusy, StepFailed
from tavern_tui.engine.step.lease import Claim, StepClaims
from tavern_tui.engine.step.options import CHECKPOINT_EVERY, BoundaryClaim, StepOptions
from tavern_tui.engine.step.prestep import InputRejected, PreStepHook, Proposed, Rejection
from tavern_tui.engine.step.recovery import OpenStep, open_step, recover_interrupted
from tavern_tui.engine.step.request import RequestHook
from tavern_tui.engine.step.run import run_step
from tavern_tui.engine.step.settle import SETTLE_TRIES
from tavern_tui.engine.step.timing import STAGES, stages_text
from tavern_tui.engine.step.turn import TOOL_GENERATIONS
from tavern_tui.engine.step.types import (
    CONFIG_ADJUSTED,
    CONTEXT_SOURCE,
    CONTEXT_SOURCES,
    GENERATION_TYPES,
    IMPERSONATION_SOURCE,
    OPENING_SOURCE,
    Assembler,
    Assembly,
    ContextRefresh,
    ContextSnapshot,
    Generation,
    join_continuation,
)
from tavern_tui.engine.step.updates import StepSettled, StepStarted, StepUpdate, ToolResultStored, TurnLimitReached

__all__ = [
    "CHECKPOINT_EVERY",
    "CONFIG_ADJUSTED",
    "CONTEXT_SOURCE",
    "CONTEXT_SOURCES",
    "GENERATION_TYPES",
    "IMPERSONATION_SOURCE",
    "INTERRUPTED_REASON",
    "OPENING_SOURCE",
    "SETTLE_TRIES",
    "STAGES",
    "TOOL_GENERATIONS",
    "Assembler",
    "Assembly",
    "BoundaryClaim",
    "CallNotPrepared",
    "Claim",
    "ContextRefresh",
    "ContextSnapshot",
    "Generation",
    "InboxEmpty",
    "InputRejected",
    "OpenStep",
    "Prebuilt",
    "PreStepHook",
    "Proposed",
    "Rejection",
    "RequestHook",
    "StepBusy",
    "StepClaims",
    "StepFailed",
    "StepOptions",
    "StepSettled",
    "StepStarted",
    "StepUpdate",
    "ToolResultStored",
    "TurnLimitReached",
    "admit_opening",
    "context_events",
    "join_continuation",
    "open_step",
    "recover_interrupted",
    "run_step",
    "stages_text",
]
