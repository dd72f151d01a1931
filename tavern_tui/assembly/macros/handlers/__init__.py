"""The macros, one module a responsibility, each handler registered by `@registry.macro` on its function:
importing this package fills `registry.DEFS` and `registry.POST_PASSES` (`macros.evaluator` does).

`core` (core-macros.js: blocks, comments, chance), `chat` (names, card fields, chat state), `runtime`
(model, limits, instruct sequences), `time` (time-macros.js), `variables` (variable macros and the
`{{.x}}`/`{{$x}}` shorthands), `mvu` (Tavern Helper's variable macros, `{{getvar}}` included).
"""

from tavern_tui.assembly.macros.handlers import chat, core, mvu, runtime, time, variables

__all__ = ["chat", "core", "mvu", "runtime", "time", "variables"]
