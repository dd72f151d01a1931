"""Reads and writes SillyTavern chat-completion presets (the "OpenAI" preset JSON, format-digest §c).

A preset is one JSON object: sampler and behaviour settings at the top level, a `prompts` list
(`class Prompt` in SillyTavern 1.18 PromptManager.js) and `prompt_order` groups
(`[{character_id, order: [{identifier, enabled}]}]`). `parse_preset` turns the bytes into a
`ParsedPreset`; `export_preset` gives SillyTavern JSON back. Connection fields (source, model,
URLs, proxy password, …) are never kept. Unknown keys are kept (top level in `settings`, per
prompt in `extra`), so export(parse(x)) equals x minus the connection fields. Pure: bytes in,
objects/dicts out.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any

from tavern_tui.errors import FormatError
from tavern_tui.formats.jsontypes import load_json_object, type_name
from tavern_tui.formats.sniff import PRESET, sniff_kind

ROLES = ("system", "user", "assistant")
RELATIVE, ABSOLUTE = 0, 1  # injection_position (PromptManager.js INJECTION_POSITION)
GLOBAL_ORDER_ID = 100001  # openai.js setupChatCompletionPromptManager: global strategy, dummyId 100001
LEGACY_ORDER_ID = 100000  # PromptManager class default of older layouts

# PromptManager.js promptManagerDefaultPromptOrder == Default.json group 100001.
DEFAULT_ORDER: list[tuple[str, bool]] = [
    ("main", True),
    ("worldInfoBefore", True),
    ("personaDescription", True),
    ("charDescription", True),
    ("charPersonality", True),
    ("scenario", True),
    ("enhanceDefinitions", False),
    ("nsfw", True),
    ("worldInfoAfter", True),
    ("dialogueExamples", True),
    ("chatHistory", True),
    ("jailbreak", True),
]

# Built-in prompts as SillyTavern writes them (Default.json `prompts`; PromptManager.js
# chatCompletionDefaultPrompts has the same items, with `{{charIfNotGroup}}` in main — Default.json's
# `{{char}}` is used here). Read-only: callers get copies.
DEFAULT_PROMPTS: dict[str, dict[str, Any]] = {
    p["identifier"]: p
    for p in (
        {"name": "Main Prompt", "system_prompt": True, "role": "system",
         "content": "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}.",
         "identifier": "main"},
        {"name": "Auxiliary Prompt", "system_prompt": True, "role": "system", "content": "", "identifier": "nsfw"},
        {"identifier": "dialogueExamples", "name": "Chat Examples", "system_prompt": True, "marker": True},
        {"name": "Post-History Instructions", "system_prompt": True, "role": "system", "content": "",
         "identifier": "jailbreak"},
        {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True},
        {"identifier": "worldInfoAfter", "name": "World Info (after)", "system_prompt": True, "marker": True},
        {"identifier": "worldInfoBefore", "name": "World Info (before)", "system_prompt": True, "marker": True},
        {"identifier": "enhanceDefinitions", "role": "system", "name": "Enhance Definitions",
         "content": "If you have more knowledge of {{char}}, add to the character's lore and personality to "
                    "enhance them but keep the Character Sheet's definitions absolute.",
         "system_prompt": True, "marker": False},
        {"identifier": "charDescription", "name": "Char Description", "system_prompt": True, "marker": True},
        {"identifier": "charPersonality", "name": "Char Personality", "system_prompt": True, "marker": True},
        {"identifier": "scenario", "name": "Scenario", "system_prompt": True, "marker": True},
        {"identifier": "personaDescription", "name": "Persona Description", "system_prompt": True, "marker": True},
    )
}

# Connection fields: the provider/model/endpoint part of a preset (openai.js saveOpenAIPreset body;
# `sensitiveFields` are the URL/proxy/header ones). Also every `*_model` key and every `openrouter_*`
# routing key (see `is_connection_field`).
CONNECTION_FIELDS = frozenset({
    "chat_completion_source", "custom_url", "custom_include_body", "custom_exclude_body",
    "custom_include_headers", "reverse_proxy", "proxy_password", "vertexai_region",
    "vertexai_express_project_id", "vertexai_auth_mode", "azure_base_url", "azure_deployment_name",
    "azure_api_version", "workers_ai_account_id", "api_url_scale", "use_alt_scale", "show_external_models",
    "bypass_status_check", "siliconflow_endpoint", "zai_endpoint", "minimax_endpoint",
})

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

# Settings with accessors → (kind, default when absent); defaults are SillyTavern 1.18 openai.js
# default_settings (format-digest §c.1).
_IMPERSONATION = ("[Write your next reply from the point of view of {{user}}, using the chat history so far as a "
                  "guideline for the writing style of {{user}}. Don't write as {{char}} or system. Don't describe "
                  "actions of {{char}}.]")
_SETTINGS: dict[str, tuple[str, Any]] = {
    "temperature": ("number", 1),
    "top_p": ("number", 1),
    "frequency_penalty": ("number", 0),
    "presence_penalty": ("number", 0),
    "openai_max_context": ("int", 4095),
    "openai_max_tokens": ("int", 300),
    "seed": ("int", -1),
    "n": ("int", 1),
    "reasoning_effort": ("text", "auto"),
    "names_behavior": ("names", 0),
    "squash_system_messages": ("bool", False),
    "continue_prefill": ("bool", False),
    "continue_postfix": ("text", " "),
    "wi_format": ("text", "{0}"),
    "scenario_format": ("text", "{{scenario}}"),
    "personality_format": ("text", "{{personality}}"),
    "new_chat_prompt": ("text", "[Start a new Chat]"),
    "new_group_chat_prompt": ("text", "[Start a new group chat. Group members: {{group}}]"),
    "new_example_chat_prompt": ("text", "[Example Chat]"),
    "continue_nudge_prompt": ("text", "[Continue your last message without repeating its original content.]"),
    "group_nudge_prompt": ("text", "[Write the next reply only as {{char}}.]"),
    "impersonation_prompt": ("text", _IMPERSONATION),
    "send_if_empty": ("text", ""),
    "assistant_prefill": ("text", ""),
    "assistant_impersonation": ("text", ""),
}
_NAMES_BEHAVIORS = (-1, 0, 1, 2)  # NONE, DEFAULT, COMPLETION, CONTENT
# openai.js getReasoningEffort for OpenAI-compatible sources (the gpt-5 "minimal" case needs the model).
_EFFORT_MAP = {"min": "low", "max": "high"}


def is_connection_field(key: str) -> bool:
    """True for a provider/model/endpoint key that presets carry but tavern-tui never imports."""
    return key in CONNECTION_FIELDS or key.endswith("_model") or key.startswith("openrouter_")


# --- data --------------------------------------------------------------------------------


@dataclass
class PresetPrompt:
    """One `prompts[]` item (PromptManager.js `class Prompt`, format-digest §c.2).

    `marker` prompts are placeholders the engine fills (chatHistory, charDescription, …); their
    content is ignored. `injection_position` 0 = placed by the order, 1 = inserted into the chat at
    `injection_depth` (ordered by `injection_order`). `injection_trigger` lists generation types
    ([] = all). `enabled` is the prompt's own legacy flag; the order's flag is what counts.
    `extra` holds unknown keys; `raw` the known keys as read, so export writes back the file's own
    spelling of values the parser normalised (role "" → "system", missing keys stay missing).
    """

    identifier: str
    name: str = ""
    role: str = "system"
    content: str = ""
    system_prompt: bool = False
    marker: bool = False
    injection_position: int = RELATIVE
    injection_depth: int = 4
    injection_order: int = 100
    injection_trigger: list[str] = field(default_factory=list)
    forbid_overrides: bool = False
    enabled: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass
class OrderItem:
    """One `prompt_order[].order[]` item: the prompt's place and its on/off switch."""

    identifier: str
    enabled: bool


@dataclass
class ParsedPreset:
    """A chat-completion preset as tavern-tui uses it.

    `order` is the active order (SillyTavern reads group 100001; we fall back to 100000, then to
    `DEFAULT_ORDER`; `order_source` says which). When it comes from the file it is the same list
    object as `orders[id]`, so editing it edits what `export_preset` writes. `settings` holds every
    top-level key except `prompts`, `prompt_order` and connection fields, values as in the file;
    the properties read it with SillyTavern's defaults for absent keys.
    """

    name: str
    prompts: dict[str, PresetPrompt]
    order: list[OrderItem]
    order_source: str
    orders: dict[int, list[OrderItem]]
    settings: dict[str, Any]
    ignored_connection_fields: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    # -- accessors (SillyTavern 1.18 default_settings when absent or unusable) --

    @property
    def temperature(self) -> float:
        return self._setting("temperature")

    @property
    def top_p(self) -> float:
        return self._setting("top_p")

    @property
    def frequency_penalty(self) -> float:
        return self._setting("frequency_penalty")

    @property
    def presence_penalty(self) -> float:
        return self._setting("presence_penalty")

    @property
    def max_context(self) -> int:
        """`openai_max_context`: the whole prompt budget in tokens (default 4095)."""
        return self._setting("openai_max_context")

    @property
    def max_tokens(self) -> int:
        """`openai_max_tokens`: the reply budget in tokens (default 300)."""
        return self._setting("openai_max_tokens")

    @property
    def seed(self) -> int:
        return self._setting("seed")

    @property
    def n(self) -> int:
        return self._setting("n")

    @property
    def reasoning_effort(self) -> str:
        return self._setting("reasoning_effort")

    @property
    def names_behavior(self) -> int:
        """-1 none, 0 default (names only in groups), 1 OpenAI `name` field, 2 always in content."""
        return self._setting("names_behavior")

    @property
    def squash_system_messages(self) -> bool:
        return self._setting("squash_system_messages")

    @property
    def continue_prefill(self) -> bool:
        return self._setting("continue_prefill")

    @property
    def continue_postfix(self) -> str:
        return self._setting("continue_postfix")

    @property
    def wi_format(self) -> str:
        return self._setting("wi_format")

    @property
    def scenario_format(self) -> str:
        return self._setting("scenario_format")

    @property
    def personality_format(self) -> str:
        return self._setting("personality_format")

    @property
    def new_chat_prompt(self) -> str:
        return self._setting("new_chat_prompt")

    @property
    def new_group_chat_prompt(self) -> str:
        return self._setting("new_group_chat_prompt")

    @property
    def new_example_chat_prompt(self) -> str:
        return self._setting("new_example_chat_prompt")

    @property
    def continue_nudge_prompt(self) -> str:
        return self._setting("continue_nudge_prompt")

    @property
    def group_nudge_prompt(self) -> str:
        return self._setting("group_nudge_prompt")

    @property
    def impersonation_prompt(self) -> str:
        return self._setting("impersonation_prompt")

    @property
    def send_if_empty(self) -> str:
        return self._setting("send_if_empty")

    @property
    def assistant_prefill(self) -> str:
        return self._setting("assistant_prefill")

    @property
    def assistant_impersonation(self) -> str:
        return self._setting("assistant_impersonation")

    def _setting(self, key: str) -> Any:
        kind, default = _SETTINGS[key]
        value, _ = _setting_value(kind, self.settings.get(key), default)
        return value

    # -- derived views --

    def call_config(self) -> dict[str, Any]:
        """The preset's OpenAI call parameters: temperature, top_p, frequency_penalty,
        presence_penalty, max_tokens (from openai_max_tokens); seed only when >= 0; n only when
        != 1; reasoning_effort only when set and not "auto" (min → "low", max → "high", as openai.js
        getReasoningEffort does for OpenAI-compatible sources). Never messages, model or stop.
        """
        config: dict[str, Any] = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "frequency_penalty": self.frequency_penalty,
            "presence_penalty": self.presence_penalty,
            "max_tokens": self.max_tokens,
        }
        if self.seed >= 0:
            config["seed"] = self.seed
        if self.n != 1:
            config["n"] = self.n
        effort = self.reasoning_effort.strip()
        if effort and effort != "auto":
            config["reasoning_effort"] = _EFFORT_MAP.get(effort, effort)
        return config

    def enabled_prompts(self, generation_type: str | None = None) -> list[PresetPrompt]:
        """The active order's enabled items that have a prompt, in order (PromptManager.js
        getPromptCollection). A disabled `main` is kept with empty content, as SillyTavern keeps it
        as an anchor for relative inserts (format-digest §c.3). With `generation_type` ("normal",
        "continue", "impersonate", …), prompts whose `injection_trigger` excludes it count as disabled.
        """
        kind = (generation_type or "").strip().lower()
        result: list[PresetPrompt] = []
        for item in self.order:
            prompt = self.prompts.get(item.identifier)
            if prompt is None:
                continue
            triggered = not kind or not prompt.injection_trigger or kind in prompt.injection_trigger
            if item.enabled and triggered:
                result.append(prompt)
            elif item.identifier == "main":
                result.append(replace(prompt, content=""))
        return result


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
      for a marker that simply has no `role` key, as in Default.json);
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
    settings: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in obj.items():
        if key in ("prompts", "prompt_order"):
            continue
        if is_connection_field(key):
            ignored.append(key)
        else:
            settings[key] = copy.deepcopy(value)

    prompts = _read_prompts(obj.get("prompts"), file, warnings)
    from_file = set(prompts)
    if not prompts:
        warnings.append("the preset has no prompts; SillyTavern's built-in prompts are used")
        prompts = {ident: _default_prompt(ident) for ident in DEFAULT_PROMPTS}
    _migrate_legacy(settings, prompts, from_file, warnings)

    orders = _read_orders(obj.get("prompt_order"), file, warnings)
    order_source, order = "default", [OrderItem(ident, enabled) for ident, enabled in DEFAULT_ORDER]
    for group_id in (GLOBAL_ORDER_ID, LEGACY_ORDER_ID):
        if orders.get(group_id):
            order_source, order = str(group_id), orders[group_id]
            break
    if order_source != str(GLOBAL_ORDER_ID) and orders:
        used = f"group {order_source}" if order_source != "default" else "SillyTavern's default"
        warnings.append(f"no usable prompt_order group {GLOBAL_ORDER_ID}; the {used} order is used")
    _check_order(order, prompts, from_file, warnings)

    for key, (setting_kind, default) in _SETTINGS.items():
        if key in settings:
            _, problem = _setting_value(setting_kind, settings[key], default)
            if problem:
                warnings.append(f"{key} {problem}; SillyTavern's default {default!r} is used")

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
        # A marker without a role key is SillyTavern's own shape (Default.json): no warning.
        silent = key == "role" and "role" not in item and item.get("marker") is True
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


def _setting_value(kind: str, value: Any, default: Any) -> tuple[Any, str | None]:
    """(value to use, problem or None) for a settings key; None/absent → default, silently."""
    if value is None:
        return default, None
    if kind in ("number", "int", "names"):
        number: Any = value
        if isinstance(value, str):  # ST pushes preset values through form inputs, then parses them
            try:
                number = float(value)
            except ValueError:
                return default, f"is {value!r}, not a number"
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
            return default, f"is a {type_name(value)}, not a number"
        if kind == "number":
            return number, None
        if number != int(number):
            return default, f"is {value!r}, not a whole number"
        if kind == "names" and int(number) not in _NAMES_BEHAVIORS:
            return default, f"is {value!r}, not -1, 0, 1 or 2"
        return int(number), None
    if kind == "bool":
        if isinstance(value, bool):
            return value, None
        return default, f"is {value!r}, not true or false"
    if kind == "text":
        if isinstance(value, str):
            return value, None
        return default, f"is a {type_name(value)}, not text"
    raise AssertionError(kind)


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
