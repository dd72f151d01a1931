"""SillyTavern macros: `substitute()`, the macro engine (names alone: `tavern_tui.text.names`).

Rule source: SillyTavern 1.18, the macro engine that is on by default (`public/scripts/macros/engine/*`:
MacroLexer, MacroParser, MacroCstWalker, MacroEngine, MacroRegistry; `macros/definitions/*.js`), `variables.js`
and the docs page Usage/macros.md; summarised in format-digest §e. Where docs and code differ the code is
followed (tests/assembly/test_macros_st118.py pins each difference).

Pipeline (MacroEngine.evaluate): pre-processors (`{{time_UTC+2}}` ⇒ `{{time::UTC+2}}`; `<USER>`, `<BOT>`,
`<CHAR>`, `<GROUP>`, `<CHARIFNOTGROUP>` ⇒ macros) → parse (`parser`: a real lexer-mode scanner and grammar) →
walk (scoped blocks paired per sibling list, arguments evaluated left to right before their macro, i.e. nesting
resolves inside out; a nested result is one opaque piece of its argument) → post-processors (`\\{`/`\\}` lose
their backslash; `{{trim}}` removes itself and adjacent newlines; stray `{{else}}` markers vanish).

Grammar: `{{name}}`, `{{name::a::b}}`, legacy `{{name:arg}}` and `{{name arg}}` (both one argument, which may
contain `:`/`::`); names case-insensitive; whitespace around names and arguments ignored. Scoped blocks
`{{name …}}content{{/name}}`: the content becomes the last argument when the macro can take one more, trimmed
and dedented unless the opener has the `#` flag. `{{if cond}}…{{else}}…{{/if}}` and `{{if::cond::then}}`:
only the chosen branch is evaluated; falsy = "" or off/false/0; `!` negates; a bare 0-argument macro name or a
`.var`/`$var` shorthand as the condition is resolved. Variable shorthands `{{.local}}`/`{{$global}}` with
`= ++ -- += -= || ?? ||= ??= == != > >= < <=`. `{{// comment}}` (may span lines). Unknown macros, arity errors
and broken syntax stay exactly as written (with their nested macros resolved).

Safety limits (ours, not ST's): nesting deeper than `parser.MAX_DEPTH` stays text; at most `MAX_EXPANSION`
characters produced and `MAX_CALLS` macro evaluations per call — past either, evaluation stops, `LIMIT_MARKER`
is inserted and the rest is left as written; every call sharing one context (a step) draws on one
`MacroBudget` (`STEP_CALLS`, `STEP_EXPANSION`, `STEP_REPARSE` in all), so a costly field repeated in
every book key and entry is bounded per step too, and in time by the build's evaluation budget
(`MacroBudget.deadline`, `lore.eval_budget`: past it the marker says the budget is used up); dice
N ≤ 100, M ≤ 1000; `{{newline::N}}`/`{{space::N}}` N ≤ 1000.
Nothing is ever executed or `eval`-ed.

Modules: `parser` (the grammar), `context` (`MacroContext`, `MacroBudget`), `registry` (the definitions'
table and the `@macro` decorator that fills it), `scopes` (scoped-block pairing, the `{{else}}` split),
`evaluator` (the walk, the limits and budgets, pre/post-processors), `handlers` (the macros, one module a
responsibility; importing it completes the table), `engine` (`substitute` and its variants, the history
cache), `jsvalues` (JavaScript value semantics for the variable store), `moment` (moment.js formatting and
durations), `seeded` (`{{pick}}`'s seed), `mvu_macros` (the MVU macros' helpers, from `handlers.mvu`).
"""

from tavern_tui.assembly.macros.engine import (
    LIMIT_MARKER,
    MAX_CALLS,
    MAX_EXPANSION,
    MacroBudget,
    MacroContext,
    history_expander,
    is_falsy,
    substitute,
    substitute_in,
    substitute_readonly,
    trim_scoped,
)
from tavern_tui.assembly.macros.moment import humanize_duration, moment_format

__all__ = ["LIMIT_MARKER", "MAX_CALLS", "MAX_EXPANSION", "MacroBudget", "MacroContext", "history_expander",
           "humanize_duration", "is_falsy", "moment_format", "substitute", "substitute_in",
           "substitute_readonly", "trim_scoped"]
