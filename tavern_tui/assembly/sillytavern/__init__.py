"""The chat-completion request SillyTavern would send for a preset: `build_prompt(PromptInputs)`.

Modules, in the order a build uses them: `inputs` (the types every step reads), `builder` (the
prompt order, markers and fixed prompts; its builder owns the two helpers), `injections`
(`InChatInjector`: the in-chat injections and the Author's Note) and `budget` (`ChatBudget`: the
chat and the examples fitted into the token budget). Rules: each module's docstring.
"""

from tavern_tui.assembly.sillytavern.budget import (
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    PromptTooLarge,
    parse_example_block,
    sanitize_name,
)
from tavern_tui.assembly.sillytavern.builder import (
    BuiltPrompt,
    build_prompt,
    to_messages,
)
from tavern_tui.assembly.sillytavern.inputs import (
    CHAT_OVERRIDE_KEYS,
    NOTE_BEFORE_PROMPT,
    NOTE_IN_CHAT,
    NOTE_IN_PROMPT,
    ROLES,
    AuthorsNote,
    HistoryMessage,
    PromptInputs,
    PromptPart,
    chat_overrides_from_metadata,
)

__all__ = [
    "CHAT_OVERRIDE_KEYS", "MESSAGE_OVERHEAD", "NOTE_BEFORE_PROMPT", "NOTE_IN_CHAT", "NOTE_IN_PROMPT", "REPLY_PRIMING",
    "ROLES", "AuthorsNote", "BuiltPrompt", "HistoryMessage", "PromptInputs", "PromptPart", "PromptTooLarge",
    "build_prompt", "chat_overrides_from_metadata", "parse_example_block", "sanitize_name", "to_messages",
]
