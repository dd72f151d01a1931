"""Provides `StepRunner` (`tavern.steps`): every engine step of a playthrough (send, reply,
regenerate, continue, impersonate), the assembler a step uses, and the dry runs of one (`preview`,
the token estimate, the world-info preview and the warm-up when a chat opens).

One module per responsibility, composed (no mixins): `runner` (`StepRunner`: the steps and when
the work after one runs), `settling` (`Settling`: MVU's commit and belief learning after a reply
settles), `failures` (what a failed step keeps and says), `assembling` (`Assembling`: the assembler
and the surface and batch it reads), `preview` (`Previews`: the dry runs and the warm-up) and
`forks` (`Forks`: the variants' preludes). `StepRunner` holds one of each and delegates.

Rules: seed 000 (preview runs the same code path as a step, calls no provider and stores
nothing); SillyTavern behaviour followed (format-digest §d): swiping right past the last reply
generates a new one; continue extends the last reply; impersonate writes the person's line.
"""

from tavern_tui.service.steps.forks import CONTINUE_NUDGE
from tavern_tui.service.steps.runner import IMPERSONATION_PROMPT, StepRunner

__all__ = ["CONTINUE_NUDGE", "IMPERSONATION_PROMPT", "StepRunner"]
