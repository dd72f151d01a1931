"""Provides the pre-step stage of a step's opening: a waterfall of hooks that accept, replace or
reject the messages the step proposes to admit (the claimed input as the assembler expanded it).

Rules: seed 000 §1 and §5 (`agent/pre-step` runs after system assembly; it sees the claimed
messages but cannot rewrite the frozen assembly) and DESIGN.md "One step" (a stage before
admission that fails admits nothing and leaves the input queued).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tavern_tui.engine.log import AsyncSessionLog
from tavern_tui.engine.step.assemble import put_back
from tavern_tui.engine.step.claim import Claimed
from tavern_tui.engine.step.types import Assembly, Generation
from tavern_tui.errors import TavernError


@dataclass(frozen=True, slots=True)
class Proposed:
    """What a step proposes to admit, as a pre-step hook sees it.

    Attributes:
        texts: one text per claimed item, in claim order, as the assembler expanded it (or as the
            earlier hooks replaced it).
        system: the frozen system section ("" for none): read only, a hook cannot change it.
        context: the proposed runtime context, `(identifier, text)` each: read only.
        generation: what the step asks the model for.
    """

    texts: tuple[str, ...]
    system: str
    context: tuple[tuple[str, str], ...]
    generation: Generation


class Rejection(Exception):
    """Raised by a pre-step hook to reject the proposed messages; its text says why."""


class InputRejected(TavernError):
    """A pre-step hook rejected the step's input: nothing was admitted and the claimed input is
    back in the inbox (`kept`).

    Attributes:
        reason: the hook's reason (`Rejection`'s text).
        kept: True when claimed input was put back in the inbox (False: the step claimed none).
    """

    def __init__(self, reason: str, kept: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kept = kept


PreStepHook = Callable[[Proposed], Sequence[str] | None]
"""A pre-step hook: returns None to accept the proposed texts as they are, or one replacement
text per claimed item to replace them; raises `Rejection` to reject them (the step stops)."""


def proposed_texts(assembly: Assembly, claimed: Claimed) -> tuple[str, ...]:
    """The texts the step would admit: the assembler's expansion when it gave one per claimed
    item (`Assembly.input`), else the claimed items as typed."""
    batch = claimed.batch
    if assembly.input is not None and len(assembly.input) == len(batch):
        return tuple(assembly.input)
    return tuple(item.content for item in batch)


async def pre_step(log: AsyncSessionLog, session_id: int, assembly: Assembly, claimed: Claimed,
                   generation: Generation, hooks: Sequence[PreStepHook]) -> Assembly:
    """Run `hooks` in order on the proposed input, each seeing the previous one's result. Returns
    the assembly with the accepted texts as its `input` (unchanged when every hook accepted). A
    step without claimed input (a regenerate, a continue) has nothing to propose: hooks do not run.

    Raises:
        InputRejected: a hook raised `Rejection`; the claimed batch is back in the inbox.
        ValueError: a hook replaced the texts with a different number of them (the batch goes back).
        whatever else a hook raises, after the batch is put back.
    """
    if not hooks or not claimed.batch:
        return assembly
    texts = proposed_texts(assembly, claimed)
    accepted = texts
    try:
        for hook in hooks:
            replaced = hook(Proposed(accepted, assembly.system, assembly.context, generation))
            if replaced is None:
                continue
            if len(replaced) != len(accepted) or not all(isinstance(t, str) for t in replaced):
                raise ValueError(f"a pre-step hook replaced {len(accepted)} message(s) with {len(replaced)}: "
                                 "it must give one text per claimed message")
            accepted = tuple(replaced)
    except Rejection as exc:
        kept = await put_back(log, session_id, claimed)
        raise InputRejected(str(exc) or "the input was rejected", kept) from exc
    except BaseException:
        await put_back(log, session_id, claimed)
        raise
    return assembly if accepted == texts else replace(assembly, input=accepted)
