"""B2 `prompt_build`: send → request bytes ready, for a 5,000-message playthrough with a
300-entry book, a persona and a 32k context (issue 16 §6; performance-anchors.md §7 B2).

Each measured build runs what a send runs before the request goes out, without the writes:
`StepRunner.preview` (the playthrough's strategy with its limit, world info over the book, the
persona section, the ST fill and the native fit of the history into 32,768 − 300 tokens), then
each message's trace hash and the `json.dumps` of the body.

Figures: `cold_ms`: the first build of a new service on the same database (books parsed, key
indexes built, the token counter's cache empty), with the step code already imported;
`import_ms`: that import (once per process; the chat's gauge pays it when a chat opens);
`warm_p50_ms` / `warm_p95_ms`: 20 builds, each
with a new input, after that. `used` / `limit` / `dropped`: the fit of the last build.
`cold_cpu_ms` / `warm_cpu_p50_ms`: the same builds in this process's CPU time, which a box shared
with other work inflates less than the wall-clock figures (the targets are wall-clock).
Targets: p95 warm ≤ 25 ms, cold ≤ 150 ms (`ratio_*` = figure / target).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path

from tavern_tui.config import Settings
from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.engine.trace import message_hash
from tavern_tui.providers.demo import DemoProvider
from tavern_tui.service import Tavern
from tavern_tui.text.tokens import DEFAULT_COUNTER

MESSAGES = 5000
ENTRIES = 300
WARM = 20
_WORDS = ("lantern storm river castle forest sword whisper market harbour tower ember frost meadow oath shadow "
          "silver raven bridge candle journey glade healer tea wound path moon").split()


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + "."


def _book(rng: random.Random) -> dict[str, object]:
    entries = {}
    for uid in range(ENTRIES):
        key = f"{rng.choice(_WORDS)}-{uid}"
        entries[str(uid)] = {"uid": uid, "key": [key, f"Name{uid}"], "content": _sentence(rng, 40),
                             "position": uid % 2, "order": uid, "constant": uid % 60 == 0}
    return {"entries": entries}


def _setup(workdir: Path) -> tuple[str, int]:
    rng = random.Random(2)
    db_url = f"sqlite:///{workdir / 'prompt.db'}"
    tavern = Tavern(Settings(db_url=db_url, max_context=32768, max_tokens=300), provider=DemoProvider(delay=0))
    card = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "cards" / "seraphina_chara_ccv3.png"
    book = workdir / "bench_book.json"
    book.write_text(json.dumps(_book(rng)))
    imported_card, imported_book = tavern.imports.import_paths([card, book])
    pid = tavern.playthroughs.new_playthrough(imported_card.id or 0, user_name="Ann").id
    tavern.lore.bind_world_book(imported_book.id, "playthrough", pid)
    document = tavern.persona.persona()
    for _ in range(6):  # ~600 tokens of persona on top of the card's ~1.4k
        document = tavern.persona.edit_persona(document.version, add=_sentence(rng, 70))
    session = tavern.playthroughs.playthrough(pid).session_id
    batch = []
    for i in range(MESSAGES):
        text = _sentence(rng, rng.randint(30, 70))
        if i % 97 == 0:
            text += f" The Name{rng.randrange(ENTRIES)} came up again."
        batch.append(NewEvent(EventKind.USER_MESSAGE if i % 2 == 0 else EventKind.ASSISTANT_MESSAGE,
                              "user" if i % 2 == 0 else "assistant", {"content": text}))
    tavern.store.events.append(session, batch)
    tavern.close()
    return db_url, pid


def _build(tavern: Tavern, pid: int, text: str) -> tuple[float, float, dict[str, object]]:
    """(wall ms, this process's CPU ms, the preview) of one build."""
    start, cpu = time.perf_counter(), time.process_time()
    shown = tavern.steps.preview(pid, text)
    messages = [{k: v for k, v in m.items() if k != "source"} for m in shown["messages"]]
    [message_hash(m) for m in messages]
    json.dumps({"model": "bench", "messages": messages, "stream": True}, ensure_ascii=False).encode("utf-8")
    return (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000, shown


def prompt_build(workdir: Path) -> dict[str, object]:
    """B2: see the module docstring. Target p95 warm ≤ 25 ms, cold ≤ 150 ms."""
    db_url, pid = _setup(workdir)
    DEFAULT_COUNTER.clear()
    tavern = Tavern(Settings(db_url=db_url, max_context=32768, max_tokens=300), provider=DemoProvider(delay=0))
    try:
        # The step code is loaded before the cold build, as in the app (the chat's gauge runs a preview
        # when the chat opens, before any send); its one-off import is reported apart as `import_ms`.
        start = time.perf_counter()
        assert tavern.steps is not None
        imported = (time.perf_counter() - start) * 1000
        cold, cold_cpu, _ = _build(tavern, pid, "Where does the path lead?")
        warm: list[float] = []
        warm_cpu: list[float] = []
        shown: dict[str, object] = {}
        for i in range(WARM):
            took, took_cpu, shown = _build(tavern, pid, f"Tell me about Name{i * 13 % ENTRIES}, please ({i}).")
            warm.append(took)
            warm_cpu.append(took_cpu)
    finally:
        tavern.close()
    warm.sort()
    p95 = warm[min(len(warm) - 1, round(0.95 * (len(warm) - 1)))]
    context = shown.get("context") or {}
    assert isinstance(context, dict)
    return {"messages": MESSAGES, "entries": ENTRIES, "strategy": shown.get("strategy"),
            "used": context.get("used"), "limit": context.get("limit"), "dropped": context.get("dropped_messages"),
            "import_ms": round(imported, 1), "cold_ms": round(cold, 1),
            "warm_p50_ms": round(statistics.median(warm), 1), "warm_p95_ms": round(p95, 1),
            "cold_cpu_ms": round(cold_cpu, 1), "warm_cpu_p50_ms": round(statistics.median(warm_cpu), 1),
            "ratio_warm_p95": round(p95 / 25.0, 2), "ratio_cold": round(cold / 150.0, 2)}
