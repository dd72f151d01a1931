"""Provides `RP_POLICY`, the identifier of the roleplay policy section (seed 000 §3, §7: Tavern's
optional `rp:policy` system section, which contributes only while roleplay is on).

The policy text comes from the settings (`[roleplay] policy`); the service passes it to the
assembler as `policy` ("" while a playthrough's out-of-character talk is on, or when none is
configured). Every strategy sends it as its own system section: compat as the last section of
its system prompt, the preset strategies as a system part just before the chat history (inside
the native system section, or its own system message in `projection`). Its attribution part is
`{"kind": "policy", "identifier": "rp:policy"}`; macros in it are expanded like a preset prompt's.
"""

from __future__ import annotations

RP_POLICY = "rp:policy"
"""The section's identifier in `system_parts`, `request_parts` and preview parts."""

POLICY_KIND = "policy"
"""The attribution kind (and `PromptPart.source`) of the section."""
