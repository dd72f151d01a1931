"""World books bound to a preset apply to every playthrough that uses the preset, and only while it
does: `tavern lore bind BOOK --preset NAME`, the request and the header's world-book list (source
"preset"), a playthrough on another preset unaffected, unbinding takes it away."""

from __future__ import annotations

import io
from pathlib import Path

from tavern_tui.cli import main
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

ASKED = "What are the shadowfang beasts?"
ENTRY = 'Ada: "What are Shadowfangs?"'  # entry 1 of the Eldoria book (keys shadowfang, beast, …)


async def _say(tavern: Tavern, playthrough: int, text: str) -> str:
    async for _ in tavern.steps.send(playthrough, text):
        pass
    return "\n".join(str(m["content"]) for m in tavern.ctx.provider.requests[-1].messages)


async def test_a_book_bound_to_a_preset_applies_only_where_the_preset_is_used(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path) -> None:
    [shodan, book, preset] = tavern.imports.import_paths([
        corpus_dir / "cards" / "shodan_v2_pure.png", corpus_dir / "worldbooks" / "eldoria_st_staging.json",
        corpus_dir / "presets" / "st_openai_default_staging.json"])
    assert shodan.id is not None and book.id is not None and preset.id is not None
    with_preset = tavern.playthroughs.new_playthrough(shodan.id, user_name="Ada").id
    without = tavern.playthroughs.new_playthrough(shodan.id, user_name="Ada").id
    tavern.presets.bind_preset(with_preset, preset.id)
    out = io.StringIO()
    assert main(["--db", tavern.settings.db_url, "lore", "bind", "--id", str(book.id), "--preset", preset.name],
                out=out, err=io.StringIO()) == 0
    assert out.getvalue() == f"{book.name} bound to preset {preset.id}\n"
    for _ in range(3):
        model.enqueue("Noted.")
    assert ENTRY in await _say(tavern, with_preset, ASKED)
    assert ENTRY not in await _say(tavern, without, ASKED)  # its own preset (none) has no books
    assert tavern.lore.unbind_world_book(book.id, "preset", preset.id)
    assert ENTRY not in await _say(tavern, with_preset, ASKED)
