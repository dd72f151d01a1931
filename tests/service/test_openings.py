"""Opening drafts (issue 20 item 1; seed 000 §7): a draft holds a greeting and selections, has no
session and calls no provider until its first send, which turns it into a playthrough at once.
Greeting texts and counts come from the corpus cards (FACTS.md: 青空 理 has 4 greetings,
first_mes + 3 alternates; Seraphina has 0 alternates)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.config import Settings
from tavern_tui.engine.events import Origin
from tavern_tui.engine.step import OPENING_SOURCE, StepFailed
from tavern_tui.errors import NotFound, SecretRefused, TavernError
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.service import Tavern
from tests.support.loopback import LoopbackServer, sse_chunks_for


def card_json(path: Path) -> dict:
    """The card's V2 data as the file holds it (PNG: the ccv3/chara chunk)."""
    from tavern_tui.formats.cards import parse_card

    return parse_card(path.read_bytes(), path.name).data


def qingkong(service: Tavern, corpus_dir: Path) -> int:
    result = service.imports.import_paths([corpus_dir / "stateful" / "qingkong_li_mvu.png"])[0]
    assert result.ok, result.error
    return result.id


def sessions(service: Tavern) -> list[int]:
    return service.store.events.all_session_ids()


async def send_first(service: Tavern, draft_id: int, text: str) -> int:
    started: list[int] = []
    async for _ in service.openings.send_first(draft_id, text, started=lambda v: started.append(v.id)):
        pass
    return started[0]


def test_a_draft_has_no_session_and_calls_no_provider(service: Tavern, server: LoopbackServer,
                                                      corpus_dir: Path) -> None:
    cid = qingkong(service, corpus_dir)
    before = (sessions(service), service.store.events.version())
    draft = service.openings.new_draft(cid, greeting=2)
    preview = service.steps.preview_draft(draft.id)
    assert (sessions(service), service.store.events.version()) == before
    assert server.requests == []
    assert service.playthroughs.playthroughs(cid) == []
    assert [d.id for d in service.openings.drafts(cid)] == [draft.id]
    # The preview: no history but the chosen greeting (alternate 2 of the file), no input.
    alternates = card_json(corpus_dir / "stateful" / "qingkong_li_mvu.png")["alternate_greetings"]
    assert draft.greeting_count == 1 + len(alternates) == 4
    chat = [m for m in preview["messages"] if m["source"] != "system" and m["role"] != "system"]
    assert [m["role"] for m in chat] == ["assistant"]
    assert chat[0]["content"].startswith(alternates[1].strip()[:20].replace("{{user}}", draft.user_name))
    assert not any(m["source"] == "input" for m in preview["messages"])


def test_swiping_a_drafts_greeting_wraps_among_the_cards_greetings(service: Tavern, corpus_dir: Path) -> None:
    draft = service.openings.new_draft(qingkong(service, corpus_dir))
    seen = [service.openings.swipe_greeting(draft.id, 1).greeting_index for _ in range(4)]
    assert seen == [1, 2, 3, 0]
    assert service.openings.swipe_greeting(draft.id, -1).greeting_index == 3


async def test_the_first_send_makes_the_playthrough_with_the_drafts_selections(
        service: Tavern, server: LoopbackServer, corpus_dir: Path) -> None:
    cid = qingkong(service, corpus_dir)
    book = service.imports.import_paths([corpus_dir / "worldbooks" / "eldoria_st_staging.json"])[0]
    preset = service.imports.import_paths([corpus_dir / "presets" / "st_openai_default_staging.json"])[0]
    assert book.ok and preset.ok
    service.persona.new_persona("Rowan")  # `--persona` picks a persona document (issue 20 item 6)
    draft = service.openings.new_draft(cid, greeting=1, strategy="preset-roles-first", preset=str(preset.id),
                                       lore=[str(book.id)], persona="Rowan")
    server.enqueue_sse(sse_chunks_for("Welcome."))
    pid = await send_first(service, draft.id, "Hello there.")
    assert len(server.requests) == 1
    with pytest.raises(NotFound):
        service.openings.draft(draft.id)
    view = service.playthroughs.playthrough(pid)
    assert (view.strategy, view.preset_id, view.user_name) == ("preset-roles-first", preset.id, "Rowan")
    with service.store.unit_of_work(write=False) as uow:
        assert uow.bindings.books_for("playthrough", pid) == [book.id]
        record = uow.playthroughs.get(pid)
    assert json.loads(record.meta)["strategy"]["name"] == "preset-roles-first"
    surface = service.store.events.surface_events(view.session_id)
    opening = surface[0]
    alternates = card_json(corpus_dir / "stateful" / "qingkong_li_mvu.png")["alternate_greetings"]
    assert (opening.role, opening.origin, opening.source) == ("assistant", Origin.ENGINE, OPENING_SOURCE)
    assert opening.body["greeting_index"] == 1 and opening.body["greetings"] == 4
    assert opening.body["content"].strip()[:20] == alternates[0].replace("{{user}}", "Rowan").strip()[:20]
    messages = [m.content for m in service.playthroughs.messages(pid)]
    assert messages[1:] == ["Hello there.", "Welcome."]
    sent = server.requests[0].json["messages"]
    assert sent[-1] == {"role": "user", "content": "Hello there."}


async def test_a_provider_error_on_the_first_send_keeps_the_input_in_the_new_playthrough(
        service: Tavern, server: LoopbackServer, corpus_dir: Path) -> None:
    draft = service.openings.new_draft(qingkong(service, corpus_dir))
    server.enqueue_json(500, {"error": {"message": "upstream exploded"}})
    started: list[int] = []
    with pytest.raises(StepFailed):
        async for _ in service.openings.send_first(draft.id, "Are you there?",
                                                   started=lambda v: started.append(v.id)):
            pass
    shown = service.playthroughs.messages(started[0])
    assert [m.role for m in shown] == ["assistant", "user", "assistant"]
    assert shown[1].content == "Are you there?" and shown[2].error is not None
    assert service.openings.drafts() == []


async def test_a_refused_first_send_leaves_the_draft_and_stores_nothing(
        service: Tavern, server: LoopbackServer, corpus_dir: Path) -> None:
    draft = service.openings.new_draft(qingkong(service, corpus_dir), greeting=3)
    before = (sessions(service), service.store.events.version())
    for text in ("   ", "my key is sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"):
        with pytest.raises((TavernError, SecretRefused)):
            await send_first(service, draft.id, text)
    assert (sessions(service), service.store.events.version()) == before
    assert service.openings.draft(draft.id) == draft
    assert server.requests == []


def test_discarding_a_draft_leaves_nothing(service: Tavern, corpus_dir: Path) -> None:
    cid = qingkong(service, corpus_dir)
    before = (sessions(service), service.store.events.version())
    drafts = [service.openings.new_draft(cid, greeting=i) for i in range(3)]
    for draft in drafts:
        service.openings.discard(draft.id)
    assert service.openings.drafts() == [] and service.playthroughs.playthroughs() == []
    assert (sessions(service), service.store.events.version()) == before
    with pytest.raises(NotFound):
        service.openings.discard(drafts[0].id)


def test_an_unknown_selection_or_greeting_stores_no_draft(service: Tavern, corpus_dir: Path) -> None:
    cid = qingkong(service, corpus_dir)
    with pytest.raises(NotFound):
        service.openings.new_draft(cid, preset="no such preset")
    with pytest.raises(NotFound):
        service.openings.new_draft(cid, lore=["no such book"])
    with pytest.raises(TavernError, match="out of range"):
        service.openings.new_draft(cid, greeting=4)
    assert service.openings.drafts() == []


def test_editing_a_draft_changes_only_what_is_given(service: Tavern, corpus_dir: Path) -> None:
    service.persona.new_persona("Ann")
    draft = service.openings.new_draft(qingkong(service, corpus_dir), strategy="compat", persona="Ann")
    edited = service.openings.edit_draft(draft.id, greeting=2, strategy="preset-roles-first")
    assert (edited.greeting_index, edited.strategy, edited.user_name) == (2, "preset-roles-first", "Ann")
    assert service.steps.preview_draft(draft.id)["strategy"] == "preset-roles-first"


def run(db_url: str, *args: str) -> tuple[int, str, str]:
    import io

    from tavern_tui.cli import main

    out, err = io.StringIO(), io.StringIO()
    return main(["--db", db_url, *args], out, err), out.getvalue(), err.getvalue()


def test_three_drafts_from_the_command_line_two_discarded_one_played(db_url: str, corpus_dir: Path) -> None:
    code, _out, err = run(db_url, "import", str(corpus_dir / "stateful" / "qingkong_li_mvu.png"))
    assert code == 0, err
    code, _out, err = run(db_url, "persona", "new", "Rowan")
    assert code == 0, err
    made = []
    for greeting in (1, 2, 4):  # counted from 1, as the greeting swipes show them
        code, out, err = run(db_url, "new", "1", "--greeting", str(greeting), "--persona", "Rowan", "--json")
        assert code == 0, err
        made.append(json.loads(out))
    assert [d["greeting_index"] for d in made] == [0, 1, 3] and all(d["greetings"] == 4 for d in made)
    code, out, _ = run(db_url, "sessions", "--json")
    assert json.loads(out) == []  # drafts are no playthroughs and have no session
    code, out, _ = run(db_url, "drafts", "--json")
    assert sorted(d["id"] for d in json.loads(out)) == sorted(d["id"] for d in made)
    code, out, err = run(db_url, "preview", "--draft", str(made[2]["id"]), "--json")
    assert code == 0, err
    assert not any(m["source"] == "input" for m in json.loads(out)["messages"])
    for draft in made[:2]:
        assert run(db_url, "draft", "discard", str(draft["id"]))[0] == 0
    code, out, err = run(db_url, "chat", "1", "--draft", str(made[2]["id"]), "--say", "Good morning.", "--json")
    assert code == 0, err
    assert f"draft {made[2]['id']} became playthrough" in err
    code, out, _ = run(db_url, "drafts", "--json")
    assert json.loads(out) == []
    code, out, _ = run(db_url, "sessions", "--json")
    [played] = json.loads(out)
    assert played["user_name"] == "Rowan" and played["messages"] == 3
    code, out, err = run(db_url, "chat", "1", "--draft", str(made[0]["id"]), "--say", "Good evening.")
    assert code != 0 and "no opening draft" in err
    # Rename it, then find its line by search: every `run` is a new process-like service (a restart).
    code, out, err = run(db_url, "rename", str(played["id"]), "Morning at the shrine")
    assert code == 0 and "Morning at the shrine" in out, err
    code, out, err = run(db_url, "search", "good morn", "--json")
    assert code == 0, err
    [hit] = [h for h in json.loads(out) if h["role"] == "user"]  # (the demo model's reply may echo it)
    assert (hit["playthrough"], hit["title"], hit["role"], hit["speaker"]) == (
        played["id"], "Morning at the shrine", "user", "Rowan")
    assert hit["snippet"] == "Good morning." and hit["on_head"] is True
    assert run(db_url, "archive", str(played["id"]))[0] == 0
    assert json.loads(run(db_url, "search", "morning", "--json")[1]) == []
    assert {h["playthrough"] for h in json.loads(run(db_url, "search", "morning", "--all", "--json")[1])} == {
        played["id"]}
    assert json.loads(run(db_url, "sessions", "--json")[1]) == []
    assert run(db_url, "unarchive", str(played["id"]))[0] == 0
    assert [p["title"] for p in json.loads(run(db_url, "sessions", "--json")[1])] == ["Morning at the shrine"]


@pytest.mark.parametrize("base_url", ["localhost:5001/v1", "ftp://example.org/v1"])
async def test_a_first_send_the_provider_cannot_prepare_leaves_the_draft_and_stores_nothing(
        db_url: str, corpus_dir: Path, base_url: str) -> None:
    tavern = Tavern(Settings(db_url=db_url, provider=ProviderSettings(base_url=base_url, model="m", timeout=5)))
    try:
        draft = tavern.openings.new_draft(qingkong(tavern, corpus_dir), greeting=1)
        before = (sessions(tavern), tavern.store.events.version())
        with pytest.raises(TavernError, match=r"nothing was sent; the draft and your line are kept") as refused:
            await send_first(tavern, draft.id, "Are you there?")
        assert "http" in str(refused.value)  # says what the URL needs
        assert (sessions(tavern), tavern.store.events.version()) == before
        assert tavern.openings.draft(draft.id) == draft and tavern.playthroughs.playthroughs() == []
    finally:
        tavern.close()


def test_a_drafts_first_line_is_kept_but_never_a_secret(service: Tavern, corpus_dir: Path) -> None:
    draft = service.openings.new_draft(qingkong(service, corpus_dir))
    assert service.openings.draft(draft.id).line == ""
    assert service.openings.save_line(draft.id, "I wave at the girl by the window.") is True
    kept = service.openings.draft(draft.id)
    assert kept.line == "I wave at the girl by the window." and kept.updated_at == draft.updated_at
    assert service.openings.save_line(draft.id, "token sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0") is False
    assert service.openings.draft(draft.id).line == ""  # the earlier line is removed, the secret not written
    service.openings.discard(draft.id)
    with pytest.raises(NotFound):
        service.openings.save_line(draft.id, "too late")
