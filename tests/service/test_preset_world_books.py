"""World books bound to a preset, in the service: a step of a playthrough fires the entries of the
books bound to the preset it uses (not those of another preset's), a book bound in two scopes is
used once, and the effective books come in the order playthrough, persona, preset, global,
character, then the card's own book."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

ASKED = "What are the shadowfang beasts?"
ENTRY = 'Ada: "What are Shadowfangs?"'  # entry 1 of the Eldoria staging book (keys shadowfang, beast, …)


async def _request_text(tavern: Tavern, model: ScriptedModel, playthrough: int, text: str) -> str:
    """Send `text` in the playthrough; the request the model got, its messages joined."""
    model.enqueue("Noted.")
    async for _ in tavern.steps.send(playthrough, text):
        pass
    return "\n".join(str(m["content"]) for m in tavern.ctx.provider.requests[-1].messages)


def _import(tavern: Tavern, *paths: Path) -> list[int]:
    results = tavern.imports.import_paths(list(paths))
    assert all(r.ok and r.id is not None for r in results), [r.error for r in results]
    return [r.id for r in results]  # type: ignore[misc]


def _other_preset(tavern: Tavern, corpus_dir: Path) -> int:
    """A second preset: the corpus's default one under another name and with another temperature."""
    data = json.loads((corpus_dir / "presets" / "st_openai_default_staging.json").read_text(encoding="utf-8"))
    data["temperature"] = 0.5
    result = tavern.presets.import_preset_bytes(json.dumps(data).encode("utf-8"), "other_preset.json")
    assert result.ok and result.id is not None, result.error
    return result.id


def _tiny_book(tavern: Tavern, name: str) -> int:
    """A one-entry world book named `name` (its entry's key is the name)."""
    entry = {"uid": 0, "key": [name], "keysecondary": [], "comment": name, "content": f"About {name}."}
    result = tavern.lore.import_world_book_bytes(json.dumps({"entries": {"0": entry}}).encode("utf-8"), f"{name}.json")
    assert result.ok and result.id is not None, result.error
    return result.id


def _effective(tavern: Tavern, playthrough: int) -> list[tuple[str, str]]:
    """(book name, source) of each effective book of the playthrough, in order."""
    view = tavern.playthroughs.playthrough(playthrough)
    with tavern.store.unit_of_work(write=False) as uow:
        record = uow.characters.get(view.character_id)
    return [(b.book.name, b.source) for b in tavern.lore.effective_books(playthrough, record,
                                                                         tavern.library.card(record))]


async def test_a_preset_books_entries_fire_where_the_preset_is_used_and_not_under_another_preset(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path) -> None:
    shodan, book, preset = _import(tavern, corpus_dir / "cards" / "shodan_v2_pure.png",
                                   corpus_dir / "worldbooks" / "eldoria_st_staging.json",
                                   corpus_dir / "presets" / "st_openai_default_staging.json")
    other = _other_preset(tavern, corpus_dir)
    on_preset = tavern.playthroughs.new_playthrough(shodan, user_name="Ada").id
    on_other = tavern.playthroughs.new_playthrough(shodan, user_name="Ada").id
    tavern.presets.bind_preset(on_preset, preset)
    tavern.presets.bind_preset(on_other, other)
    assert tavern.lore.bind_world_book(book, "preset", preset) is True
    assert tavern.lore.bind_world_book(book, "preset", preset) is False  # already bound there

    assert ENTRY in await _request_text(tavern, model, on_preset, ASKED)
    assert ENTRY not in await _request_text(tavern, model, on_other, ASKED)
    assert _effective(tavern, on_preset) == [("eldoria_st_staging", "preset")]
    assert _effective(tavern, on_other) == []

    tavern.presets.bind_preset(on_other, preset)  # switching the chat's preset brings its books along
    assert ENTRY in await _request_text(tavern, model, on_other, ASKED)


async def test_a_book_bound_to_the_playthrough_and_its_preset_is_used_once(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path) -> None:
    shodan, book, preset = _import(tavern, corpus_dir / "cards" / "shodan_v2_pure.png",
                                   corpus_dir / "worldbooks" / "eldoria_st_staging.json",
                                   corpus_dir / "presets" / "st_openai_default_staging.json")
    playthrough = tavern.playthroughs.new_playthrough(shodan, user_name="Ada").id
    tavern.presets.bind_preset(playthrough, preset)
    tavern.lore.bind_world_book(book, "preset", preset)
    tavern.lore.bind_world_book(book, "playthrough", playthrough)

    assert _effective(tavern, playthrough) == [("eldoria_st_staging", "chat")]  # the first scope keeps it
    assert (await _request_text(tavern, model, playthrough, ASKED)).count(ENTRY) == 1
    decisions = tavern.steps.world_info_preview(playthrough, ASKED).decisions
    shadowfang = [d for d in decisions if d.book == "eldoria_st_staging" and d.uid == 1]
    assert len(shadowfang) == 1 and shadowfang[0].fired  # one decision for the entry, not one per binding


def test_effective_books_come_playthrough_persona_preset_global_character_then_the_card(
        tavern: Tavern, corpus_dir: Path) -> None:
    seraphina, preset = _import(tavern, corpus_dir / "cards" / "seraphina_chara_ccv3.png",
                                corpus_dir / "presets" / "st_openai_default_staging.json")
    playthrough = tavern.playthroughs.new_playthrough(seraphina).id
    tavern.presets.bind_preset(playthrough, preset)
    persona = tavern.persona.find_persona().id
    # Bound in the reverse of the order they apply in: the order is the scopes', not the bindings'.
    ids = {name: _tiny_book(tavern, name) for name in ("by-character", "by-global", "by-preset", "by-persona",
                                                       "by-chat")}
    tavern.lore.bind_world_book(ids["by-character"], "character", seraphina)
    tavern.lore.bind_world_book(ids["by-global"], "global")
    tavern.lore.bind_world_book(ids["by-preset"], "preset", preset)
    tavern.lore.bind_world_book(ids["by-persona"], "persona", persona)
    tavern.lore.bind_world_book(ids["by-chat"], "playthrough", playthrough)
    card_book = tavern.lore.card_book(seraphina)
    assert card_book is not None and card_book[0].name == "Eldoria"  # Seraphina's card carries its own book
    assert _effective(tavern, playthrough) == [("by-chat", "chat"), ("by-persona", "persona"),
                                               ("by-preset", "preset"), ("by-global", "global"),
                                               ("by-character", "character"), ("Eldoria", "character")]

    # Also bound to the preset, the global book moves up to the preset's place (first occurrence
    # wins), after the preset's earlier binding; the character's book, also bound globally, stays
    # in the global place.
    tavern.lore.bind_world_book(ids["by-global"], "preset", preset)
    tavern.lore.bind_world_book(ids["by-character"], "global")
    assert _effective(tavern, playthrough) == [("by-chat", "chat"), ("by-persona", "persona"),
                                               ("by-preset", "preset"), ("by-global", "preset"),
                                               ("by-character", "global"), ("Eldoria", "character")]

    tavern.presets.bind_preset(playthrough, None)  # back on the built-in default: no preset books
    assert [name for name, _ in _effective(tavern, playthrough)] == ["by-chat", "by-persona", "by-global",
                                                                     "by-character", "Eldoria"]


async def test_persona_lore_follows_the_persona_the_playthrough_plays_as(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path) -> None:
    # SillyTavern's persona lore is the book of the persona in use (`persona_description_lorebook`),
    # not the first persona's.
    shodan, book = _import(tavern, corpus_dir / "cards" / "shodan_v2_pure.png",
                           corpus_dir / "worldbooks" / "eldoria_st_staging.json")
    tavern.persona.personas()  # the first persona exists
    second = tavern.persona.new_persona("Bea")
    as_bea = tavern.playthroughs.new_playthrough(shodan, user_name="Bea").id
    as_default = tavern.playthroughs.new_playthrough(shodan, user_name="Ada").id
    tavern.persona.use_persona(second.id, as_bea)
    assert tavern.lore.bind_world_book(book, "persona", second.id) is True

    assert _effective(tavern, as_bea) == [("eldoria_st_staging", "persona")]
    assert _effective(tavern, as_default) == []
    assert ENTRY.replace("Ada", "Bea") in await _request_text(tavern, model, as_bea, ASKED)  # {{user}}: Bea
    assert "Shadowfangs" not in await _request_text(tavern, model, as_default, ASKED)

    tavern.persona.use_persona(second.id)  # Bea becomes the default: the unlocked chat plays as her too
    assert _effective(tavern, as_default) == [("eldoria_st_staging", "persona")]


def test_a_bound_books_data_is_read_once_until_it_is_edited(tavern: Tavern, corpus_dir: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from tavern_tui.store.books import WorldBookRepository

    reads: list[int] = []
    data_of = WorldBookRepository.data_of
    monkeypatch.setattr(WorldBookRepository, "data_of", lambda self, book_id: reads.append(book_id) or
                        data_of(self, book_id))
    (shodan,) = _import(tavern, corpus_dir / "cards" / "shodan_v2_pure.png")
    book = _tiny_book(tavern, "zeta")
    playthrough = tavern.playthroughs.new_playthrough(shodan, user_name="Ada").id
    tavern.lore.bind_world_book(book, "playthrough", playthrough)

    assert _effective(tavern, playthrough) == [("zeta", "chat")]
    assert _effective(tavern, playthrough) == [("zeta", "chat")]
    assert reads == [book]  # the second step found its parsed copy by the stored stamp

    edited = tavern.lore.world_book(book)
    edited.entries[0].content = "About zeta, edited."
    tavern.lore.save_world_book(book, edited)
    view = tavern.playthroughs.playthrough(playthrough)
    with tavern.store.unit_of_work(write=False) as uow:
        record = uow.characters.get(view.character_id)
    (sourced,) = tavern.lore.effective_books(playthrough, record, tavern.library.card(record))
    assert [e.content for e in sourced.book.entries] == ["About zeta, edited."]
