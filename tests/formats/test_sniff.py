"""sniff_kind tells cards from world books, presets and chat logs (shapes from format-digest §a–§d)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.formats.sniff import CARD, CHAT, PRESET, WORLD_BOOK, sniff_kind


@pytest.mark.parametrize(("obj", "kind"), [
    ({"name": "Skynet", "description": "An AI.", "first_mes": "Hi"}, CARD),  # V1
    ({"char_name": "Old", "char_persona": "x", "char_greeting": "y"}, CARD),  # Pygmalion/Gradio
    ({"spec": "chara_card_v2", "data": {"name": "A"}}, CARD),
    ({"spec": "lorebook_v3", "data": {"entries": []}}, WORLD_BOOK),
    ({"entries": {"0": {"key": ["a"], "content": "b"}}}, WORLD_BOOK),  # SillyTavern World Info
    ({"kind": "memory", "name": "Lore", "description": "", "entries": []}, WORLD_BOOK),  # Agnai
    ({"lorebookVersion": 5, "entries": []}, WORLD_BOOK),  # NovelAI
    ({"prompts": [], "prompt_order": [], "temperature": 1}, PRESET),
    ({"chat_metadata": {}, "user_name": "unused", "character_name": "unused"}, CHAT),
    ({"hello": "world"}, None),
    (["not", "an", "object"], None),
])
def test_sniff_kind(obj: object, kind: str | None) -> None:
    assert sniff_kind(obj) == kind


def test_every_corpus_file_is_sniffed_as_its_folder_says(corpus_dir: Path) -> None:
    expected = {"worldbooks": WORLD_BOOK, "presets": PRESET}
    for folder, kind in expected.items():
        for path in sorted((corpus_dir / folder).glob("*.json")):
            assert sniff_kind(json.loads(path.read_text(encoding="utf-8"))) == kind, path.name
    assert sniff_kind(json.loads((corpus_dir / "cards" / "ai_v3_with_book.json").read_text(encoding="utf-8"))) == CARD
