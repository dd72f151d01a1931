"""Shared fixtures for the start-up and transcript benchmarks: a database of ~100k events with a
5,000-entry world book bound, and long SillyTavern chats. Seeded, no downloads."""

from __future__ import annotations

import json
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
CARD = CORPUS / "cards" / "seraphina_chara_ccv3.png"

_WORDS = ("the forest hums and the light through the leaves is green and gold while Seraphina tends "
          "the fire and speaks of old roads rivers and the quiet between storms").split()


def words(i: int, n: int = 60) -> str:
    """~`n` words of seeded text with a little Markdown (emphasis every few messages)."""
    out = [_WORDS[(i * 7 + k * 3) % len(_WORDS)] for k in range(n)]
    if i % 3 == 0:
        out[2] = f"*{out[2]}*"
    if i % 5 == 0:
        out[-1] = f"**{out[-1]}**"
    return " ".join(out)


def long_chat(messages: int, words_per: int = 60, salt: str = "") -> bytes:
    """A SillyTavern chat `.jsonl` of `messages` lines (the person first), ~60 words each; every
    20th reply and the last carry 3 swipes."""
    lines = [json.dumps({"user_name": "Ann", "character_name": "Seraphina", "chat_metadata": {}})]
    for i in range(messages):
        user = i % 2 == 0
        text = f"{salt}{i}: " + words(i, words_per)
        line: dict[str, object] = {"name": "Ann" if user else "Seraphina", "is_user": user, "is_system": False,
                                   "send_date": "2024-07-12T01:31:37.000Z", "mes": text}
        if not user and (i % 20 == 1 or i == messages - 1):
            line.update(swipes=[text, text + " (b)", text + " (c)"], swipe_id=0)
        lines.append(json.dumps(line))
    return ("\n".join(lines) + "\n").encode("utf-8")


_CACHE: dict[tuple[int, int], Path] = {}


def start_db(events: int = 100_000, chats: int = 20) -> tuple[Path, dict[str, int]]:
    """`build_start_db` once per process (cold_start and cli_start share it; it takes ~20 s)."""
    import atexit
    import os
    import shutil
    import tempfile

    key = (events, chats)
    if key not in _CACHE:
        folder = Path(tempfile.mkdtemp(prefix="tavern-bench-start-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        # TAVERN_BENCH_START_DB: a folder holding a start.db and ids.json built before (by
        # build_start_db, same arguments), copied instead of built, to re-run quickly.
        built = os.environ.get("TAVERN_BENCH_START_DB")
        if built and (events, chats) == (100_000, 20):
            shutil.copy(Path(built) / "start.db", folder / "start.db")
            shutil.copy(Path(built) / "ids.json", folder / "ids.json")
        else:
            ids = build_start_db(folder / "start.db", events, chats)
            (folder / "ids.json").write_text(json.dumps(ids), encoding="utf-8")
        _CACHE[key] = folder / "start.db"
    path = _CACHE[key]
    return path, json.loads((path.parent / "ids.json").read_text(encoding="utf-8"))


def build_start_db(path: Path, events: int = 100_000, chats: int = 20) -> dict[str, int]:
    """A database at `path` with `chats` imported playthroughs totalling ~`events` events, the
    Seraphina card and a 5,000-entry world book (benchmarks.wi_activation's EN fixture) bound
    to the character. Returns ids: character, playthrough (the newest, 5,000 messages), book."""
    from benchmarks.wi_activation import make_fixture
    from tavern_tui.config import Settings
    from tavern_tui.formats.worldinfo import to_st_json
    from tavern_tui.providers.demo import DemoProvider
    from tavern_tui.service import Tavern

    tavern = Tavern(Settings(db_url=f"sqlite:///{path}"), provider=DemoProvider(delay=0))
    try:
        character = tavern.imports.import_paths([CARD])[0].id or 0
        book, _ = make_fixture("en")
        imported = tavern.lore.import_world_book_bytes(json.dumps(to_st_json(book)).encode("utf-8"), "big-book.json")
        tavern.lore.bind_world_book(imported.id or 0, "character", character)
        per = max(2, events // chats)
        last = 0
        for i in range(chats):
            size = 5000 if i == chats - 1 else per
            last = tavern.chat_files.import_chat_bytes(long_chat(size, salt=f"c{i}/"), f"chat-{i}.jsonl").id or 0
        return {"character": character, "playthrough": last, "book": imported.id or 0}
    finally:
        tavern.close()
