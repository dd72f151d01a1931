"""The variable macros MVU cards use, reading the step's bound snapshot (issue 18 item 2).

Rules: Tavern Helper (JS-Slash-Runner src/function/macro_like.ts `macros`): `{{get_<scope>_variable::path}}` for
the scopes message, chat, character, preset and global = `_.get(variables, _.unescape(path), null)` on the message
variables of the latest message holding some (here: `MacroContext.message_vars`, MVU's record at the head), the
chat variables (`local_vars`), the card's and the preset's Tavern Helper variables (`character_vars`,
`preset_vars`) or the global ones; keys starting with `$` are left out at any depth; a string is given as is,
anything else as `JSON.stringify` (so a missing path is "null"). `{{format_<scope>_variable::path}}`
(`applyFormatVariable`): the same value, a string as is, anything else as `YAML.stringify(value, {blockQuote:
'literal'}).trimEnd()` (`mvu.yamlfmt`), every line after the first indented by as many spaces as the text before
the macro on its line is long (UTF-16 units; several on one line expand left to right, each indented by the
expanded text before it). It matches case-insensitively within one line, after the other macros ran.
`{{getvar::stat_data.…}}`: SillyTavern's
`getvar` reads the chat variable of that exact name; when there is none and the name is a path into the
message variables (ST-Prompt-Template's merged view, message variables included), the value at that path.
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING, Any

from tavern_tui.assembly.macros.jsvalues import js_string, var_get
from tavern_tui.assembly.macros.registry import macro, post_pass
from tavern_tui.mvu.jsutil import MISSING, js_stringify, lodash_get, to_path
from tavern_tui.mvu.yamlfmt import utf16_len, yaml_stringify

if TYPE_CHECKING:
    from tavern_tui.assembly.macros.context import MacroContext
    from tavern_tui.assembly.macros.evaluator import Evaluator
    from tavern_tui.assembly.macros.parser import Macro

__all__ = ["format_variables", "read_variable", "tavern_helper_variables"]

SCOPES = ("message", "chat", "character", "preset", "global")


def _without_dollar(value: Any) -> Any:
    """lodash-omitdeep `omitDeepBy(value, key starts with '$')`."""
    if isinstance(value, dict):
        return {k: _without_dollar(v) for k, v in value.items() if not str(k).startswith("$")}
    if isinstance(value, list):
        return [_without_dollar(v) for v in value]
    return value


def tavern_helper_variables(extensions: Any) -> dict[str, Any]:
    """The `variables` Tavern Helper keeps in a card's or preset's `extensions.tavern_helper` (an object, or the
    list of `[key, value]` pairs it also accepts: `Object.fromEntries`); {} when absent or malformed
    (src/store/settings/character.ts `getSettings`, preset.ts)."""
    settings = extensions.get("tavern_helper") if isinstance(extensions, dict) else None
    if isinstance(settings, list):
        try:
            settings = {str(k): v for k, v in settings}
        except (TypeError, ValueError):
            return {}
    variables = settings.get("variables") if isinstance(settings, dict) else None
    return variables if isinstance(variables, dict) else {}


def _value(store: dict[str, Any], path: str) -> Any:
    """`getWithout$`: the value at `path` (HTML entities unescaped), null when missing, `$` keys left out."""
    value = lodash_get(store, html.unescape(path), None)
    return _without_dollar(None if value is MISSING else value)


def read_variable(store: dict[str, Any], path: str) -> str:
    """`get_*_variable`'s text for `path` in `store`."""
    value = _value(store, path)
    return value if isinstance(value, str) else js_stringify(value)


def _store_of(ctx: MacroContext, scope: str) -> dict[str, Any]:
    return {"message": ctx.message_vars, "chat": ctx.local_vars, "character": ctx.character_vars,
            "preset": ctx.preset_vars, "global": ctx.global_vars}[scope]


_LINE = r"[^\n\r\u2028\u2029]"  # JavaScript's `.`
_FORMAT = rf"({_LINE}*)\{{\{{format_({'|'.join(SCOPES)})_variable::({_LINE}*?)\}}\}}"
_FORMAT_ALL = re.compile(rf"(?:^|(?<=[\n\r\u2028\u2029])){_FORMAT}", re.IGNORECASE)  # JS `^` under `m`
_FORMAT_LAST = re.compile(rf"^{_FORMAT}", re.IGNORECASE)


def _format_one(ctx: MacroContext, prefix: str, scope: str, path: str) -> str:
    earlier = _FORMAT_LAST.match(prefix)
    if earlier:
        prefix = _format_one(ctx, earlier.group(1), earlier.group(2), earlier.group(3)) + prefix[earlier.end():]
    if scope.lower() in ("chat", "global"):
        ctx.reads.add(("local" if scope.lower() == "chat" else "global", path))
    value = _value(_store_of(ctx, scope.lower()), path)
    text = value if isinstance(value, str) else yaml_stringify(value).rstrip()
    return prefix + text.replace("\n", "\n" + " " * utf16_len(prefix))


@post_pass
def format_variables(text: str, ctx: MacroContext) -> str:
    """Expand every `{{format_<scope>_variable::path}}` of `text` (module docstring)."""
    if "format_" not in text.lower():
        return text
    return _FORMAT_ALL.sub(lambda m: _format_one(ctx, m.group(1), m.group(2), m.group(3)), text)


@macro("get_message_variable", min=1, list=True)
@macro("get_chat_variable", min=1, list=True)
@macro("get_character_variable", min=1, list=True)
@macro("get_preset_variable", min=1, list=True)
@macro("get_global_variable", min=1, list=True)
def get_variable(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    """`{{get_<scope>_variable::path}}` (its arguments joined by `::` are the path)."""
    ctx, scope = ev.ctx, name[len("get_"):-len("_variable")]
    if scope in ("chat", "global"):
        ctx.reads.add(("local" if scope == "chat" else "global", "::".join(args)))
    return read_variable(_store_of(ctx, scope), "::".join(args))


@macro("getvar", min=1, max=1)
def getvar(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    """SillyTavern's `{{getvar}}`, falling back to a path into the message variables."""
    ctx, var = ev.ctx, args[0]
    ctx.reads.add(("local", var))
    if var not in ctx.local_vars and ctx.message_vars:
        head = to_path(var)[:1]
        if head and head[0] in ctx.message_vars:
            value = lodash_get(ctx.message_vars, var)
            if value is not MISSING:
                return value if isinstance(value, str) else js_stringify(value)
    return js_string(var_get(ctx.local_vars, var))
