"""Provides `PlaythroughRecord`, a stored playthrough as the store gives it: a plain record with no
database library behind it, so the lists read before the store opens (`list_reads`) give the same
record the repositories give (`repositories.PlaythroughRepository`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class PlaythroughRecord:
    """A stored playthrough; `head_session_id` is the session the chat shows and extends."""

    id: int
    character_id: int
    title: str
    user_name: str
    root_session_id: int
    head_session_id: int
    created_at: datetime
    updated_at: datetime
    meta: str = "{}"
    """JSON text: an imported chat's SillyTavern header and chat_metadata."""
    preset_id: int | None = None
    """The preset bound to this playthrough (None: the built-in default preset)."""
    strategy: str | None = None
    """The applied assembly strategy (None: nothing applied, the compatibility renderer)."""
    archived_at: datetime | None = None
    """When it was archived (hidden from lists, nothing deleted); None: not archived."""
    opening_draft: int | None = None
    """The opening draft whose first send prepared it and is not admitted yet (`models.Playthrough`)."""
