"""Provides hostile-input generators for the importers and the SSE decoder (issue 23 items 6, 9).

Not a test module: `tests/formats/test_fuzz.py` runs them as Hypothesis property tests with a bounded
number of examples, and `python -m benchmarks fuzz` runs them long, reporting inputs, crashes,
hangs and peak memory.

The classes are the ones the fault trial found (issue 23 item 6): JSON nested 150 to 5,000 deep,
lone surrogate escapes, integers of 27, 41, 400 and 4,301+ digits, huge floats and NaN/Infinity,
long strings (a 100k-character `send_date`), wrong types, truncation and random bytes. Each is
put in place of one field of a real file from the shared corpus (cards, world books, presets) or
of a chat / persona backup built the way SillyTavern writes them, so the parser gets past its
first checks and meets the value where it reads it.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tavern_tui.formats.png import write_card_chunks

CORPUS = Path(os.environ.get("TAVERN_TEST_CORPUS") or Path(__file__).resolve().parents[2].parent / "shared" / "corpus")
_HOLE = "@@HOSTILE@@"


def deep(n: int, kind: str) -> str:
    """JSON nested `n` deep: lists, or objects."""
    return "[" * n + "]" * n if kind == "list" else '{"a":' * n + "1" + "}" * n


FRAGMENTS: dict[str, st.SearchStrategy[str]] = {
    "deep": st.builds(deep, st.sampled_from([101, 150, 1000, 5000]), st.sampled_from(["list", "dict"])),
    "surrogate": st.sampled_from(['"cut \\ud83d"', '"\\udc00"', '"a\\ud800b\\udfff"', '{"\\ud800": 1}',
                                  '["\\ude00"]']),
    "big_int": st.builds(lambda digits, sign: sign + "9" * digits, st.sampled_from([27, 41, 400, 4301, 10000]),
                         st.sampled_from(["", "-"])),
    "big_float": st.sampled_from(["1e999", "-1e999", "1" + "0" * 400 + ".5", "1e-999", "NaN", "Infinity",
                                  "-Infinity"]),
    "long_string": st.builds(lambda n, c: json.dumps(c * n), st.sampled_from([10_000, 100_000]),
                             st.sampled_from(["a", "9", " ", "June "])),
    "wrong_type": st.sampled_from(["null", "true", "[]", "{}", '"text"', "0", "-1", "[null]", '{"": ""}']),
    "text": st.text(max_size=40).map(lambda s: json.dumps(s)),
}
"""Raw JSON fragments, by class, each put where a field's value was."""

fragment = st.one_of(*FRAGMENTS.values())


def _paths(obj: Any, prefix: tuple = (), limit: int = 400) -> list[tuple]:
    """Every path (keys/indexes) to a value in `obj`, breadth first, at most `limit`."""
    out: list[tuple] = []
    queue: list[tuple[Any, tuple]] = [(obj, prefix)]
    while queue and len(out) < limit:
        value, path = queue.pop(0)
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, item in items:
            out.append((*path, key))
            queue.append((item, (*path, key)))
    return out


def _put(obj: Any, path: tuple, raw: str) -> str:
    """`obj` as JSON with the value at `path` replaced by the raw fragment `raw`."""
    copy = json.loads(json.dumps(obj))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = _HOLE
    return json.dumps(copy, ensure_ascii=False).replace(json.dumps(_HOLE), raw, 1)


@st.composite
def mutated_json(draw: st.DrawFn, obj: Any) -> str:
    """`obj` (a real file's JSON) with one field's value replaced by a hostile fragment."""
    paths = _paths(obj)
    path = draw(st.sampled_from(paths)) if paths else ()
    raw = draw(fragment)
    return _put(obj, path, raw) if path else raw


def _load(relative: str) -> Any:
    return json.loads((CORPUS / relative).read_text(encoding="utf-8"))


def _png_card_object(png: bytes) -> Any:
    import base64

    from tavern_tui.formats.png import read_text_chunks

    chunks, _ = read_text_chunks(png)
    text = dict(chunks)
    return json.loads(base64.b64decode(text.get("chara") or text["ccv3"]))


def chat_lines() -> list[dict[str, Any]]:
    """A SillyTavern 1.18 chat: header then messages (`saveChat`'s shape)."""
    return [{"user_name": "Ada", "character_name": "Seraphina", "create_date": "2024-07-12@01h31m37s",
             "chat_metadata": {"note_prompt": ""}},
            {"name": "Seraphina", "is_user": False, "is_system": False, "send_date": "July 12, 2024 1:31am",
             "mes": "*She smiles.* Welcome.", "swipes": ["*She smiles.* Welcome.", "Hello."], "swipe_id": 0,
             "swipe_info": [{"send_date": "July 12, 2024 1:31am", "extra": {}}, {"send_date": 1720747897000}],
             "extra": {}},
            {"name": "Ada", "is_user": True, "is_system": False, "send_date": "2024-07-12T01:32:00.000Z",
             "mes": "Where am I?", "extra": {}}]


PERSONA_BACKUP = {"personas": {"ada.png": "Ada"}, "persona_descriptions": {
    "ada.png": {"description": "A traveller.", "position": 0, "depth": 2, "role": 0, "lorebook": ""}},
    "default_persona": "ada.png"}


@st.composite
def hostile_chat(draw: st.DrawFn) -> bytes:
    lines = chat_lines()
    index = draw(st.integers(0, len(lines) - 1))
    text = [json.dumps(line) for line in lines]
    text[index] = draw(mutated_json(lines[index]))
    return ("\n".join(text) + "\n").encode("utf-8", "surrogatepass")


@st.composite
def hostile_png_card(draw: st.DrawFn) -> bytes:
    png = (CORPUS / "cards" / "coding_sensei_v2.png").read_bytes()
    card = _png_card_object(png)
    return write_card_chunks(png, draw(mutated_json(card)), None)


def _as_bytes(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    return strategy.map(lambda s: s.encode("utf-8", "surrogatepass"))


def _truncated(relative: str) -> st.SearchStrategy[bytes]:
    data = (CORPUS / relative).read_bytes()
    return st.integers(0, len(data) - 1).map(lambda n: data[:n])


def _charx_of(card_json: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("card.json", card_json)
    return out.getvalue()


@st.composite
def hostile_charx(draw: st.DrawFn) -> bytes:
    """A CHARX archive: a mutated card.json inside, or a valid archive with bytes flipped or cut."""
    card = json.dumps(_load("cards/ai_v3_with_book.json")).encode()
    kind = draw(st.sampled_from(["inner", "flipped", "cut"]))
    if kind == "inner":
        return _charx_of(draw(mutated_json(_load("cards/ai_v3_with_book.json"))).encode("utf-8", "surrogatepass"))
    data = bytearray(_charx_of(card))
    if kind == "cut":
        return bytes(data[:draw(st.integers(0, len(data) - 1))])
    for _ in range(draw(st.integers(1, 8))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


HOSTILE_TEXTS = [
    "/a{99999999}/", "/(a+)+$/", "/" + "(" * 500 + "a" + ")" * 500 + "/",
    "{{if 1}}" * 300 + "x" + "{{/if}}" * 300, "{{setvar::v::" * 500 + "x" + "}}" * 500,
    "{{newline::1000}}" * 2000, "<% while (true) {} %>", "<%= 'a'.repeat(1e9) %>",
    "_.set(" * 5000, "[InitVar]\na: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b]",
    "{{if 1}}" * 5000 + "x{{/if}}",
]
"""Contents the reliability trial found costly or crashing (regex bombs, deep macros, endless templates,
unclosed MVU commands, a YAML alias bomb), and 5,000 unpaired `{{if}}` openers (each once searched
to the end of the text for its closer), put into a card's fields and its book's keys and entries."""


@st.composite
def hostile_card(draw: st.DrawFn) -> bytes:
    """The corpus's V3 card with hostile texts in its description, greeting and book keys/contents."""
    card = _load("cards/ai_v3_with_book.json")
    data = card["data"]
    for field in ("description", "first_mes", "scenario", "personality", "mes_example"):
        if draw(st.booleans()):
            data[field] = draw(st.sampled_from(HOSTILE_TEXTS))
    for entry in (data.get("character_book") or {}).get("entries") or []:
        if draw(st.booleans()):
            entry["keys"] = [draw(st.sampled_from(HOSTILE_TEXTS)), "hello"]
        if draw(st.booleans()):
            entry["content"] = draw(st.sampled_from(HOSTILE_TEXTS))
    data["name"] = f"Hostile {draw(st.integers(0, 10**9))}"  # a new card each time, not "already imported"
    return json.dumps(card, ensure_ascii=False).encode("utf-8")


def importer_inputs() -> dict[str, tuple[str, st.SearchStrategy[bytes]]]:
    """(file name, strategy of its bytes) per importer, every class mixed in."""
    return {
        "card_json": ("card.json", st.one_of(_as_bytes(mutated_json(_load("cards/ai_v3_with_book.json"))),
                                             _truncated("cards/ai_v3_with_book.json"))),
        "card_png": ("card.png", st.one_of(hostile_png_card(), _truncated("cards/coding_sensei_v2.png"),
                                           st.binary(max_size=256).map(lambda b: b"\x89PNG\r\n\x1a\n" + b))),
        "world_book": ("book.json", st.one_of(_as_bytes(mutated_json(_load("worldbooks/eldoria_st_staging.json"))),
                                              _as_bytes(mutated_json(_load("worldbooks/hogwarts_agnai_memory.json"))),
                                              _truncated("worldbooks/honkai_chub_st_hybrid.json"))),
        "preset": ("preset.json", st.one_of(_as_bytes(mutated_json(_load("presets/st_openai_default_staging.json"))),
                                            _truncated("presets/atelier_1_2.json"))),
        "persona": ("personas.json", _as_bytes(mutated_json(PERSONA_BACKUP))),
        "chat": ("chat.jsonl", st.one_of(hostile_chat(), st.binary(max_size=512))),
        "charx": ("card.charx", hostile_charx()),
        "random": ("file.json", st.binary(max_size=2048)),
    }


def sse_inputs() -> st.SearchStrategy[list[bytes]]:
    """Byte streams cut into chunks anywhere: valid-looking events, CR/LF mixes, BOMs, huge
    lines, invalid UTF-8 and random bytes."""
    piece = st.one_of(
        st.sampled_from([b"data: ", b"data:{\"x\":1}\n\n", b"\r\n", b"\r", b"\n", b"\xef\xbb\xbf", b"event: e\n",
                         b"id: 1\n", b"retry: 99999999999999999999999\n", b": comment\n", b"data: [DONE]\n\n",
                         b"\xff\xfe", b"\xed\xa0\x80"]),
        st.binary(max_size=64),
        st.integers(1, 200_000).map(lambda n: b"data: " + b"a" * n),
    )
    return st.lists(piece, max_size=30)


Check = Callable[[bytes], None]
