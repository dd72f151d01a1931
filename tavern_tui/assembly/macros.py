"""Provides the name macros: `{{char}}`, `{{user}}` and the legacy `<BOT>`/`<CHAR>`/`<USER>`.

Rule: SillyTavern `substituteParams` (public/script.js, macros.js) and card spec V1: names are
replaced case-insensitively in every card field. The full macro set arrives with presets.
"""

from __future__ import annotations

import re

_NAME_MACROS = re.compile(r"\{\{\s*(char|user)\s*\}\}|<(BOT|CHAR|USER)>", re.IGNORECASE)


def substitute_names(text: str, char: str, user: str) -> str:
    """Replace `{{char}}`/`<BOT>`/`<CHAR>` with `char` and `{{user}}`/`<USER>` with `user`.

    Case-insensitive (`{{Char}}`, `<bot>` count). Other macros are left as written.
    """
    if not text:
        return text

    def repl(match: re.Match[str]) -> str:
        name = (match.group(1) or match.group(2)).lower()
        return user if name == "user" else char

    return _NAME_MACROS.sub(repl, text)
