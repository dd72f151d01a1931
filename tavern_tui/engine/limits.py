"""Provides `DEFAULT_MAX_STEPS`, the tool turn's request limit unless configured: a module of its
own so the config reads it without loading the engine's log and tool types (start-up)."""

from __future__ import annotations

DEFAULT_MAX_STEPS = 4
"""Requests one turn makes at most (the first plus three after tool results) unless configured."""
