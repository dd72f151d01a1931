"""Configuration templates: a playthrough's selection intent (strategy snapshot, preset, chat-lore
books, persona) saved under a name and used for a new opening draft; never its messages."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tavern_tui.cli import main
from tavern_tui.errors import NotFound, TavernError
from tavern_tui.service import Tavern


def _cli(tavern: Tavern, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--db", tavern.settings.db_url, *args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_a_template_saved_from_a_playthrough_makes_a_draft_with_its_selections(tavern: Tavern,
                                                                               corpus_dir: Path) -> None:
    [seraphina, shodan, book, preset] = tavern.imports.import_paths([
        corpus_dir / "cards" / "seraphina_chara_ccv3.png", corpus_dir / "cards" / "shodan_v2_pure.png",
        corpus_dir / "worldbooks" / "eldoria_st_staging.json",
        corpus_dir / "presets" / "st_openai_default_staging.json"])
    assert seraphina.id and shodan.id and book.id and preset.id
    played = tavern.playthroughs.new_playthrough(seraphina.id).id
    tavern.presets.bind_preset(played, preset.id)
    tavern.strategies.apply_strategy(played, "preset-roles-first")
    tavern.lore.bind_world_book(book.id, "playthrough", played)
    ann = tavern.persona.new_persona("Ann")
    tavern.persona.use_persona(ann.id, played)
    code, out, _err = _cli(tavern, "template", "save", "cozy", "--from", str(played))
    assert code == 0 and out.startswith("saved cozy · preset-roles-first · preset #")
    code, _out, err = _cli(tavern, "template", "save", "cozy", "--from", str(played))
    assert code == 1 and "a template named 'cozy' exists" in err  # not replaced silently
    code, out, _err = _cli(tavern, "new", "Shodan", "--template", "cozy", "--json")
    assert code == 0, _err
    draft = json.loads(out)
    assert (draft["strategy"], draft["preset_id"], [b["id"] for b in draft["lore"]], draft["user_name"]) == (
        "preset-roles-first", preset.id, [book.id], "Ann")
    # Given selections win over the template's; a template holds no messages, so the draft has no session.
    other = tavern.openings.new_draft("Shodan", template="cozy", strategy="compat", lore=())
    assert other.strategy == "compat" and other.lore_ids == [book.id]
    listed = json.loads(_cli(tavern, "template", "list", "--json")[1])
    assert [(t["name"], t["preset_id"], t["lore"], t["persona_id"]) for t in listed] == [
        ("cozy", preset.id, [book.id], ann.id)]
    with pytest.raises(NotFound, match="no configuration template named 'warm'"):
        tavern.openings.new_draft("Shodan", template="warm")
    with pytest.raises(TavernError, match="needs a name"):
        tavern.templates.save("  ", played)
