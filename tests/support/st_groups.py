"""Provides a SillyTavern group definition and group chat built by hand in SillyTavern's shapes
(`groups.js` `/create`; a 1.13+ group chat: a header line, then messages with `original_avatar` as
`script.js` `saveReply` writes them) for the group file tests: two corpus characters (one member by
its card's file name, one by a name-derived avatar), a user line and two replies, one with two
swipes. Not a test module.
"""

from __future__ import annotations

import json
from pathlib import Path

CHAT_ID = "Glade - 2024-12-06@10h00m00s"

# groups.js `/create` output for a two-member group; one member by a card file name the library
# knows (the corpus file), one by a name-derived avatar ("Seraphina.png" → the character Seraphina).
DEFINITION = {
    "id": "1733480000000", "name": "Glade", "members": ["Seraphina.png", "shodan_v2_pure.png"],
    "avatar_url": "img/ai4.png", "allow_self_responses": True, "activation_strategy": 1,
    "generation_mode": 1, "disabled_members": ["shodan_v2_pure.png"], "chat_metadata": {}, "fav": True,
    "chat_id": CHAT_ID, "chats": [CHAT_ID], "auto_mode_delay": 7,
    "generation_mode_join_prefix": "<FIELDNAME>:", "generation_mode_join_suffix": "",
    "hideMutedSprites": True,
}

HEADER = {"chat_metadata": {"note": "kept"}, "user_name": "unused", "character_name": "unused"}
USER = {"name": "Ann", "is_user": True, "is_system": False, "send_date": "2024-12-06T10:00:05.000Z",
        "mes": "Hello, both.", "extra": {}, "force_avatar": "User Avatars/user-default.png"}
SERAPHINA = {
    "extra": {"api": "openai", "model": "gpt-4o"}, "name": "Seraphina", "is_user": False, "is_system": False,
    "send_date": "2024-12-06T10:00:09.000Z", "mes": "Hi, Ann.", "title": "",
    "force_avatar": "/thumbnail?type=avatar&file=Seraphina.png", "original_avatar": "Seraphina.png",
    "swipe_id": 1, "swipes": ["Welcome, traveller.", "Hi, Ann."],
    "swipe_info": [{"send_date": "2024-12-06T10:00:07.000Z", "gen_started": None, "gen_finished": None,
                    "extra": {"api": "openai"}},
                   {"send_date": "2024-12-06T10:00:09.000Z", "gen_started": None, "gen_finished": None,
                    "extra": {"api": "openai", "model": "gpt-4o"}}],
}
SHODAN = {"extra": {}, "name": "Shodan", "is_user": False, "is_system": False,
          "send_date": "2024-12-06T10:00:12.000Z", "mes": "Insect.", "original_avatar": "shodan_v2_pure.png",
          "force_avatar": "/thumbnail?type=avatar&file=shodan_v2_pure.png"}
LINES = [USER, SERAPHINA, SHODAN]


def write_st_group(folder: Path) -> tuple[Path, Path]:
    """The definition (indented by 4, as `/create` writes it) and the chat, in SillyTavern's folders."""
    (folder / "groups").mkdir(parents=True)
    (folder / "group chats").mkdir(parents=True)
    definition = folder / "groups" / "1733480000000.json"
    definition.write_text(json.dumps(DEFINITION, indent=4), encoding="utf-8")
    chat = folder / "group chats" / f"{CHAT_ID}.jsonl"
    chat.write_text("\n".join(json.dumps(line) for line in [HEADER, *LINES]) + "\n", encoding="utf-8")
    return definition, chat
