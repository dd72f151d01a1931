"""World info in real steps: effective books, the prompt, decisions in the header, timed effects per branch."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tavern_tui.assembly.worldinfo import LORE_STATE_KIND
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel


def _header(tavern: Tavern, session_id: int) -> dict:
    assert tavern.store is not None
    headers = [e for e in tavern.store.events.surface_events(session_id) if e.kind == "request/header"]
    return headers[-1].body


async def _say(tavern: Tavern, playthrough: int, text: str) -> None:
    async for _ in tavern.steps.send(playthrough, text):
        pass


async def test_the_cards_embedded_book_fires_on_the_input_and_lands_before_the_description(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path) -> None:
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id or 0
    view = tavern.playthroughs.new_playthrough(cid, user_name="Ada")
    await _say(tavern, view.id, "What are the shadowfang beasts?")
    system = model.requests[0].messages[0]["content"]
    # Entry 1 of the card's "Eldoria" book (keys shadowfang/beast…); its content names Shadowfangs.
    # The entry's `{{user}}: "What are Shadowfangs?"` is in the system section, macros expanded,
    # before the description (position 0, before_char).
    assert 'Ada: "What are Shadowfangs?"' in system and "{{user}}" not in system
    assert system.index('Ada: "What are Shadowfangs?"') < system.index("[Seraphina's Personality=")
    record = _header(tavern, view.session_id)["assembly"]["world_info"]
    fired = {d["uid"]: d for d in record["fired"]}
    assert fired[1]["reason"] == "key" and fired[1]["matched_in"] == "input"
    assert fired[1]["matched_key"] in ("shadowfang", "beast", "beasts")
    # The greeting (history) mentions the forest: entry 0 fires from a message, not the input.
    assert fired[0]["reason"] == "key" and fired[0]["matched_in"] != "input"
    # Entry 3 (keys power/magic/ability) matches "magic" in the greeting too.
    assert fired[3]["reason"] == "key" and fired[3]["matched_key"] == "magic"
    # Entry 2 (glade/safe haven/refuge) also matches the greeting ("room"? no: the card's
    # greeting has no glade) — whatever it decided, it has exactly one decision with a reason.
    decided = sum(1 for d in record["fired"] + record["skipped"] if d["uid"] == 2)
    assert decided + record["no_match"].get("Eldoria", []).count(2) == 1


async def test_constant_entries_compete_for_the_budget_and_say_so(db_url: str, corpus_dir: Path) -> None:
    # SillyTavern gives constant entries no budget priority (format-digest §b.5.6): with its default
    # max context of 4095 tokens (budget 25 % = 1024) most of 爱's long constant entries are cut,
    # each with reason over_budget; with a 200k context they are all sent. The config's context
    # (top-level max_context, issue 16) is the one the budget is a share of.
    from tavern_tui.config import Settings
    from tavern_tui.lore.settings import WorldInfoSettings

    for max_context, expect_all in ((4095, False), (200_000, True)):
        model = ScriptedModel(delay=0)
        settings = Settings(db_url=db_url.replace(".sqlite3", f"{max_context}.sqlite3"),
                            world_info=WorldInfoSettings(), max_context=max_context)
        tavern = Tavern(settings, provider=model)
        try:
            cid = tavern.imports.import_paths([corpus_dir / "cards" / "ai_v3_with_book.json"])[0].id or 0
            view = tavern.playthroughs.new_playthrough(cid)
            await _say(tavern, view.id, "你好")
            record = _header(tavern, view.session_id)["assembly"]["world_info"]
            reasons = {d["uid"]: d["reason"] for d in record["fired"] + record["skipped"]}
            assert reasons[23] == "disabled"  # FACTS: the one disabled entry
            constants = {0, 1, 21, 22, 24, 25, 26}  # FACTS: constant ids without the disabled 23
            if expect_all:
                assert {u for u in constants if reasons[u] == "constant"} == constants
                assert "世界框架: 修仙世界" in model.requests[0].messages[0]["content"]
                assert record["budget"] == round(200_000 * 25 / 100)
            else:
                assert record["budget"] == 1024 and record["overflowed"] is True
                assert {reasons[u] for u in constants} == {"constant", "over_budget"}
        finally:
            tavern.close()


async def test_a_globally_bound_book_fires_and_timed_state_is_kept_per_branch(tavern: Tavern, model: ScriptedModel,
                                                                              corpus_dir: Path, tmp_path: Path) -> None:
    book = {"entries": {"0": {"uid": 0, "key": ["lighthouse"], "content": "The lighthouse keeper is a ghost.",
                              "sticky": 2, "order": 100, "position": 1}}}
    path = tmp_path / "coast.json"
    path.write_text(json.dumps(book), encoding="utf-8")
    book_id = tavern.imports.import_paths([path])[0].id or 0
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "skynet_v1_legacy.png"])[0].id or 0
    assert tavern.lore.bind_world_book(book_id, "global")
    view = tavern.playthroughs.new_playthrough(cid)
    await _say(tavern, view.id, "Scan the lighthouse.")
    assert "The lighthouse keeper is a ghost." in model.requests[0].messages[0]["content"]
    # Sticky 2: the next step still has it although no message mentions it within the scan depth (2).
    await _say(tavern, view.id, "Report.")
    await _say(tavern, view.id, "Anything else?")
    assert tavern.store is not None
    states = [e for e in tavern.store.events.surface_events(view.session_id) if e.kind == LORE_STATE_KIND]
    assert len(states) == 3 and states[0].body["sticky"][0]["uid"] == 0
    second = _header(tavern, view.session_id)
    [named] = second["assembly"]["world_books"]
    assert {k: named[k] for k in ("name", "source", "entries")} == {"name": "coast", "source": "global", "entries": 1}
    # the content hash of the stored book (issue 6: every world book with its hash)
    with tavern.store.unit_of_work() as uow:
        data = uow.world_books.get(book_id).data
    assert named["sha256"] == hashlib.sha256(data.encode("utf-8")).hexdigest()
    preview = tavern.steps.world_info_preview(view.id, "the lighthouse again")
    assert preview.decision("coast", 0).fired
    assert len([e for e in tavern.store.events.surface_events(view.session_id) if e.kind == LORE_STATE_KIND]) == 3


async def test_warming_a_playthrough_builds_its_index_once_and_the_first_send_reuses_it(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from tavern_tui.assembly.worldinfo import WorldInfoStep
    from tavern_tui.lore.fastindex import FastIndex

    primed: list[int] = []
    prime = WorldInfoStep.prime
    monkeypatch.setattr(WorldInfoStep, "prime", lambda self, ctx: primed.append(prime(self, ctx)) or primed[-1])

    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id or 0
    view = tavern.playthroughs.new_playthrough(cid, user_name="Ada")
    cache = tavern.lore.index_cache
    built: list[int] = []
    factory = cache.factory
    cache.factory = lambda keys: built.append(len(keys)) or factory(keys)  # type: ignore[assignment]
    try:
        # The greeting names the forest, the beasts and magic: entries 0, 1 and 3 of the card's
        # Eldoria book (entry 2 may follow by recursion, budget permitting).
        assert tavern.steps.warm_world_info(view.id) >= 3
        assert gc.get_freeze_count() > 0  # what was alive then is out of the collector's way
        assert len(built) == 1 and isinstance(next(iter(cache._cache.values())), FastIndex)
        # ... and every entry content recursion may scan was primed: the card's book has 4
        # entries with content (format-digest: recursion is on by default)
        assert primed == [4]
        await _say(tavern, view.id, "What are the shadowfang beasts?")
        assert len(built) == 1  # the step found the index ready
        record = _header(tavern, view.session_id)["assembly"]["world_info"]
        assert {d["uid"] for d in record["fired"]} >= {0, 1, 3}
    finally:
        gc.unfreeze()


def test_activations_sharing_a_cache_take_turns(tavern: Tavern, corpus_dir: Path) -> None:
    # The chat's warm-up runs in a worker thread while the event loop may start a step: an
    # index's caches are not thread-safe, so a second activation waits for the first.
    import threading

    from tavern_tui.formats.worldinfo import parse_world_book
    from tavern_tui.lore.context import ScanMessage

    path = corpus_dir / "worldbooks" / "eldoria_st_staging.json"
    book = parse_world_book(path.read_bytes(), path.name)
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(
        tavern.lore.test_world_info([book], [ScanMessage("User", "the shadowfang beasts", 1)], None)))
    with tavern.lore.index_cache.in_use:
        worker.start()
        worker.join(0.3)
        assert worker.is_alive() and results == []  # waiting for the activation holding the cache
    worker.join(5)
    assert not worker.is_alive() and len(results) == 1
    assert ("eldoria_st_staging", 1) in [(a.book, a.uid) for a in results[0].activated]  # type: ignore[attr-defined]


def test_priming_holds_the_index_one_part_at_a_time(corpus_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Priming a big book takes up to a second in the warm-up worker; a step that waits for the
    # index waits for one part. Each part is primed while holding the index, never all at once.
    from tavern_tui.assembly import worldinfo
    from tavern_tui.formats.worldinfo import parse_world_book
    from tavern_tui.lore.context import ActivationContext, SourcedBook
    from tavern_tui.lore.fastindex import FastIndex
    from tavern_tui.lore.matching import IndexCache

    path = corpus_dir / "worldbooks" / "eldoria_st_staging.json"  # 4 entries, each with content
    book = parse_world_book(path.read_bytes(), path.name)
    step = worldinfo.WorldInfoStep([SourcedBook(book, "global")], cache=IndexCache(FastIndex))
    parts: list[tuple[int, bool]] = []
    prime = worldinfo.prime

    def recording(*args: object, **kwargs: object) -> int:
        owned = step.cache.in_use._is_owned()  # type: ignore[attr-defined]  # held by this thread
        parts.append((len(kwargs["contents"]), owned))  # type: ignore[arg-type]
        return prime(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(worldinfo, "prime", recording)
    ctx = ActivationContext(messages=(), char_name="Seraphina", user_name="Ada")
    assert step.prime(ctx, chunk=3) == 4
    assert parts == [(3, True), (1, True)]
    assert not step.cache.in_use._is_owned()  # type: ignore[attr-defined]


async def test_a_send_waits_for_a_busy_index_without_blocking_the_event_loop(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path) -> None:
    # The chat's warm-up (a worker thread) holds the key indexes while it builds and primes a
    # big book; a send made meanwhile waits for them off the event loop, so the screen answers.
    import asyncio
    import threading

    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id or 0
    view = tavern.playthroughs.new_playthrough(cid, user_name="Ada")
    taken, release = threading.Event(), threading.Event()

    def warm_up() -> None:
        with tavern.lore.index_cache.in_use:
            taken.set()
            release.wait(5)

    holder = threading.Thread(target=warm_up)
    holder.start()
    taken.wait(5)
    sent = asyncio.create_task(_say(tavern, view.id, "What are the shadowfang beasts?"))
    ticks = 0
    for _ in range(20):  # the loop keeps running while the send waits
        await asyncio.sleep(0.01)
        ticks += 1
    assert ticks == 20 and not sent.done() and model.requests == []
    release.set()
    await asyncio.wait_for(sent, 5)
    holder.join(5)
    assert len(model.requests) == 1


async def test_the_status_line_estimate_counts_the_request_the_step_sends(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path) -> None:
    # The estimate is the next request without new input: the card's world info (entries 0, 1
    # and 3 fire from the greeting) and the preset's prompts included, not only the history.
    from tavern_tui.text.tokens import estimate_messages

    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id or 0
    view = tavern.playthroughs.new_playthrough(cid, user_name="Ada")
    before = tavern.steps.estimate_tokens(view.id)
    await _say(tavern, view.id, "Hello")  # names no key: the same entries fire
    sent = [dict(m) for m in model.requests[0].messages]
    assert sent[-1]["content"] == "Hello"
    assert before == estimate_messages(sent[:-1])
    assert 'Ada: "What is Eldoria?"' in "".join(str(m["content"]) for m in sent)  # entry 0's content


async def test_hostile_regex_keys_are_cut_off_by_the_step_budget_and_named_in_the_trace_and_the_tester(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path, tmp_path: Path) -> None:
    # Issue 23 item 8: 60 keys that each backtrack for their whole 50 ms limit on the input; the
    # step's regex budget (1 s) stops them; the trace's world-info record says so and names keys.
    from tavern_tui.lore.regex_budget import REGEX_STEP_BUDGET
    from tavern_tui.tui.lore_labels import totals_line

    keys = [f"/(a|aa)+{i}?$/" for i in range(60)]
    entries = {str(i): {"uid": i, "key": [key], "content": f"lore {i}"} for i, key in enumerate(keys)}
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps({"entries": entries}), encoding="utf-8")
    book_id = tavern.imports.import_paths([path])[0].id
    assert book_id is not None
    tavern.lore.bind_world_book(book_id, "global")
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "coding_sensei_v2.png"])[0].id or 0
    view = tavern.playthroughs.new_playthrough(cid, user_name="Ada")
    slow = "a" * 60 + "b"
    await _say(tavern, view.id, slow)
    record = _header(tavern, view.session_id)["assembly"]["world_info"]
    assert record["regex_budget"]["exhausted"] is True and record["regex_budget"]["seconds"] == REGEX_STEP_BUDGET
    assert record["regex_budget"]["skipped"] > 0
    named = {d["uid"]: d for d in record["skipped"] if d["reason"] == "regex_timeout"}
    assert sorted(named) == list(range(60)) and all(named[i]["timed_out_keys"] == [keys[i]] for i in named)
    assert any("regex time budget was used up" in d["detail"] for d in named.values())
    # The world-book pane's tester shows the same run: its totals line says the budget ran out.
    preview = tavern.steps.world_info_preview(view.id, slow)
    assert "regex time budget (1.0 s) used up" in totals_line(preview)
