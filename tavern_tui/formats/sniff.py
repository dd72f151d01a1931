"""Provides `sniff_kind`: tells which SillyTavern file a parsed JSON object is (card, world book, preset,
group, chat).

Used so that a world book or preset handed to the card importer gets a clear "this is a world
book, not a card" instead of being mistaken for a V1 card (a V1 card is just an object with
`name`, and Agnai memory books and Chub lorebooks carry a `name` too).
"""

from __future__ import annotations

from typing import Any

from tavern_tui.errors import FormatError
from tavern_tui.formats.jsontypes import loads_bounded

CARD = "character card"
WORLD_BOOK = "world book"
PRESET = "chat-completion preset"
CHAT = "chat log"
PERSONA = "persona"
GROUP = "group"

_PRESET_FIELDS = ("temperature", "top_p", "top_k", "frequency_penalty", "presence_penalty", "openai_max_context",
                  "openai_max_tokens", "main_prompt", "nsfw_prompt", "jailbreak_prompt", "squash_system_messages")
"""Chat-completion preset settings: a preset may carry only some of them (e.g. just a temperature)."""

_CARD_FIELDS = ("first_mes", "description", "personality", "scenario", "mes_example", "char_persona", "char_greeting")


def sniff_kind(obj: Any) -> str | None:
    """Which kind of SillyTavern-ecosystem file `obj` (a parsed JSON value) looks like.

    Rules, in order:
    - `spec` "chara_card_v2"/"chara_card_v3" → character card;
    - a `members` list with `chat_id` or `activation_strategy` (a SillyTavern group definition,
      `groups/<id>.json` as `src/endpoints/groups.js` writes it; it also has `chat_metadata`,
      so it comes before the chat rule) → group;
    - `persona_descriptions` (a SillyTavern persona backup) → persona;
    - `spec` "lorebook_v3", `kind` "memory" (Agnai), `lorebookVersion` (NovelAI), or an
      `entries` dict/list (SillyTavern World Info, Chub and V2 character_book exports) → world book;
    - any V1 card field (`first_mes`, `description`, … or the Pygmalion `char_persona`) → character card;
    - `prompts` list, `prompt_order` or any sampler/limit/legacy prompt setting (SillyTavern
      chat-completion presets, even one holding only a `temperature`) → preset;
    - `chat_metadata` or `user_name` + `character_name` (a chat .jsonl header line) → chat log.

    Returns:
        One of the module's kind names, or None when nothing matches.
    """
    if not isinstance(obj, dict):
        return None
    spec = obj.get("spec")
    if spec in ("chara_card_v2", "chara_card_v3"):
        return CARD
    if isinstance(obj.get("members"), list) and ("chat_id" in obj or "activation_strategy" in obj):
        return GROUP
    # Before the card fields: Agnai and Chub lorebooks carry `name` and `description` too.
    if isinstance(obj.get("persona_descriptions"), dict):
        return PERSONA
    if spec == "lorebook_v3" or obj.get("kind") == "memory" or "lorebookVersion" in obj:
        return WORLD_BOOK
    if isinstance(obj.get("entries"), (dict, list)):
        return WORLD_BOOK
    if any(field in obj for field in _CARD_FIELDS):
        return CARD
    if isinstance(obj.get("personas"), dict):  # a persona backup, perhaps without descriptions
        return PERSONA
    if isinstance(obj.get("prompts"), list) or "prompt_order" in obj or any(k in obj for k in _PRESET_FIELDS):
        return PRESET
    if "chat_metadata" in obj or ("user_name" in obj and "character_name" in obj):
        return CHAT
    return None


def sniff_bytes(data: bytes) -> str | None:
    """The kind of file `data` holds: a PNG is a character card; JSON is sniffed with `sniff_kind`.

    Returns None for anything else (the card importer then explains what is wrong).
    """
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return CARD
    try:
        return sniff_kind(loads_bounded(data.decode("utf-8-sig"), "<sniff>"))
    except (UnicodeDecodeError, ValueError, FormatError):
        return None  # the importer that reads it says what is wrong
