"""SillyTavern's Regex extension: scripts that rewrite message text, world info and reasoning.

Rule source: SillyTavern `public/scripts/extensions/regex/engine.js` (`getRegexedString`,
`runRegexScript`, `filterString`, `sanitizeRegexMacro`), `public/scripts/utils.js`
(`regexFromString`) and the callers in `public/script.js` / `world-info.js`:

- Scripts run in order: global (extension settings), then the character's scoped scripts
  (`data.extensions.regex_scripts`, only once the person allowed them for that character), then
  preset scripts. `disabled`, an empty `findRegex` or a pattern that does not compile: no-op.
- Which scripts a call runs (`getRegexedString`): `markdownOnly` ones when rendering for display,
  `promptOnly` ones when building a prompt, scripts with neither flag only when neither is asked
  (the text is written: a user message when sent, a reply when received; SillyTavern stores that
  result, we keep the raw text in the log and apply this "write" pass on the fly). `isEdit`
  skips scripts without `runOnEdit`. With a depth: skipped when `minDepth` ≥ -1 and depth <
  minDepth, or `maxDepth` ≥ 0 and depth > maxDepth. `placement` must contain the call's.
- Placements: 1 user input, 2 AI output, 3 slash command, 5 world info, 6 reasoning (0 markdown
  display: deprecated).
- `findRegex` (`regexFromString`): `(/?)(.+)\\1([a-z]*)` splits `/pattern/flags`; flags outside
  `gmixXsuUAJ` or repeated make the whole text the pattern. Without `g` only the first match is
  replaced. `substituteRegex` 1 expands macros in the pattern first, 2 expands them with regex
  metacharacters escaped.
- Replacement: `{{match}}` (any case) → `$0`; each `$N` → argument N of JS's replace callback (the
  match, the groups, then offset and the whole string), "" when falsy, with every `trimStrings`
  entry (macros expanded) removed; then macros run over the whole result. `$&`, `$<name>` and
  `$$` are not special (SillyTavern passes a function to `replace`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from functools import partial
from typing import Any

import regex

from tavern_tui.errors import FormatError
from tavern_tui.formats.jsontypes import loads_bounded
from tavern_tui.lore.jsregex import JSRegexError, compile_js_regex
from tavern_tui.lore.matching import DEFAULT_REGEX_TIMEOUT
from tavern_tui.lore.regex_budget import bounded

MAX_SCRIPTS = 500
"""Scripts read from one card or file (more: the rest is refused with a warning)."""

MAX_PATTERN = 20_000
"""Characters of one `findRegex`; longer patterns are not compiled (reported as an error)."""


class Placement(IntEnum):
    """`regex_placement` of engine.js."""

    MD_DISPLAY = 0
    USER_INPUT = 1
    AI_OUTPUT = 2
    SLASH_COMMAND = 3
    WORLD_INFO = 5
    REASONING = 6


PLACEMENT_NAMES = {Placement.MD_DISPLAY: "markdown display", Placement.USER_INPUT: "user input",
                   Placement.AI_OUTPUT: "AI output", Placement.SLASH_COMMAND: "slash command",
                   Placement.WORLD_INFO: "world info", Placement.REASONING: "reasoning"}

WRITE, PROMPT, DISPLAY = "write", "prompt", "display"
"""The three kinds of call: text being written (neither flag), a prompt (`isPrompt`), display (`isMarkdown`)."""


class ScriptFormatError(ValueError):
    """A regex script (or a file of them) is malformed; the message names file, field and reason."""


@dataclass(frozen=True)
class RegexScript:
    """One script, as SillyTavern stores it (`RegexScriptData`, char-data.js).

    Attributes:
        id / name: `id`, `scriptName`.
        find_regex / replace_string / trim_strings: `findRegex`, `replaceString`, `trimStrings`.
        placement: the `placement` numbers it runs at.
        disabled / markdown_only / prompt_only / run_on_edit: the flags of the same names.
        substitute_regex: 0 none, 1 raw macros, 2 escaped macros in `findRegex`.
        min_depth / max_depth: None when absent, null or not a number.
        scope: "global", "scoped" (a card's) or "preset".
    """

    id: str
    name: str
    find_regex: str
    replace_string: str = ""
    trim_strings: tuple[str, ...] = ()
    placement: frozenset[int] = frozenset()
    disabled: bool = False
    markdown_only: bool = False
    prompt_only: bool = False
    run_on_edit: bool = False
    substitute_regex: int = 0
    min_depth: int | None = None
    max_depth: int | None = None
    scope: str = "global"

    def to_json(self) -> dict[str, Any]:
        """The SillyTavern JSON shape (camelCase), as an export file holds it."""
        return {"id": self.id, "scriptName": self.name, "findRegex": self.find_regex,
                "replaceString": self.replace_string, "trimStrings": list(self.trim_strings),
                "placement": sorted(self.placement), "disabled": self.disabled, "markdownOnly": self.markdown_only,
                "promptOnly": self.prompt_only, "runOnEdit": self.run_on_edit,
                "substituteRegex": self.substitute_regex, "minDepth": self.min_depth, "maxDepth": self.max_depth}


def _depth(value: Any) -> int | None:
    # engine.js: `!isNaN(x) && x !== null`; a numeric string passes isNaN too (JS coerces it).
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value) if value == value else None
    if isinstance(value, str):
        try:
            return int(float(value.strip())) if value.strip() else None
        except ValueError:
            return None
    return None


def parse_script(obj: Any, where: str, scope: str = "global") -> RegexScript:
    """One script from its SillyTavern JSON object.

    Raises:
        ScriptFormatError: not an object, or `findRegex` / `replaceString` / `scriptName` /
            `trimStrings` / `placement` of the wrong type (`where` names the file and index).
    """
    if not isinstance(obj, dict):
        raise ScriptFormatError(f"{where}: a regex script must be an object, not {type(obj).__name__}")

    def text(key: str, default: str = "") -> str:
        value = obj.get(key, default)
        if value is None:
            return default
        if not isinstance(value, str):
            raise ScriptFormatError(f"{where}: field {key!r} must be a string, not {type(value).__name__}")
        return value

    trims = obj.get("trimStrings") or []
    if not isinstance(trims, list) or not all(isinstance(t, str) for t in trims):
        raise ScriptFormatError(f"{where}: field 'trimStrings' must be a list of strings")
    placement = obj.get("placement") or []
    if not isinstance(placement, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in placement):
        raise ScriptFormatError(f"{where}: field 'placement' must be a list of numbers")
    try:
        substitute = int(obj.get("substituteRegex") or 0)
    except (TypeError, ValueError):
        raise ScriptFormatError(f"{where}: field 'substituteRegex' must be 0, 1 or 2") from None
    return RegexScript(id=str(obj.get("id") or ""), name=text("scriptName"), find_regex=text("findRegex"),
                       replace_string=text("replaceString"), trim_strings=tuple(trims),
                       placement=frozenset(placement), disabled=bool(obj.get("disabled")),
                       markdown_only=bool(obj.get("markdownOnly")), prompt_only=bool(obj.get("promptOnly")),
                       run_on_edit=bool(obj.get("runOnEdit")), substitute_regex=substitute,
                       min_depth=_depth(obj.get("minDepth")), max_depth=_depth(obj.get("maxDepth")), scope=scope)


def card_scripts(card_data: dict[str, Any], where: str = "card") -> tuple[list[RegexScript], list[str]]:
    """The scoped scripts of a card's normalised `data` (`extensions.regex_scripts`), and a warning per
    script that could not be read (it is left out; the others stay). No scripts: `([], [])`."""
    extensions = card_data.get("extensions") if isinstance(card_data, dict) else None
    raw = extensions.get("regex_scripts") if isinstance(extensions, dict) else None
    if not isinstance(raw, list):
        return [], []
    scripts, warnings = [], []
    for index, obj in enumerate(raw[:MAX_SCRIPTS]):
        try:
            scripts.append(parse_script(obj, f"{where}: extensions.regex_scripts[{index}]", "scoped"))
        except ScriptFormatError as error:
            warnings.append(str(error))
    if len(raw) > MAX_SCRIPTS:
        warnings.append(f"{where}: extensions.regex_scripts: only the first {MAX_SCRIPTS} scripts are read")
    return scripts, warnings


def load_regex_file(data: bytes, file: str) -> list[RegexScript]:
    """The scripts of a SillyTavern regex export (one script object, or an array of them).

    Raises:
        ScriptFormatError: not UTF-8 JSON, not an object/array, a script without `findRegex`
            text, or a malformed field; nothing is returned half-read.
    """
    try:
        obj = loads_bounded(data.decode("utf-8-sig"), file)
    except (UnicodeDecodeError, ValueError, FormatError) as error:
        raise ScriptFormatError(f"{file}: not a JSON regex script file ({error})") from None
    items = obj if isinstance(obj, list) else [obj]
    if not items or len(items) > MAX_SCRIPTS:
        raise ScriptFormatError(f"{file}: a regex file holds 1 to {MAX_SCRIPTS} scripts, found {len(items)}")
    scripts = []
    for index, item in enumerate(items):
        where = f"{file}: script {index}" if isinstance(obj, list) else file
        if not isinstance(item, dict) or not isinstance(item.get("findRegex"), str):
            raise ScriptFormatError(f"{where}: field 'findRegex' is missing (not a SillyTavern regex script)")
        scripts.append(parse_script(item, where, "global"))
    return scripts


def is_regex_file(obj: Any) -> bool:
    """Whether decoded JSON looks like a SillyTavern regex export (has `findRegex` and `scriptName`)."""
    items = obj if isinstance(obj, list) else [obj]
    return bool(items) and all(isinstance(i, dict) and "findRegex" in i and "scriptName" in i for i in items)


# --- the pattern --------------------------------------------------------------------------------

_SPLIT = re.compile(r"(/?)([^\n\r\u2028\u2029]+)\1([a-z]*)", re.IGNORECASE)
_VALID_FLAGS = re.compile(r"^(?!.*?(.).*?\1)[gmixXsuUAJ]+$")


@dataclass(frozen=True)
class FindRegex:
    """A compiled `findRegex`: the pattern, and JS's `g` (replace all) and `y` (sticky) flags."""

    compiled: regex.Pattern[str]
    global_: bool
    sticky: bool
    groups: int


def regex_from_string(text: str) -> FindRegex:
    """SillyTavern's `regexFromString`: `/pattern/flags` or a bare pattern (no flags).

    Raises:
        JSRegexError: the pattern (or its flags) is not valid JavaScript (SillyTavern returns
            undefined and the script does nothing), or longer than `MAX_PATTERN`.
    """
    if len(text) > MAX_PATTERN:
        raise JSRegexError(f"pattern longer than {MAX_PATTERN} characters")
    m = _SPLIT.search(text)
    if m is None:
        raise JSRegexError("empty pattern")
    pattern, flags = m.group(2), m.group(3)
    if flags and not _VALID_FLAGS.match(flags):
        pattern, flags = text, ""  # `RegExp(input)`: the whole text is the pattern
    compiled, sticky = compile_js_regex(pattern, flags)  # x, X, U, A, J are refused by JS too
    return FindRegex(compiled, "g" in flags, sticky, compiled.groups)


_REGEX_META = re.compile(r"[\n\r\t\v\f\0.^$*+?{}\[\]\\/|()]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v", "\f": "\\f", "\0": "\\0"}


def sanitize_regex_macro(value: str) -> str:
    """`sanitizeRegexMacro`: a macro's value with regex metacharacters escaped."""
    return _REGEX_META.sub(lambda m: _ESCAPES.get(m.group(0), "\\" + m.group(0)), value)


_MACRO_SPAN = re.compile(r"\{\{(?:(?!\{\{|\}\}).)*\}\}", re.DOTALL)


def _escaped_macros(text: str, macros: Callable[[str], str]) -> str:
    # substituteParamsExtended(text, {}, sanitizeRegexMacro): each macro's value is escaped.
    return _MACRO_SPAN.sub(lambda m: sanitize_regex_macro(macros(m.group(0))), text)


# --- running ------------------------------------------------------------------------------------

_MATCH_MACRO = re.compile(r"\{\{match\}\}", re.IGNORECASE)
_GROUP_REF = re.compile(r"\$(\d+)")


@dataclass(frozen=True)
class ScriptRun:
    """One script's run on one text: the text after, whether it changed, and an error sentence
    ("" when none: a pattern that does not compile, or a search that ran out of time)."""

    text: str
    changed: bool
    error: str = ""


def _identity(text: str) -> str:
    return text


def run_script(script: RegexScript, text: str, macros: Callable[[str], str] | None = None,
               timeout: float = DEFAULT_REGEX_TIMEOUT) -> ScriptRun:
    """`runRegexScript`: apply one script to `text` (its flags and placement are the caller's
    business, see `applies`). `macros` expands SillyTavern macros (None: left as written).
    A search that takes longer than `timeout` seconds (or the step's regex budget) is abandoned:
    the text is returned unchanged with the error named."""
    if script.disabled or not script.find_regex or not text:
        return ScriptRun(text, False)
    expand = macros or _identity
    source = script.find_regex
    if script.substitute_regex == 1:
        source = expand(source)
    elif script.substitute_regex == 2:
        source = _escaped_macros(source, expand)
    try:
        find = regex_from_string(source)
    except JSRegexError as error:
        return ScriptRun(text, False, f"findRegex does not compile: {error}")
    replace = _MATCH_MACRO.sub("$0", script.replace_string)
    trims = [expand(t) for t in script.trim_strings]

    def arg(m: regex.Match[str], number: int) -> str:
        # The replace callback's arguments: match, groups…, offset, whole string (then named groups).
        if number <= find.groups:
            value = m.group(number)
        elif number == find.groups + 1:
            value = str(m.start()) if m.start() else None  # offset 0 is falsy
        elif number == find.groups + 2:
            value = m.string
        else:
            value = None
        if not value:
            return ""
        for trim in trims:
            if trim:
                value = value.replace(trim, "")
        return value

    def replacement(m: regex.Match[str]) -> str:
        return expand(_GROUP_REF.sub(lambda g: arg(m, int(g.group(1))), replace))

    try:
        if find.sticky:
            out = bounded(timeout, partial(_sticky_sub, find, replacement, text))
        else:
            out = bounded(timeout, partial(find.compiled.sub, replacement, text, count=0 if find.global_ else 1))
    except TimeoutError:
        return ScriptRun(text, False, f"findRegex ran out of time ({timeout * 1000:.0f} ms)")
    return ScriptRun(out, out != text)


def _sticky_sub(find: FindRegex, replacement: Callable[[regex.Match[str]], str], text: str, timeout: float) -> str:
    # `y`: each match must start where the last one ended (at 0 first); without `g`, one match.
    parts, pos, last = [], 0, 0
    while pos <= len(text):
        m = find.compiled.match(text, pos, timeout=timeout)
        if m is None:
            break
        parts += [text[last:m.start()], replacement(m)]
        last = m.end()
        if not find.global_:
            break
        pos = m.end() if m.end() > m.start() else m.end() + 1  # JS steps past an empty match
    return "".join(parts) + text[last:]


def applies(script: RegexScript, mode: str, placement: int, depth: int | None = None, is_edit: bool = False) -> bool:
    """`getRegexedString`'s choice: does `script` run for a call of `mode` (WRITE, PROMPT or DISPLAY)
    at `placement` and message `depth` (0 = the newest; None = no depth limits)?"""
    if script.disabled:
        return False
    if mode == DISPLAY:
        chosen = script.markdown_only
    elif mode == PROMPT:
        chosen = script.prompt_only
    else:
        chosen = not script.markdown_only and not script.prompt_only
    if not chosen or (is_edit and not script.run_on_edit):
        return False
    if depth is not None:
        if script.min_depth is not None and script.min_depth >= -1 and depth < script.min_depth:
            return False
        if script.max_depth is not None and script.max_depth >= 0 and depth > script.max_depth:
            return False
    return placement in script.placement


@dataclass(frozen=True)
class Regexed:
    """A text after the scripts of one call: the text, the names of the scripts that changed it
    (in order), and `(script name, error)` for scripts that failed."""

    text: str
    applied: tuple[str, ...] = ()
    errors: tuple[tuple[str, str], ...] = ()


def regexed(scripts: Iterable[RegexScript], text: str, placement: int, mode: str, depth: int | None = None,
            is_edit: bool = False, macros: Callable[[str], str] | None = None) -> Regexed:
    """`getRegexedString`: run every script that `applies`, in order, each on the previous one's result."""
    applied, errors = [], []
    for script in scripts:
        if not text or not applies(script, mode, placement, depth, is_edit):
            continue
        run = run_script(script, text, macros)
        if run.error:
            errors.append((script.name or script.id, run.error))
        elif run.changed:
            applied.append(script.name or script.id)
            text = run.text
    return Regexed(text, tuple(applied), tuple(errors))


@dataclass(frozen=True)
class ScriptSet:
    """The scripts one playthrough runs, in SillyTavern's order (global, then the character's if
    allowed, then the preset's), with the three passes our log needs.

    SillyTavern stores the WRITE pass's result as the message; we keep the raw text, so the prompt
    is `PROMPT(WRITE(raw))` and the transcript `DISPLAY(WRITE(raw))`. The WRITE pass has no depth
    (SillyTavern runs it when the message is written, without one).
    """

    scripts: tuple[RegexScript, ...] = ()
    blocked: tuple[str, ...] = field(default=())
    """Names of card scripts left out because the person has not allowed them (for the trace)."""

    def __bool__(self) -> bool:
        return bool(self.scripts)

    def _two(self, mode: str, text: str, placement: int, depth: int | None, is_edit: bool,
             macros: Callable[[str], str] | None) -> Regexed:
        first = regexed(self.scripts, text, placement, WRITE, None, is_edit, macros)
        second = regexed(self.scripts, first.text, placement, mode, depth, is_edit, macros)
        return Regexed(second.text, first.applied + second.applied, first.errors + second.errors)

    def for_prompt(self, text: str, placement: int, depth: int | None, *, is_edit: bool = False,
                   macros: Callable[[str], str] | None = None) -> Regexed:
        """What a message of `placement` at `depth` sends (world info: only the PROMPT pass)."""
        if placement == Placement.WORLD_INFO:
            return regexed(self.scripts, text, placement, PROMPT, depth, is_edit, macros)
        return self._two(PROMPT, text, placement, depth, is_edit, macros)

    def for_display(self, text: str, placement: int, depth: int | None, *, is_edit: bool = False,
                    macros: Callable[[str], str] | None = None) -> Regexed:
        """What the transcript shows for a message of `placement` at display `depth`."""
        return self._two(DISPLAY, text, placement, depth, is_edit, macros)


def script_set(global_scripts: Sequence[RegexScript], card: Sequence[RegexScript], allowed: bool,
               preset: Sequence[RegexScript] = ()) -> ScriptSet:
    """The playthrough's `ScriptSet`: card scripts count only when `allowed` (SillyTavern's
    `character_allowed_regex`); otherwise their names are kept in `blocked`."""
    scoped = tuple(card) if allowed else ()
    blocked = () if allowed else tuple(s.name for s in card)
    return ScriptSet((*global_scripts, *scoped, *preset), blocked)
