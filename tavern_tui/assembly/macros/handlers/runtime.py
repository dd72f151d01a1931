"""The runtime values the caller supplies in `MacroContext.runtime` (by lower-case name): the model, the
token limits, the generation type, the instruct template's sequences and the system prompt.

Rule source: SillyTavern 1.18 `macros/definitions/env-macros.js` and `instruct-macros.js`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tavern_tui.assembly.macros.registry import macro, macros

if TYPE_CHECKING:
    from tavern_tui.assembly.macros.evaluator import Evaluator
    from tavern_tui.assembly.macros.parser import Macro

_RUNTIME_DEFAULTS = {"ismobile": "false", "hasextension": "false"}  # String(isMobile()), String(undefined ?? false)

_RUNTIME_NAMES = (
    ("maxPrompt", "maxPromptTokens"), ("maxContext", "maxContextTokens"), ("maxResponse", "maxResponseTokens"),
    ("model",), ("isMobile",), ("firstDisplayedMessageId",), ("lastGenerationType",))

_INSTRUCT_NAMES = (
    ("instructStoryStringPrefix",), ("instructStoryStringSuffix",), ("instructUserPrefix", "instructInput"),
    ("instructUserSuffix",), ("instructAssistantPrefix", "instructOutput"),
    ("instructAssistantSuffix", "instructSeparator"), ("instructSystemPrefix",), ("instructSystemSuffix",),
    ("instructFirstAssistantPrefix", "instructFirstOutputPrefix"),
    ("instructLastAssistantPrefix", "instructLastOutputPrefix"), ("instructStop",), ("instructUserFiller",),
    ("instructSystemInstructionPrefix",), ("instructFirstUserPrefix", "instructFirstInput"),
    ("instructLastUserPrefix", "instructLastInput"),
    ("defaultSystemPrompt", "instructSystem", "instructSystemPrompt"), ("systemPrompt",),
    ("exampleSeparator", "chatSeparator"), ("chatStart",))


@macro("hasExtension", min=1, max=1)
@macros(_INSTRUCT_NAMES)
@macros(_RUNTIME_NAMES)
def runtime(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    return ev.ctx.runtime.get(name.lower(), _RUNTIME_DEFAULTS.get(name.lower(), ""))
