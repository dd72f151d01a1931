"""SillyTavern macros: `substitute()`, the macro engine (names alone: `tavern_tui.text.names`).

Rule source: SillyTavern 1.18, the macro engine that is on by default (`public/scripts/macros/engine/*`,
`macros/definitions/{core,env,chat,time,variable}-macros.js`), `variables.js`, and the docs page
Usage/macros.md; summarised in format-digest §e.

Syntax (MacroLexer/MacroParser): `{{name}}`, `{{name::a::b}}`, `{{name:arg}}` and `{{name arg}}` (one argument,
which may itself contain `:`/`::`); names are case-insensitive; whitespace around the name and the arguments is
ignored. Macros nest and resolve inside-out; a nested result is one opaque piece of its argument (its `::` never
splits). Anything that is not a known macro with the right number of arguments stays as written (with the macros
nested inside it resolved, as MacroEngine does). `\\{` / `\\}` lose their backslash at the end, so `\\{\\{x\\}\\}` gives
`{{x}}`. Legacy markers `<USER>`, `<BOT>`, `<CHAR>`, `<GROUP>`, `<CHARIFNOTGROUP>` and `{{time_UTC+2}}` are accepted.

Not implemented (left as written): scoped blocks (`{{if}}…{{/if}}`, `{{setvar x}}…{{/setvar}}`), variable
shorthands (`{{.x}}`, `{{$x}}`), filters (`|`), `{{timeDiff}}`, and runtime/template macros (`{{model}}`,
`{{maxPrompt}}`, instruct sequences…).

Safety limits (ours, not ST's): dice N ≤ 100 and M ≤ 1000 (else ""), `{{newline::N}}`/`{{space::N}}` with
N ≤ 1000 (else left as written), and at most `MAX_EXPANSION` characters produced by macros per call; once
spent, the remaining macros are left as written. Parsing is a single stack pass, so the work is linear in the
input plus that budget. Nothing is ever executed or `eval`-ed.

Modules: `engine` (`MacroContext`, `substitute`, the parser and the macro definitions), `jsvalues`
(JavaScript value semantics and the variable store), `moment` (moment.js formatting and durations).
"""

from tavern_tui.assembly.macros.engine import MAX_EXPANSION, MacroContext, substitute
from tavern_tui.assembly.macros.moment import humanize_duration, moment_format

__all__ = ["MAX_EXPANSION", "MacroContext", "humanize_duration", "moment_format", "substitute"]
