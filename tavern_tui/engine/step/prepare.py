"""Provides the prepare stage of a step's opening: the provider validates the call config and
binds its adapter before anything is admitted.

Rules: seed 000 §1 ("prepareCall() validates config and binds the adapter", before model-visible
messages are admitted) and DESIGN.md "One step" (a failure admits nothing and leaves the input
queued).
"""

from __future__ import annotations

from tavern_tui.engine.log import AsyncSessionLog
from tavern_tui.engine.step.assemble import put_back
from tavern_tui.engine.step.claim import Claimed
from tavern_tui.engine.step.errors import CallNotPrepared
from tavern_tui.engine.step.types import Assembly
from tavern_tui.engine.stream import CallContext, Provider, prepare_call
from tavern_tui.errors import CallConfigError


async def prepare_adapter(log: AsyncSessionLog, session_id: int, provider: Provider, assembly: Assembly,
                          claimed: Claimed) -> CallContext:
    """`prepare_call` on the assembly's model (else the provider's) and call config. On failure
    nothing of the step has been admitted: the claimed batch goes back to the inbox (`put_back`,
    as when the assembler raises), then the error goes on.

    Returns:
        The adapter context the request is made with (recorded as `request/context`).

    Raises:
        CallNotPrepared: the provider refused the config (`CallConfigError`); its message says
            what to fix, `kept` whether claimed input went back to the inbox.
        whatever else the provider's `prepare` raises, after the batch is put back.
    """
    try:
        return prepare_call(provider, assembly.model or provider.model, assembly.config)
    except CallConfigError as exc:
        kept = await put_back(log, session_id, claimed)
        raise CallNotPrepared(str(exc), kept) from exc
    except BaseException:
        await put_back(log, session_id, claimed)
        raise
