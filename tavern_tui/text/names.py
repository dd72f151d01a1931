"""Provides `substitute_names`: the `{{char}}`/`{{user}}` macros alone, without the macro engine.

World-info scanning, the persona and the basic assembly replace the two names and nothing else;
the full SillyTavern macro engine is `tavern_tui.assembly.macros.substitute`.
"""

from __future__ import annotations

import re

__all__ = ["substitute_names"]

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
