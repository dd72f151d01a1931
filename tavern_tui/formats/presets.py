"""Reads and writes SillyTavern chat-completion presets (the "OpenAI" preset JSON, format-digest §c).

A preset is one JSON object: sampler and behaviour settings at the top level, a `prompts` list
(`class Prompt` in SillyTavern 1.18 PromptManager.js) and `prompt_order` groups
(`[{character_id, order: [{identifier, enabled}]}]`). `parse_preset` turns the bytes into a
`ParsedPreset`; `export_preset` gives SillyTavern JSON back. Connection fields (source, model,
URLs, proxy password, …) are never kept. Unknown keys are kept (top level in `settings`, per
prompt in `extra`), so export(parse(x)) equals x minus the connection fields. Pure: bytes in,
objects/dicts out. The objects (`ParsedPreset`, `PresetPrompt`, `OrderItem`) and SillyTavern's
built-in prompts and order are in `preset_model`.
"""

from __future__ import annotations

import copy
import math
from pathlib import PurePath
from typing import Any

from tavern_tui.errors import FormatError
from tavern_tui.formats.jsontypes import load_json_object, type_name
from tavern_tui.formats.preset_model import (
    ABSOLUTE,
    DEFAULT_ORDER,
    DEFAULT_PROMPTS,
    GLOBAL_ORDER_ID,
    LEGACY_ORDER_ID,
    RELATIVE,
    ROLES,
    SETTINGS,
    OrderItem,
    ParsedPreset,
    PresetPrompt,
    is_connection_field,
    setting_value,
)
from tavern_tui.formats.sniff import PRESET, sniff_kind

# Legacy top-level strings → prompt identifier (pre-PromptManager presets).
_LEGACY_PROMPTS = (("main_prompt", "main"), ("nsfw_prompt", "nsfw"), ("jailbreak_prompt", "jailbreak"))

# Prompt field → (kind, default); "name" defaults to the identifier (format-digest §c.2).
_PROMPT_FIELDS: dict[str, tuple[str, Any]] = {
    "identifier": ("identifier", None),
    "name": ("text", None),
    "role": ("role", "system"),
    "content": ("text", ""),
    "system_prompt": ("bool", False),
    "marker": ("bool", False),
    "injection_position": ("position", RELATIVE),
    "injection_depth": ("depth", 4),
    "injection_order": ("int", 100),
    "injection_trigger": ("triggers", []),
    "forbid_overrides": ("bool", False),
    "enabled": ("bool", True),
}


# --- public API ---------------------------------------------------------------------------


def parse_preset(data: bytes, file: str, name: str | None = None) -> ParsedPreset:
    """Parse a SillyTavern chat-completion preset file (UTF-8 JSON, BOM allowed).

    `name` defaults to the file name without its extension (SillyTavern names presets by file).

    Rules (SillyTavern 1.18 openai.js settingsToUpdate / PromptManager.js / Default.json):
    - connection fields (`is_connection_field`) are listed in `ignored_connection_fields`, not kept;
    - `prompts` absent or empty → `DEFAULT_PROMPTS` (PromptManager sanitizeServiceSettings);
    - legacy `main_prompt` / `nsfw_prompt` / `jailbreak_prompt` text fills the `main` / `nsfw` /
      `jailbreak` prompt when the file lacks it or its content is empty, and leaves `settings`
      (warning); a prompt with its own content keeps it;
    - a prompt role missing, empty, null or unknown → "system" (warning naming the prompt; not
      for a marker with no or an empty role: a marker's role is never used);
    - active order: group 100001, else 100000, else `DEFAULT_ORDER` (our fallback, digest §c.3);
      a group with an empty order counts as absent, as in PromptManager sanitizeServiceSettings;
    - an order item naming a missing built-in prompt gets the `DEFAULT_PROMPTS` one (warning);
      naming any other missing prompt stays in the order and is skipped when sending (warning);
    - `chatHistory` before `main` in the active order is kept (warning);
    - prompts not in the active order are kept, never sent (one warning with the count);
    - duplicate prompt identifiers or order groups: the first wins, as SillyTavern's find() does.

    Raises:
        FormatError(file, reason, field): "" — empty, not UTF-8 (byte offset and line), not JSON
        (line and column), top level not an object, another SillyTavern file kind;
        "prompts" — not a list; "prompts[i]" — not an object; "prompts[i].identifier" — missing,
        empty or not text; "prompts[i].<field>" — content/name not text, injection_trigger not a
        list of text; "prompt_order…" — not a list, group not an object, bad character_id, `order`
        not a list, item not an object, identifier missing or not text, enabled not true/false.
    """
    obj = _load_json(data, file)
    kind = sniff_kind(obj)
    if kind not in (None, PRESET) and "prompts" not in obj and "prompt_order" not in obj:
        raise FormatError(file, f"this is a {kind} file, not a chat-completion preset")
    warnings: list[str] = []
    settings, ignored = _split_settings(obj)

    prompts = _read_prompts(obj.get("prompts"), file, warnings)
    from_file = set(prompts)
    if not prompts:
        warnings.append("the preset has no prompts; SillyTavern's built-in prompts are used")
        prompts = {ident: _default_prompt(ident) for ident in DEFAULT_PROMPTS}
    _migrate_legacy(settings, prompts, from_file, warnings)

    orders = _read_orders(obj.get("prompt_order"), file, warnings)
    order_source, order = _active_order(orders, warnings)
    _check_order(order, prompts, from_file, warnings)
    _warn_bad_settings(settings, warnings)

    return ParsedPreset(
        name=name if name is not None else PurePath(file).stem,
        prompts=prompts,
        order=order,
        order_source=order_source,
        orders=orders,
        settings=settings,
        ignored_connection_fields=ignored,
        warnings=warnings,
    )


def _split_settings(obj: dict) -> tuple[dict[str, Any], list[str]]:
    """The preset's settings (copied) apart from its connection fields, which are only named."""
    settings: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in obj.items():
        if key in ("prompts", "prompt_order"):
            continue
        if is_connection_field(key):
            ignored.append(key)
        else:
            settings[key] = copy.deepcopy(value)
    return settings, ignored


def _active_order(orders: dict[int, list[OrderItem]], warnings: list[str]) -> tuple[str, list[OrderItem]]:
    """The order PromptManager sends (group 100001, else 100000, else the default) and where it came from."""
    order_source, order = "default", [OrderItem(ident, enabled) for ident, enabled in DEFAULT_ORDER]
    for group_id in (GLOBAL_ORDER_ID, LEGACY_ORDER_ID):
        if orders.get(group_id):
            order_source, order = str(group_id), orders[group_id]
            break
    if order_source != str(GLOBAL_ORDER_ID) and orders:
        used = f"group {order_source}" if order_source != "default" else "SillyTavern's default"
        warnings.append(f"no usable prompt_order group {GLOBAL_ORDER_ID}; the {used} order is used")
    return order_source, order


def _warn_bad_settings(settings: dict[str, Any], warnings: list[str]) -> None:
    """Warn of each known setting whose value SillyTavern would replace by its default; the value is kept."""
    for key, (setting_kind, default) in SETTINGS.items():
        if key in settings:
            _, problem = setting_value(setting_kind, settings[key], default)
            if problem:
                warnings.append(f"{key} {problem}; SillyTavern's default {default!r} is used")


def export_preset(preset: ParsedPreset) -> dict:
    """Return SillyTavern preset JSON for `preset`.

    Shape: `settings` (deep-copied, connection fields dropped even if a caller added one), then
    `prompts` (known fields, in the file's spelling where unchanged, plus `extra`), then
    `prompt_order` — the groups as read (edits to `order` included); when `order` is the built-in
    default (no usable group was read), it is written as group 100001, which is also what
    SillyTavern itself adds on loading such a file. Per-group keys other than character_id/order
    and per-item keys other than identifier/enabled are not kept.
    """
    out: dict[str, Any] = {
        key: copy.deepcopy(value) for key, value in preset.settings.items()
        if not is_connection_field(key) and key not in ("prompts", "prompt_order")
    }
    out["prompts"] = [_prompt_to_st(prompt) for prompt in preset.prompts.values()]
    groups = dict(preset.orders)
    if preset.order_source == "default":
        groups[GLOBAL_ORDER_ID] = preset.order
    out["prompt_order"] = [
        {"character_id": group_id,
         "order": [{"identifier": item.identifier, "enabled": item.enabled} for item in items]}
        for group_id, items in groups.items()
    ]
    return out


# --- reading ------------------------------------------------------------------------------


def _load_json(data: bytes, file: str) -> dict:
    if not data.strip():
        raise FormatError(file, "file is empty")
    return load_json_object(data, file)


def _read_prompts(value: Any, file: str, warnings: list[str]) -> dict[str, PresetPrompt]:
    if value is None:
        return {}
    if not isinstance(value, list):
        raise FormatError(file, f"must be a list of prompts, not a {type_name(value)}", "prompts")
    prompts: dict[str, PresetPrompt] = {}
    for i, item in enumerate(value):
        where = f"prompts[{i}]"
        if item is None:  # PromptManager skips null items
            warnings.append(f"{where} is null; skipped")
            continue
        if not isinstance(item, dict):
            raise FormatError(file, f"must be an object, not a {type_name(item)}", where)
        prompt = _build_prompt(item, file, where, warnings)
        if prompt.identifier in prompts:
            warnings.append(f"{where}: duplicate identifier {prompt.identifier!r}; the first one is used")
            continue
        prompts[prompt.identifier] = prompt
    return prompts


def _build_prompt(item: dict, file: str, where: str, warnings: list[str] | None) -> PresetPrompt:
    """A `PresetPrompt` from one raw object; problems go to `warnings` (None: silent)."""
    ident = item.get("identifier")
    if not isinstance(ident, str) or not ident:
        reason = "missing" if ident is None else f"must be non-empty text, not {ident!r}"
        raise FormatError(file, reason, f"{where}.identifier")
    values: dict[str, Any] = {}
    for key, (kind, default) in _PROMPT_FIELDS.items():
        if key == "identifier":
            continue
        try:
            value, problem = _prompt_value(kind, item.get(key), ident if key == "name" else default)
        except ValueError as exc:
            raise FormatError(file, str(exc), f"{where}.{key}") from None
        # A marker's role is never used (the engine fills it: chatHistory, worldInfoBefore, …), so
        # a missing or empty one is no warning (Default.json has none; issue 21 item 6).
        marker = item.get("marker") is True or DEFAULT_PROMPTS.get(ident, {}).get("marker") is True
        silent = key == "role" and marker and item.get("role") in (None, "")
        if problem and warnings is not None and not silent:
            warnings.append(f"prompt {ident!r} ({where}): {key} {problem}")
        values[key] = value
    raw = {key: copy.deepcopy(val) for key, val in item.items() if key in _PROMPT_FIELDS}
    extra = {key: copy.deepcopy(val) for key, val in item.items() if key not in _PROMPT_FIELDS}
    return PresetPrompt(identifier=ident, extra=extra, raw=raw, **values)


def _prompt_value(kind: str, value: Any, default: Any) -> tuple[Any, str | None]:
    """(normalised value, warning or None) for one prompt field; ValueError for a broken value."""
    if kind == "text":
        if value is None:
            return default, None
        if not isinstance(value, str):
            raise ValueError(f"must be text, not a {type_name(value)}")
        return value, None
    if kind == "role":
        if value is None or value == "":
            return "system", f"is {'empty' if value == '' else 'missing'}; sent as system"
        if isinstance(value, str) and value.strip().lower() in ROLES:
            role = value.strip().lower()
            return role, None if role == value else f"{value!r} read as {role!r}"
        return "system", f"{value!r} is not system, user or assistant; sent as system"
    if kind == "bool":
        if value is None or isinstance(value, bool):
            return default if value is None else value, None
        return default, f"must be true or false, not {value!r}; {str(default).lower()} used"
    if kind == "position":
        if value is None:
            return RELATIVE, None
        if value in (RELATIVE, ABSOLUTE) and not isinstance(value, bool):
            return int(value), None
        return RELATIVE, f"{value!r} is not 0 (relative) or 1 (in-chat); placed by the order, as SillyTavern does"
    if kind in ("int", "depth"):
        if value is None:
            return default, None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                and value == int(value) and (kind == "int" or value >= 0):
            return int(value), None
        return default, f"{value!r} is not a {'whole number' if kind == 'int' else 'depth (0 or more)'}; {default} used"
    if kind == "triggers":
        if value is None:
            return [], None
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise ValueError("must be a list of generation types (text)")
        return list(value), None
    raise AssertionError(kind)


def _default_prompt(ident: str) -> PresetPrompt:
    return _build_prompt(copy.deepcopy(DEFAULT_PROMPTS[ident]), "<built-in>", ident, None)


def _migrate_legacy(settings: dict, prompts: dict[str, PresetPrompt], from_file: set[str],
                    warnings: list[str]) -> None:
    """Legacy `main_prompt`-style strings fill prompts the file lacks or left empty (digest §c.1).

    PromptManager.js registerPromptManagerMigration moves the text and deletes the legacy key; so do
    we. Unlike it, a prompt that has its own content keeps it (the legacy key then stays, warned).
    """
    for key, ident in _LEGACY_PROMPTS:
        text = settings.get(key)
        if not isinstance(text, str) or not text.strip():
            continue
        prompt = prompts.get(ident)
        if prompt is None:
            prompt = prompts[ident] = _default_prompt(ident)
        elif ident in from_file and prompt.content:
            warnings.append(f"legacy {key} ignored: the {ident!r} prompt has its own content")
            continue
        prompt.content = text
        del settings[key]
        warnings.append(f"legacy {key} moved into the {ident!r} prompt")


def _read_orders(value: Any, file: str, warnings: list[str]) -> dict[int, list[OrderItem]]:
    if value is None:
        return {}
    if not isinstance(value, list):
        raise FormatError(file, f"must be a list of order groups, not a {type_name(value)}", "prompt_order")
    orders: dict[int, list[OrderItem]] = {}
    for i, group in enumerate(value):
        where = f"prompt_order[{i}]"
        if not isinstance(group, dict):
            raise FormatError(file, f"must be an object, not a {type_name(group)}", where)
        group_id = _character_id(group.get("character_id"), file, f"{where}.character_id")
        items = group.get("order")
        if not isinstance(items, list):
            raise FormatError(file, f"must be a list, not a {type_name(items)}", f"{where}.order")
        order: list[OrderItem] = []
        for j, item in enumerate(items):
            loc = f"{where}.order[{j}]"
            if not isinstance(item, dict):
                raise FormatError(file, f"must be an object, not a {type_name(item)}", loc)
            ident, enabled = item.get("identifier"), item.get("enabled", False)
            if not isinstance(ident, str) or not ident:
                raise FormatError(file, "missing" if ident is None else f"must be non-empty text, not {ident!r}",
                                  f"{loc}.identifier")
            if not isinstance(enabled, bool):
                raise FormatError(file, f"must be true or false, not {enabled!r}", f"{loc}.enabled")
            order.append(OrderItem(ident, enabled))
        if group_id in orders:
            warnings.append(f"{where}: a second group for character_id {group_id}; the first one is used")
            continue
        orders[group_id] = order
    return orders


def _character_id(value: Any, file: str, where: str) -> int:
    # PromptManager compares String(character_id), so "100001" and 100001 are the same group.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise FormatError(file, "missing" if value is None else f"must be a whole number, not {value!r}", where)


def _check_order(order: list[OrderItem], prompts: dict[str, PresetPrompt], from_file: set[str],
                 warnings: list[str]) -> None:
    """Fill missing built-ins the order names; warn about gaps, chatHistory before main, unsent prompts."""
    for item in order:
        if item.identifier in prompts:
            continue
        if item.identifier in DEFAULT_PROMPTS:
            prompts[item.identifier] = _default_prompt(item.identifier)
            if from_file:
                warnings.append(f"the order names {item.identifier!r} but the preset has no such prompt; "
                                "SillyTavern's built-in one is used")
        else:
            warnings.append(f"the order names {item.identifier!r} but the preset has no such prompt; "
                            "it is skipped when sending")
    idents = [item.identifier for item in order]
    if "chatHistory" in idents and "main" in idents and idents.index("chatHistory") < idents.index("main"):
        warnings.append("the order puts 'chatHistory' before 'main'; kept as written, so the main prompt is "
                        "sent after the chat history")
    unsent = len(set(prompts) - set(idents))
    if unsent:
        noun = "prompts are" if unsent != 1 else "prompt is"
        warnings.append(f"{unsent} {noun} not in the active order and will not be sent")


# --- writing ------------------------------------------------------------------------------


def _prompt_to_st(prompt: PresetPrompt) -> dict[str, Any]:
    """Known fields in the file's spelling where the parsed value is unchanged, then `extra`."""
    current = {
        "identifier": prompt.identifier, "name": prompt.name, "role": prompt.role, "content": prompt.content,
        "system_prompt": prompt.system_prompt, "marker": prompt.marker,
        "injection_position": prompt.injection_position, "injection_depth": prompt.injection_depth,
        "injection_order": prompt.injection_order, "injection_trigger": list(prompt.injection_trigger),
        "forbid_overrides": prompt.forbid_overrides, "enabled": prompt.enabled,
    }
    out: dict[str, Any] = {}
    for key, raw_value in prompt.raw.items():
        if key == "identifier" or _normalised(key, raw_value, prompt.identifier) == current[key]:
            out[key] = copy.deepcopy(raw_value)
        else:
            out[key] = current[key]
    for key, value in current.items():
        if key not in out and (not prompt.raw or value != _normalised(key, None, prompt.identifier)):
            out[key] = value
    out["identifier"] = prompt.identifier
    for key, value in prompt.extra.items():
        out.setdefault(key, copy.deepcopy(value))
    return out


def _normalised(key: str, value: Any, ident: str) -> Any:
    kind, default = _PROMPT_FIELDS[key]
    if kind == "identifier":
        return value
    try:
        return _prompt_value(kind, value, ident if key == "name" else default)[0]
    except ValueError:
        return object()  # never equal: the current value is written
