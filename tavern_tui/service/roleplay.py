"""Provides `RoleplayService` (`tavern.roleplay`): the per-playthrough out-of-character (OOC)
toggle and the roleplay policy a step's assembler is given.

Roleplay is on unless a playthrough's OOC talk is on (`tavern ooc on|off P`). While roleplay is
on, the configured policy (`[roleplay] policy` / `TAVERN_RP_POLICY`, `Settings.rp_policy`) is sent
as its own system section, identifier `rp:policy` (`assembly.policy`); while OOC is on it is not
sent (seed 000 §7: optional `rp:policy` contributes only while RP is active). The toggle is
control state, kept in the playthrough's meta (`"ooc": true`); it never becomes prompt text.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tavern_tui.config import Settings

if TYPE_CHECKING:  # `ooc_of` is read by the lists before the service (and SQLAlchemy) loads
    from tavern_tui.service.context import ServiceContext

OOC_KEY = "ooc"
"""The playthrough meta key of the toggle (absent or false: roleplay is on)."""


def _meta(text: str | None) -> dict[str, Any]:
    try:
        meta = json.loads(text or "{}")
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}


def ooc_of(meta: str | None) -> bool:
    """Is out-of-character talk on, by a playthrough's (or draft's) meta JSON? Malformed: off."""
    return _meta(meta).get(OOC_KEY) is True


def roleplay_policy(settings: Settings, meta: str | None) -> str:
    """The policy a step of the playthrough with this meta JSON sends: `settings.rp_policy`
    while roleplay is on, "" while OOC is on or when no policy is configured. Pure: no I/O, so
    the step's assembler build may call it with the record it has already read."""
    return "" if ooc_of(meta) else settings.rp_policy.strip()


class RoleplayService:
    """The OOC toggle per playthrough and the policy its steps send.

    Args:
        ctx: the shared settings (`rp_policy`) and store (the playthrough's meta).
    """

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    def ooc(self, playthrough_id: int) -> bool:
        """Is out-of-character talk on in this playthrough? Raises NotFound."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            return ooc_of(uow.playthroughs.get(playthrough_id).meta)

    def set_ooc(self, playthrough_id: int, on: bool) -> bool:
        """Turn out-of-character talk on (the policy is not sent) or off (roleplay: it is sent again)
        from the next step on; returns whether it changed. Nothing already sent changes.
        Raises NotFound."""
        with self.ctx.store.unit_of_work() as uow:
            meta = _meta(uow.playthroughs.get(playthrough_id).meta)
            if (meta.get(OOC_KEY) is True) == on:
                return False
            if on:
                meta[OOC_KEY] = True
            else:
                meta.pop(OOC_KEY, None)
            uow.playthroughs.set_meta(playthrough_id, json.dumps(meta, ensure_ascii=False))
        return True

    def policy(self, playthrough_id: int) -> str:
        """The policy this playthrough's next step sends ("" while OOC is on, or none configured).
        Raises NotFound."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            return roleplay_policy(self.ctx.settings, uow.playthroughs.get(playthrough_id).meta)
