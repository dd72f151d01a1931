"""The names, the card's fields and the chat's state: `{{user}}`, `{{char}}`, `{{description}}`, `{{input}}`,
`{{lastMessage}}`, `{{greeting}}`, `{{original}}`, `{{allChatRange}}`…

Rule source: SillyTavern 1.18 `macros/definitions/env-macros.js` and `chat-macros.js`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tavern_tui.assembly.macros.registry import macro, macros, whole

if TYPE_CHECKING:
    from tavern_tui.assembly.macros.evaluator import Evaluator
    from tavern_tui.assembly.macros.parser import Macro

_FIELD_NAMES = (
    ("user",), ("char",), ("group", "charIfNotGroup"), ("groupNotMuted",), ("notChar",), ("charPrompt",),
    ("charInstruction",), ("charDescription", "description"), ("charPersonality", "personality"),
    ("charScenario", "scenario"), ("persona",), ("mesExamplesRaw",), ("mesExamples",), ("charDepthPrompt",),
    ("charCreatorNotes", "creatorNotes"), ("charVersion", "version", "char_version"), ("lastMessage",),
    ("lastMessageId",), ("lastUserMessage",), ("lastCharMessage",), ("firstIncludedMessageId",), ("lastSwipeId",),
    ("currentSwipeId",), ("authorsNote",), ("charAuthorsNote",), ("defaultAuthorsNote",), ("summary",))

_FIELDS = {
    "user": "user", "char": "char", "group": "group", "charifnotgroup": "group", "groupnotmuted": "group_not_muted",
    "notchar": "not_char",
    "persona": "persona", "chardescription": "description", "charpersonality": "personality",
    "charscenario": "scenario", "mesexamples": "mes_examples", "mesexamplesraw": "mes_examples_raw",
    "charprompt": "char_prompt", "charinstruction": "char_instruction", "chardepthprompt": "char_depth_prompt",
    "charcreatornotes": "creator_notes", "charversion": "char_version", "input": "input",
    "lastmessage": "last_message", "lastusermessage": "last_user_message", "lastcharmessage": "last_char_message",
    "lastmessageid": "last_message_id", "lastswipeid": "last_swipe_id", "currentswipeid": "current_swipe_id",
    "firstincludedmessageid": "first_included_message_id", "authorsnote": "authors_note",
    "charauthorsnote": "char_authors_note", "defaultauthorsnote": "default_authors_note", "summary": "summary",
}
"""Each field macro's primary name (lower-cased) → the `MacroContext` field it prints."""

_SOLO = {"group": "char", "group_not_muted": "char", "not_char": "user"}
"""The group macros' values outside a group chat (SillyTavern: `{{group}}` is `{{char}}`)."""


@macro("input")
@macros(_FIELD_NAMES)
def field(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    attr = _FIELDS[name.lower()]
    value = getattr(ev.ctx, attr)
    if value is None and attr in _SOLO:  # not a group chat: the names ST falls back to
        value = getattr(ev.ctx, _SOLO[attr])
    if value is None and attr in ev.ctx.lazy:
        value = ev.ctx.lazy[attr]()
        setattr(ev.ctx, attr, value)
    return "" if value is None else str(value)


@macro("charFirstMessage", "greeting", max=1, ints=(0,))
def greeting(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    index = whole(args[0]) if args else 0
    if index == 0:
        return ev.ctx.first_message
    alternates = ev.ctx.alternate_greetings
    return alternates[index - 1] if 0 < index <= len(alternates) else ""


@macro("original")
def original(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str | None:
    if ev.ctx.original is None:
        return None
    if ev.original_used:
        return ""
    ev.original_used = True
    return ev.ctx.original


@macro("allChatRange")
def all_chat_range(ev: Evaluator, name: str, args: list[str], m: Macro, base: int, scoped: bool) -> str:
    n = ev.ctx.chat_length
    return f"0-{n - 1}" if n else ""
