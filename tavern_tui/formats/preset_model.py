"""Provides the model of a SillyTavern chat-completion preset: `ParsedPreset`, its prompts and orders.

SillyTavern 1.18 PromptManager.js and openai.js (format-digest §c): the built-in prompts and
order, the connection fields a preset carries but tavern-tui never keeps, and the settings read
with SillyTavern's defaults (`setting_value`). `presets.parse_preset` builds these objects from
a file and `presets.export_preset` writes them back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from tavern_tui.formats.jsontypes import type_name

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

# Settings with accessors → (kind, default when absent); defaults are SillyTavern 1.18 openai.js
# default_settings (format-digest §c.1).
_IMPERSONATION = ("[Write your next reply from the point of view of {{user}}, using the chat history so far as a "
                  "guideline for the writing style of {{user}}. Don't write as {{char}} or system. Don't describe "
                  "actions of {{char}}.]")
SETTINGS: dict[str, tuple[str, Any]] = {
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
ADAPTER_EFFORTS = ("low", "medium", "high")
"""Reasoning efforts the OpenAI-compatible adapter sends as `reasoning_effort` (the values the
OpenAI chat-completions reference gives every reasoning model). A preset's other levels (ST's
"min", "max") have no value the adapter can know without the model; seed 000 §3: "Unsupported
effort preflight uses the adapter default rather than guessing an alias", so they are not sent."""


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
        kind, default = SETTINGS[key]
        value, _ = setting_value(kind, self.settings.get(key), default)
        return value

    # -- derived views --

    def call_config(self) -> dict[str, Any]:
        """The preset's OpenAI call parameters: temperature, top_p, frequency_penalty,
        presence_penalty, max_tokens (from openai_max_tokens); seed only when >= 0; n only when
        != 1; reasoning_effort only when it is one the adapter sends (`ADAPTER_EFFORTS`); "auto" and
        any other level are left out, the adapter default (seed 000 §3, `config_notes` says so).
        Never messages, model or stop.
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
        if effort in ADAPTER_EFFORTS:
            config["reasoning_effort"] = effort
        return config

    def config_notes(self) -> list[str]:
        """Sentences for the trace's adjustments about call parameters the preset sets but
        `call_config` does not send: a reasoning effort the adapter has no value for."""
        effort = self.reasoning_effort.strip()
        if effort and effort != "auto" and effort not in ADAPTER_EFFORTS:
            return [f"reasoning effort {effort!r} not sent: the OpenAI-compatible adapter sends only "
                    f"{', '.join(ADAPTER_EFFORTS)}, so its default (no reasoning_effort) is used, never a guessed "
                    "alias"]
        return []

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


def setting_value(kind: str, value: Any, default: Any) -> tuple[Any, str | None]:
    """(value to use, problem or None) for a settings key of kind `kind` (`SETTINGS`); None/absent
    → default, silently."""
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
