"""A card carrying one costly text in every field, book key and book entry still builds its first
request within bounds: the step's macro budget, the long-key path of the key index, the MVU reader's
text cap and its linear `<initvar>` search hold together, not only one field at a time.

Reproductions (the fuzz benchmark's `hostile_card_step`): `{{newline::1000}}` x 2,000 in every field
and entry took 8.5 s per preview (2 MB keys trimmed in a Python loop, a 2 MB [InitVar] read as YAML);
`_.set(` x 5,000 took 5.2 s (two automata over 30 kB keys, a quadratic `<initvar>` search); 300 nested
`{{if}}` re-parsed 3 MB in 11 calls.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tavern_tui.assembly.macros import LIMIT_MARKER

HOSTILE = ["{{newline::1000}}" * 2000, "_.set(" * 5000, "{{if 1}}" * 300 + "x" + "{{/if}}" * 300, "/a{99999999}/"]


def _card(corpus_dir: Path, text: str, n: int) -> dict:
    card = json.loads((corpus_dir / "cards" / "ai_v3_with_book.json").read_text(encoding="utf-8"))
    data = card["data"]
    for field in ("description", "first_mes", "scenario"):
        data[field] = text
    for entry in data["character_book"]["entries"]:
        entry["keys"] = [text, "hello"]
        entry["content"] = text
    data["name"] = f"Hostile {n}"
    return card


def test_one_costly_text_everywhere_in_a_card_builds_within_bounds(corpus_dir: Path, tmp_path: Path) -> None:
    # Bounds, not timings: one subprocess with 2 GiB of address space and a generous timeout.
    paths = []
    for n, text in enumerate(HOSTILE):
        path = tmp_path / f"hostile{n}.json"
        path.write_text(json.dumps(_card(corpus_dir, text, n)), encoding="utf-8")
        paths.append(str(path))
    script = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from tavern_tui.config import Settings
        from tavern_tui.errors import TavernError
        from tavern_tui.service import Tavern
        tavern = Tavern(Settings(db_url="sqlite:///{tmp_path / 'h.db'}"))
        for path in {paths!r}:
            [result] = tavern.imports.import_paths([path])
            pid = tavern.playthroughs.new_playthrough(result.id).id
            try:
                request = tavern.steps.preview(pid, "hello there")
            except TavernError as exc:
                print("refused", str(exc).splitlines()[0][:60])
            else:
                print("built", sum({LIMIT_MARKER.split("{")[0]!r} in str(m) for m in request["messages"]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 4, done.stdout
    assert lines[0].startswith("built ")  # newlines only: trimmed away wherever they were expanded
    assert lines[1].startswith("refused the request does not fit the context")  # 27 entries of 30 kB
    assert lines[2].startswith("built ") and int(lines[2].split()[1]) > 0  # nesting stopped at the marker
    assert lines[3] == "built 0"  # the regex bomb key is refused, the text around it is plain
