"""The variable macros MVU cards use, reading the step's bound snapshot (issue 18 item 2).

Rules: Tavern Helper (JS-Slash-Runner) `macros`: `{{get_message_variable::path}}`, `{{get_chat_variable::path}}`,
`{{get_global_variable::path}}` = `_.get(variables, _.unescape(path), null)` on the message variables of the
latest message holding some (here: `MacroContext.message_vars`, MVU's record at the head), the chat variables
(`local_vars`) or the global ones; keys starting with `$` are left out at any depth; a string is given as is,
anything else as `JSON.stringify` (so a missing path is "null"). `{{getvar::stat_data.…}}`: SillyTavern's
`getvar` reads the chat variable of that exact name; when there is none and the name is a path into the
message variables (ST-Prompt-Template's merged view, message variables included), the value at that path.
"""

from __future__ import annotations

import html
from typing import Any

from tavern_tui.assembly.macros.engine import EXTERNAL, MacroContext, _macro
from tavern_tui.assembly.macros.jsvalues import js_string, var_get
from tavern_tui.mvu.jsutil import MISSING, js_stringify, lodash_get, to_path

__all__ = ["read_variable"]


def _without_dollar(value: Any) -> Any:
    """lodash-omitdeep `omitDeepBy(value, key starts with '$')`."""
    if isinstance(value, dict):
        return {k: _without_dollar(v) for k, v in value.items() if not str(k).startswith("$")}
    if isinstance(value, list):
        return [_without_dollar(v) for v in value]
    return value


def read_variable(store: dict[str, Any], path: str) -> str:
    """`get_*_variable`'s text for `path` in `store`."""
    value = lodash_get(store, html.unescape(path), None)
    value = _without_dollar(None if value is MISSING else value)
    return value if isinstance(value, str) else js_stringify(value)


def _store_of(ctx: MacroContext, scope: str) -> dict[str, Any]:
    return {"message": ctx.message_vars, "chat": ctx.local_vars, "global": ctx.global_vars}[scope]


def _getter(scope: str):  # noqa: ANN202 - a handler factory
    def handler(ctx: MacroContext, args: list[str]) -> str:
        if scope != "message":
            ctx.reads.add(("local" if scope == "chat" else "global", "::".join(args)))
        return read_variable(_store_of(ctx, scope), "::".join(args))
    return handler


def _getvar(ctx: MacroContext, args: list[str]) -> str:
    name = args[0]
    ctx.reads.add(("local", name))
    if name not in ctx.local_vars and ctx.message_vars:
        head = to_path(name)[:1]
        if head and head[0] in ctx.message_vars:
            value = lodash_get(ctx.message_vars, name)
            if value is not MISSING:
                return value if isinstance(value, str) else js_stringify(value)
    return js_string(var_get(ctx.local_vars, name))


for _scope in ("message", "chat", "global"):
    EXTERNAL[f"mvu_get_{_scope}"] = _getter(_scope)
    _macro(f"get_{_scope}_variable", fn=f"mvu_get_{_scope}", min=1, list=True)
EXTERNAL["mvu_getvar"] = _getvar
_macro("getvar", fn="mvu_getvar", min=1, max=1)
