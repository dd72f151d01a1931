"""Running MVU commands on a record: `update_variables(text, record)`.

Rules: MagVarUpdate src/function/update_variables.ts `updateVariables` :661-1421 and `applyTemplate` :37-82
(semantics file §5, §7, §8, §10). An erroneous command is skipped with its reason and never stops the batch;
`display_data` starts as a copy of the old `stat_data` and `delta_data` as {}, each change writing its display
string at its path; after the run the schema is reconciled when `stat_data` changed. Macros in the text are
substituted first by the caller's `substitute` (MVU's `substitudeMacros`), the events MVU emits for scripts are
not modelled (no listeners run here).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tavern_tui.mvu.commands import ALIASES, Command, extract_commands, path_fix
from tavern_tui.mvu.jsutil import (
    MISSING,
    clone,
    js_equal,
    js_string,
    js_stringify,
    lodash_get,
    lodash_has,
    lodash_merge,
    lodash_set,
    lodash_unset,
    precision12,
    to_number,
    to_path,
)
from tavern_tui.mvu.schema import clean_up_metadata, generate_schema, reconcile_schema, schema_for_path
from tavern_tui.mvu.values import parse_command_value, trim_quotes

__all__ = ["PLACEHOLDER", "Change", "UpdateOutcome", "apply_template", "is_vwd", "message_after_update",
           "update_variables"]

PLACEHOLDER = "<StatusPlaceHolderImpl/>"
"""What MVU appends to every assistant message it has read (cards' regex scripts draw the status bar there)."""
_STATUS_BLOCK = re.compile(r"<(status_current_variable)>(?:(?!<\1>).)*</(?:\1)?>", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True, slots=True)
class Change:
    """One command that changed `stat_data`: `old`/`new` at `path` (a VWD shows its element 0), `display` the
    string MVU writes to `display_data`/`delta_data` ("" for a one-argument index delete, which writes none)."""

    type: str
    path: str
    old: Any
    new: Any
    reason: str
    display: str

    def to_json(self) -> dict[str, Any]:
        """`{"type", "path", "old", "new", "reason", "display"}` (a missing value is null)."""
        return {"type": self.type, "path": self.path, "old": None if self.old is MISSING else self.old,
                "new": None if self.new is MISSING else self.new, "reason": self.reason, "display": self.display}


@dataclass(frozen=True, slots=True)
class Refusal:
    """A command `updateVariables` skipped: the command's text and MVU's reason."""

    command: str
    reason: str

    def to_json(self) -> dict[str, str]:
        """`{"command", "reason"}`."""
        return {"command": self.command, "reason": self.reason}


@dataclass
class UpdateOutcome:
    """What one `update_variables` run did.

    Attributes:
        record: the record after (a new dict; the input is never changed).
        changed: `stat_data` differs from before (deep comparison; MVU's return value).
        commands: the commands found, aliases resolved, paths fixed, in order.
        changes: each successful change. refused: each skipped command with why (schema violations among them).
    """

    record: dict[str, Any]
    changed: bool
    commands: list[Command] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)


def is_vwd(value: Any) -> bool:
    """`isValueWithDescriptionStatData`: a 2-element array whose element 1 is a string (variable_def.ts:123-139)."""
    return isinstance(value, list) and len(value) == 2 and isinstance(value[1], str)


def apply_template(value: Any, template: Any, strict_array_cast: bool = False, concat: bool = True) -> Any:
    """`applyTemplate`: object value + object template → deep merge, the value winning; array + array →
    concatenated (`concat`) or merged by position; a primitive + array template → `[value]` combined (not with
    `strict_array_cast`); anything else unchanged."""
    if not template:
        return value
    value_object = isinstance(value, dict)
    value_array = isinstance(value, list)
    template_array = isinstance(template, list)
    if value_object and not template_array:
        return lodash_merge({}, clone(template), value)
    if value_array and template_array:
        return value + clone(template) if concat else lodash_merge([], clone(template), value)
    if (value_object or value_array) and template_array != value_array:
        return value
    if not value_object and not value_array and isinstance(template, dict):
        return value
    if not value_object and not value_array and template_array:
        if strict_array_cast:
            return value
        return [value, *clone(template)] if concat else lodash_merge([], clone(template), [value])
    return value


def _show(value: Any) -> str:
    return trim_quotes(js_stringify(value))


def _reason(command: Command) -> str:
    return f"({command.reason})" if command.reason else ""


_NUMERIC = re.compile(r"^\d+$")


def _parse_date(text: str) -> datetime | None:
    """`new Date(text)` for ISO-style dates (what MVU's time strings are); other forms are not dates here."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _iso(moment: datetime) -> str:
    """`Date.toISOString()`."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _is_collection(value: Any) -> bool:
    return isinstance(value, (dict, list))


class _Run:
    def __init__(self, record: dict[str, Any]) -> None:
        self.vars = record
        self.schema = record.get("schema")
        schema = self.schema if isinstance(self.schema, dict) else {}
        self.strict_template = schema.get("strictTemplate") or False
        self.concat = schema.get("concatTemplateArray", True) is not False
        self.strict_set = schema.get("strictSet") or False
        self.changes: list[Change] = []
        self.refused: list[Refusal] = []

    @property
    def stat(self) -> Any:
        return self.vars["stat_data"]

    def refuse(self, command: Command, why: str) -> None:
        self.refused.append(Refusal(command.full_match, why))

    # -- set -------------------------------------------------------------------------------------------
    def set(self, c: Command, path: str) -> str | None:
        if path != "" and not lodash_has(self.stat, path):
            return self.refuse(c, f"Path '{path}' does not exist in stat_data, skipping set command {_reason(c)}")
        old = clone(self.stat) if path == "" else lodash_get(self.stat, path)
        new = parse_command_value(c.args[-1])
        vwd = False
        if (not self.strict_set and isinstance(old, list) and len(old) == 2 and isinstance(old[1], str)
                and not isinstance(old[0], list)):
            previous = clone(old[0])
            number = isinstance(old[0], (int, float)) and not isinstance(old[0], bool)
            old[0] = to_number(new) if number and new is not None else (None if new is MISSING else new)
            old = previous
            vwd = True
        elif isinstance(old, (int, float)) and not isinstance(old, bool) and isinstance(new, str):
            lodash_set(self.stat, path, to_number(new))
        elif path:
            lodash_set(self.stat, path, None if new is MISSING else new)
        else:
            self.vars["stat_data"] = {} if new is MISSING else new
        final = self.stat if path == "" else lodash_get(self.stat, path)
        if vwd:
            final = final[0]
        if not self.strict_set and is_vwd(old) and isinstance(final, list):
            display = f"{_show(old[0])}->{_show(final[0])} {_reason(c)}"
        else:
            display = f"{_show(old)}->{_show(final)} {_reason(c)}"
        self.changes.append(Change("set", path, old, clone(final), c.reason, display))
        return display

    # -- insert ----------------------------------------------------------------------------------------
    def insert(self, c: Command, path: str) -> str | None:
        existing = self.stat if path == "" else lodash_get(self.stat, path)
        target_schema = schema_for_path(self.schema, path)
        why = self._insert_refusal(c, path, existing, target_schema)
        if why:
            return self.refuse(c, why)
        old = clone(existing)
        template = target_schema.get("template") if target_schema and target_schema.get("type") in (
            "array", "object") else None
        if len(c.args) == 2:
            arr_template = template if target_schema and target_schema.get("type") == "array" else None
            display = self._append_or_merge(c, path, arr_template)
            if display is None:
                return None
        else:
            display = self._insert_keyed(c, path, template)
        new = self.stat if path.strip() == "" else lodash_get(self.stat, path)
        if target_schema is not None:
            fresh = generate_schema(clone(new), target_schema)
            lodash_merge(target_schema, fresh)
        clean_up_metadata(new)
        self.changes.append(Change("insert", path, old, clone(new), c.reason, display))
        return display

    def _insert_refusal(self, c: Command, path: str, existing: Any, target_schema: Any) -> str | None:
        """Why MVU skips this insert (a primitive target, a schema forbidding it, no parent), or None."""
        if existing is MISSING or (existing is not None and not _is_collection(existing)):
            return (f"Cannot assign into path '{path}' because it holds a primitive value "
                    f"({_typeof(existing)}). Operation skipped. {_reason(c)}")
        if target_schema:
            if target_schema.get("type") == "object" and target_schema.get("extensible") is False:
                if len(c.args) == 2:
                    return (f"SCHEMA VIOLATION: Cannot merge data into non-extensible object at path "
                            f"'{path}'. {_reason(c)}")
                key = js_string(parse_command_value(c.args[1]))
                if key not in (target_schema.get("properties") or {}):
                    return (f"SCHEMA VIOLATION: Cannot assign new key '{key}' into non-extensible "
                            f"object at path '{path}'. {_reason(c)}")
            elif target_schema.get("type") == "array" and target_schema.get("extensible") is not True:
                return (f"SCHEMA VIOLATION: Cannot assign elements into non-extensible array at path "
                        f"'{path}'. {_reason(c)}")
        elif path != "" and not _truthy(lodash_get(self.stat, ".".join(to_path(path)[:-1]))):
            return f"Cannot assign into non-existent path '{path}' without an extensible parent. {_reason(c)}"
        return None

    def _append_or_merge(self, c: Command, path: str, template: Any) -> str | None:
        """`_.insert(path, value)`: append to an array or merge an object into an object; None when refused."""
        value = parse_command_value(c.args[1])
        collection = self.stat if path == "" else lodash_get(self.stat, path)
        if not _is_collection(collection):  # a null target: created, as MVU does
            collection = [] if isinstance(value, list) else {}
            lodash_set(self.stat, path, collection)
        if isinstance(collection, list):
            value = apply_template(value, template, self.strict_template, self.concat)
            collection.append(None if value is MISSING else value)
            return f"ASSIGNED {js_stringify(value)} into array '{path}' {_reason(c)}"
        if isinstance(value, dict):
            lodash_merge(collection, value)
            return f"MERGED object {js_stringify(value)} into object '{path}' {_reason(c)}"
        kind = "array" if isinstance(value, list) else "non-object"
        return self.refuse(c, f"Cannot merge {kind} into object at '{path}'")

    def _insert_keyed(self, c: Command, path: str, template: Any) -> str:
        """`_.insert(path, key, value)`: splice into an array at an index or set an object's key."""
        value = parse_command_value(c.args[2])
        key = parse_command_value(c.args[1])
        collection = self.stat if path == "" else lodash_get(self.stat, path)
        number = isinstance(key, (int, float)) and not isinstance(key, bool)
        if isinstance(collection, list) and (number or key == "-"):
            at = len(collection) if key == "-" else int(key)
            label = "tail" if key in ("-", -1) else js_string(key)
            value = apply_template(value, template, self.strict_template, self.concat)
            if at < 0:
                at = max(0, len(collection) + at)  # Array.prototype.splice counts from the end
            collection.insert(at, None if value is MISSING else value)
            return f"ASSIGNED {js_stringify(value)} into '{path}' at index {label} {_reason(c)}"
        if isinstance(collection, dict):
            value = apply_template(value, template, self.strict_template, self.concat)
            collection[js_string(key)] = None if value is MISSING else value
            return (f"ASSIGNED key '{js_string(key)}' with value {js_stringify(value)} into object '{path}' "
                    f"{_reason(c)}")
        collection = {}  # a null target: MVU's "CREATED object" branch
        lodash_set(self.stat, path, collection)
        value = apply_template(value, template, self.strict_template, self.concat)
        collection[js_string(key)] = None if value is MISSING else value
        return f"CREATED object at '{path}' and ASSIGNED key '{js_string(key)}' {_reason(c)}"

    # -- delete ----------------------------------------------------------------------------------------
    def delete(self, c: Command, path: str) -> str | None:
        if len(c.args) == 1 and self._delete_index(c, path):
            return ""  # MVU writes no display string for it
        if not lodash_has(self.stat, path):
            return self.refuse(c, f"undefined Path: {path} in _.remove command")
        container_path, key = _removal_target(c, path)
        if key is MISSING:
            return self.refuse(c, f"Could not determine target for deletion for command on path '{path}' {_reason(c)}")
        if container_path != "" and not lodash_has(self.stat, container_path):
            return self.refuse(c, f"Cannot remove from non-existent path '{container_path}'. {_reason(c)}")
        why = _removal_schema_refusal(schema_for_path(self.schema, container_path), container_path, key, c)
        if why:
            return self.refuse(c, why)
        target = parse_command_value(c.args[1]) if len(c.args) > 1 else MISSING
        if target is MISSING:
            old = clone(lodash_get(self.stat, path))
            lodash_unset(self.stat, path)
            display = f"REMOVED path '{path}' {_reason(c)}"
            self.changes.append(Change("delete", path, old, MISSING, c.reason, display))
            return display
        collection = lodash_get(self.stat, path)
        if not _is_collection(collection):
            return self.refuse(c, f"Cannot remove from path '{path}' because it is not an array or object. "
                                  f"Skipping command. {_reason(c)}")
        before = clone(collection)
        display = _remove_from(collection, target, path, c)
        if not display:
            return self.refuse(c, f"Failed to execute remove on '{path}'")
        self.changes.append(Change("delete", path, before, clone(collection), c.reason, display))
        return display

    def _delete_index(self, c: Command, path: str) -> bool:
        """`_.remove('list.3')` with the index in range: the element is spliced out; False = not this case."""
        parts = to_path(path)
        last = parts[-1] if parts else ""
        if not _NUMERIC.match(last):
            return False
        container_path = ".".join(parts[:-1])
        container = lodash_get(self.stat, container_path)
        index = int(last)
        if not (isinstance(container, list) and index < len(container)):
            return False
        before = clone(container)
        del container[index]
        self.changes.append(Change("delete", container_path, before, clone(container), c.reason, ""))
        return True

    # -- add -------------------------------------------------------------------------------------------
    def add(self, c: Command, path: str) -> str | None:
        if not lodash_has(self.stat, path):
            return self.refuse(c, f"Path '{path}' does not exist in stat_data, skipping add command {_reason(c)}")
        initial = clone(lodash_get(self.stat, path))
        current = lodash_get(self.stat, path)
        vwd = is_vwd(current) and not isinstance(current[0], (dict, list)) and current[0] is not None
        operand = current[0] if vwd else current
        moment = None
        if isinstance(operand, str) and to_number(operand) is None:
            moment = _parse_date(operand)
        if len(c.args) != 2:
            return self.refuse(c, f"Invalid number of arguments for _.add on path '{path}' {_reason(c)}")
        delta = parse_command_value(c.args[1])
        delta_number = isinstance(delta, (int, float)) and not isinstance(delta, bool)
        if moment is not None:
            if not delta_number:
                return self.refuse(c, f"Delta '{c.args[1]}' for Date operation is not a number, skipping add command "
                                      f"{_reason(c)}")
            value: Any = _iso(moment + timedelta(milliseconds=delta))
        elif isinstance(operand, (int, float)) and not isinstance(operand, bool):
            if not delta_number:
                return self.refuse(c, f"Delta '{c.args[1]}' is not a number, skipping add command {_reason(c)}")
            value = precision12(operand + delta)
        else:
            return self.refuse(c, f"Path '{path}' value is not a date or number; skipping add command {_reason(c)}")
        if vwd:
            current[0] = value
        else:
            lodash_set(self.stat, path, value)
        final = lodash_get(self.stat, path)
        if vwd:
            display = f"{js_stringify(initial[0])}->{js_stringify(final[0])} {_reason(c)}"
            old, new = initial[0], final[0]
        else:
            display = f"{js_stringify(initial)}->{js_stringify(final)} {_reason(c)}"
            old, new = initial, final
        self.changes.append(Change("add", path, old, clone(new), c.reason, display))
        return display


def _removal_target(c: Command, path: str) -> tuple[str, Any]:
    """The container a remove acts on and the key it removes (MISSING when the path names none)."""
    if len(c.args) > 1:
        key = parse_command_value(c.args[1])
        return path, trim_quotes(key) if isinstance(key, str) else key
    parts = to_path(path)
    last_part = parts.pop() if parts else ""
    if not last_part:
        return path, MISSING
    return ".".join(parts), int(last_part) if _NUMERIC.match(last_part) else last_part


def _removal_schema_refusal(schema: Any, container_path: str, key: Any, c: Command) -> str | None:
    """Why the schema forbids the remove (a non-extensible array, a required key), or None."""
    if not schema:
        return None
    if schema.get("type") == "array":
        if schema.get("extensible") is not True:
            return (f"SCHEMA VIOLATION: Cannot remove element from non-extensible array at path "
                    f"'{container_path}'. {_reason(c)}")
    elif schema.get("type") == "object":
        name = js_string(key)
        prop = (schema.get("properties") or {}).get(name)
        if name in (schema.get("properties") or {}) and isinstance(prop, dict) and prop.get("required") is True:
            return (f"SCHEMA VIOLATION: Cannot remove required key '{name}' from path "
                    f"'{container_path}'. {_reason(c)}")
    return None


def _remove_from(collection: list[Any] | dict[str, Any], target: Any, path: str, c: Command) -> str:
    """Remove `target` (a value or index from an array, an index or key from an object); "" = nothing removed."""
    if isinstance(collection, list):
        number = isinstance(target, (int, float)) and not isinstance(target, bool)
        index = int(target) if number else next((i for i, v in enumerate(collection) if js_equal(v, target)), -1)
        if 0 <= index < len(collection):
            del collection[index]
            return f"REMOVED item from '{path}' {_reason(c)}"
    elif isinstance(target, (int, float)) and not isinstance(target, bool):
        keys = list(collection)
        if 0 <= target < len(keys) and float(target).is_integer():
            name = keys[int(target)]
            del collection[name]
            return f"REMOVED {int(target) + 1}th entry ('{name}') from object '{path}' {_reason(c)}"
    else:
        name = js_string(target)
        if name in collection:
            del collection[name]
            return f"REMOVED key '{name}' from object '{path}' {_reason(c)}"
    return ""


def _typeof(value: Any) -> str:
    if value is MISSING:
        return "undefined"
    if isinstance(value, bool):
        return "boolean"
    return "number" if isinstance(value, (int, float)) else "string" if isinstance(value, str) else "object"


def _truthy(value: Any) -> bool:
    """JavaScript truthiness of a JSON value (MISSING = undefined)."""
    if value is MISSING or value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    if isinstance(value, str):
        return value != ""
    return True


def message_after_update(text: str) -> str:
    """The text MVU stores back for a non-user message it has read (`handleVariablesInMessage`,
    update_variables.ts:1476-1496): `"\\n\\n<StatusPlaceHolderImpl/>"` appended unless the text holds it, then every
    `<status_current_variable>…</status_current_variable>` block (closed by its tag or a bare `</>`) removed.
    User messages are never rewritten."""
    if PLACEHOLDER not in text:
        text += "\n\n" + PLACEHOLDER
    if "<status_current_variable>" in text:  # MVU's check is case-sensitive, its regex is not
        text = _STATUS_BLOCK.sub("", text)
    return text


def update_variables(text: str, record: dict[str, Any], *,
                     substitute: Callable[[str], str] | None = None) -> UpdateOutcome:
    """Run every command of `text` on a copy of `record` (`{stat_data, schema, …}`) and return what happened.

    Args:
        substitute: expands the text's macros first (MVU substitutes them before extracting); None = as is.
    """
    variables = clone(record)
    variables.setdefault("stat_data", {})
    before = clone(variables["stat_data"])
    display_data = clone(variables["stat_data"])
    delta_data: dict[str, Any] = {}
    processed = substitute(text) if substitute is not None else text
    raw = extract_commands(processed)
    commands = [Command(ALIASES.get(c.type, c.type), (path_fix(trim_quotes(c.args[0])), *c.args[1:]), c.reason,
                        c.full_match, c.start) for c in raw]
    run = _Run(variables)
    for command in commands:
        path = command.args[0]
        handler = {"set": run.set, "insert": run.insert, "delete": run.delete, "add": run.add}.get(command.type)
        if handler is None:
            continue  # move: no handler in MVU's switch, a no-op
        try:
            display = handler(command, path)
        except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError) as exc:
            run.refuse(command, f"{type(exc).__name__}: {exc}")
            continue
        if display:
            if isinstance(display_data, (dict, list)):
                lodash_set(display_data, path, display)
            lodash_set(delta_data, path, display)
    variables["display_data"] = display_data
    variables["delta_data"] = delta_data
    if isinstance(variables["stat_data"], dict):
        variables["stat_data"].pop("$internal", None)
    changed = not js_equal(variables["stat_data"], before)
    if changed:
        reconcile_schema(variables)
    return UpdateOutcome(variables, changed, commands, run.changes, run.refused)
