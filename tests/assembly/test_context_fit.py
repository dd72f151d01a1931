"""Issue 16: every request fits its context, an unfittable one is refused before sending, and
summaries replace old turns (seed 000 §1.1 surface replacement). Requests go to the real
loopback SSE server; token counts are checked with the same counter the app uses and with a
real `tokenizer.json` (a byte-level BPE trained here with the `tokenizers` package of the test
extra, so the file is ours to ship)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.assembly.fit import ContextLimit, ContextOverflow, resolve_limit
from tavern_tui.assembly.sillytavern import PromptTooLarge
from tavern_tui.config import Settings
from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.engine.log import SUMMARY_SOURCE, derive_messages
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.service import Tavern
from tavern_tui.service.compaction import DEFAULT_SUMMARY_PROMPT
from tests.support.cli import run_cli
from tests.support.loopback import LoopbackServer, sse_chunks_for

STRATEGIES = ["compat", "preset-roles-first", "preset-slots-first", "projection"]
WORDS = ("lantern storm river castle forest sword whisper market harbour tower ember frost meadow oath "
         "shadow silver raven bridge candle journey").split()


def line(n: int) -> str:
    """A distinct, ordinary chat line for message n (about 40 tokens)."""
    picked = " ".join(WORDS[(n * 7 + k) % len(WORDS)] for k in range(18))
    return f"Message {n:04d}: we talk about the {picked} and walk on."



@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory: pytest.TempPathFactory, corpus_dir: Path) -> Path:
    """A real Hugging Face tokenizer.json: byte-level BPE trained on the test's own chat lines
    and the corpus presets' text (English prose, as a model tokenizer is)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=3000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    prose = [p.read_text(encoding="utf-8", errors="replace") for p in sorted((corpus_dir / "presets").glob("*.json"))]
    prose += [p.read_text(encoding="utf-8", errors="replace") for p in sorted((corpus_dir / "cards").glob("*.json"))]
    tokenizer.train_from_iterator([line(n) for n in range(300)] + prose, trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def make_service(server: LoopbackServer, db_url: str, corpus_dir: Path, tmp_path: Path, *, max_context: int,
                 max_tokens: int = 300, tokenizer: str = "", auto_compact: bool = False,
                 history: int = 0) -> tuple[Tavern, int]:
    """A playthrough of Seraphina with a bound preset of the given context and `history`
    stored messages (alternating user / assistant, after the greeting)."""
    settings = Settings(db_url=db_url, provider=ProviderSettings(base_url=server.base_url, model="loop-1", timeout=10),
                        tokenizer=tokenizer, auto_compact=auto_compact)
    service = Tavern(settings)
    preset = json.loads((corpus_dir / "presets" / "st_openai_default_staging.json").read_text())
    preset["openai_max_context"], preset["openai_max_tokens"] = max_context, max_tokens
    preset_path = tmp_path / f"ctx{max_context}.json"
    preset_path.write_text(json.dumps(preset))
    card, bound = service.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png", preset_path])
    assert card.ok and bound.ok
    pid = service.playthroughs.new_playthrough(card.id, user_name="Ann").id
    service.presets.bind_preset(pid, bound.id)
    if history:
        session = service.playthroughs.playthrough(pid).session_id
        service.store.events.append(session, [
            NewEvent(EventKind.USER_MESSAGE if n % 2 == 0 else EventKind.ASSISTANT_MESSAGE,
                     "user" if n % 2 == 0 else "assistant", {"content": line(n)}) for n in range(history)])
    return service, pid


async def say(service: Tavern, pid: int, text: str) -> None:
    async for _ in service.steps.send(pid, text):
        pass


def cost(count, messages: list[dict]) -> int:  # type: ignore[no-untyped-def]
    """The request's tokens as SillyTavern accounts them: content + name + 3 a message, + 3 priming."""
    return 3 + sum(count(m["content"]) + (count(m["name"]) if m.get("name") else 0) + 3 for m in messages)


def history_numbers(messages: list[dict]) -> list[int]:
    return [int(m["content"].split("Message ", 1)[1][:4]) for m in messages if "Message " in m["content"]]


def test_the_limit_comes_from_the_preset_then_the_config_then_the_endpoint_then_the_default() -> None:
    assert resolve_limit({"openai_max_context": 32768, "openai_max_tokens": 1024}, 8000, 200) == \
        ContextLimit(32768, 1024, "preset")
    assert resolve_limit(None, 8000, 200, (131072, "endpoint:/models")) == ContextLimit(8000, 200, "config")
    assert resolve_limit(None, 0, 0, (131072, "endpoint:/props")) == ContextLimit(131072, 300, "endpoint:/props")
    # SillyTavern's Default.json: openai_max_context 4095, openai_max_tokens 300.
    assert resolve_limit(None).limit == 4095 - 300 and resolve_limit(None).source == "default"


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("max_context", [4096, 32768])
async def test_a_long_history_fits_every_strategy(server: LoopbackServer, db_url: str, corpus_dir: Path,
                                                  tmp_path: Path, strategy: str, max_context: int) -> None:
    service, pid = make_service(server, db_url, corpus_dir, tmp_path, max_context=max_context, history=2000)
    try:
        service.strategies.apply_strategy(pid, strategy)
        server.enqueue_sse(sse_chunks_for("Fine."))
        await say(service, pid, "The claimed input.")
        sent = server.requests[-1].json["messages"]
        limit = max_context - 300
        assert cost(service.ctx.token_counter, sent) <= limit
        assert sent[-1] == {"role": "user", "content": "The claimed input."}
        numbers = history_numbers(sent)
        assert numbers == list(range(2000 - len(numbers), 2000))  # a contiguous newest run: oldest dropped
        assert 0 < len(numbers) < 2000
        trace = service.traces.trace(service.traces.traces(pid)[-1].id)
        context = trace["context"]
        assert context["limit"] == limit and context["used"] <= limit
        assert context["dropped_messages"] >= 2000 - len(numbers)  # the greeting may be dropped too
        kept_first = next(m for m in derive_messages(service.store.events, service.playthroughs.playthrough(pid)
                                                     .session_id) if line(2000 - len(numbers)) == m.content)
        assert context["first_kept"] == f"{kept_first.ref[0]}:{kept_first.ref[1]}"
        # The world-info budget is 25 % (SillyTavern's world_info_budget default) of this context.
        header = service.store.events.events_at([tuple(trace["record"]["header"])])
        assert next(iter(header.values())).body["assembly"]["world_info"]["budget"] == round(max_context * 25 / 100)
        assert service.traces.verify_trace(trace["id"]).ok
    finally:
        service.close()


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_summary_is_never_dropped_while_older_history_is(server: LoopbackServer, db_url: str,
                                                                 corpus_dir: Path, tmp_path: Path,
                                                                 strategy: str) -> None:
    # Issue 16 "how it is checked": summaries never dropped, whatever the strategy, when the
    # history after them does not fit a 4k limit (2,000 messages, a summary of the oldest 11).
    service, pid = make_service(server, db_url, corpus_dir, tmp_path, max_context=4096, history=2000)
    try:
        session = service.playthroughs.playthrough(pid).session_id
        chat = [m for m in derive_messages(service.store.events, session) if m.source != "system-prompt"]
        server.enqueue_sse(sse_chunks_for("Ann met Seraphina in the glade."))
        done = await service.compaction.compact(pid, through=chat[10].ref)  # the greeting and lines 0-9
        assert done.covers == 11
        service.strategies.apply_strategy(pid, strategy)
        shown = service.steps.preview(pid, "The claimed input.")
        assert shown["context"]["summaries"] == [f"{done.summary[0]}:{done.summary[1]}"]
        server.enqueue_sse(sse_chunks_for("Fine."))
        await say(service, pid, "The claimed input.")
        sent = server.requests[-1].json["messages"]
        assert cost(service.ctx.token_counter, sent) <= 4096 - 300
        assert [m["content"] for m in sent].count("Ann met Seraphina in the glade.") == 1
        numbers = history_numbers(sent)
        assert numbers == list(range(2000 - len(numbers), 2000)) and numbers[0] > 10  # lines 10.. dropped
        assert sent[-1]["content"] == "The claimed input."
        context = service.traces.trace(service.traces.traces(pid)[-1].id)["context"]
        assert context["summaries"] == [f"{done.summary[0]}:{done.summary[1]}"]
        assert context["dropped_messages"] == 2000 - 10 - len(numbers)  # lines 10 .. the first kept
    finally:
        service.close()


@pytest.mark.parametrize("strategy", ["preset-slots-first", "projection"])
async def test_a_real_tokenizer_counts_the_fit(server: LoopbackServer, db_url: str, corpus_dir: Path, tmp_path: Path,
                                               tokenizer_file: Path, strategy: str) -> None:
    from tokenizers import Tokenizer

    service, pid = make_service(server, db_url, corpus_dir, tmp_path, max_context=4096, history=2000,
                                tokenizer=str(tokenizer_file))
    try:
        assert service.ctx.token_counter.exact
        service.strategies.apply_strategy(pid, strategy)
        server.enqueue_sse(sse_chunks_for("Fine."))
        await say(service, pid, "The claimed input.")
        real = Tokenizer.from_file(str(tokenizer_file))
        sent = server.requests[-1].json["messages"]
        assert cost(lambda t: len(real.encode(t, add_special_tokens=False).ids) if t else 0, sent) <= 4096 - 300
        assert sent[-1]["content"] == "The claimed input."
    finally:
        service.close()


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_message_over_the_limit_is_refused_before_sending(server: LoopbackServer, db_url: str,
                                                                  corpus_dir: Path, tmp_path: Path,
                                                                  strategy: str) -> None:
    service, pid = make_service(server, db_url, corpus_dir, tmp_path, max_context=4096, history=20)
    try:
        service.strategies.apply_strategy(pid, strategy)
        session = service.playthroughs.playthrough(pid).session_id
        before = service.store.events.head_seq(session)
        huge = "word " * 11_000  # 54 KB: ~13.7k estimated tokens against a 3,796-token limit
        with pytest.raises((ContextOverflow, PromptTooLarge)) as refused:
            await say(service, pid, huge)
        text = str(refused.value)
        assert "3796" in text and ("over" in text or "exceed" in text)
        assert server.requests == []  # nothing went over HTTP
        assert service.store.events.head_seq(session) == before  # nothing half-stored
    finally:
        service.close()


async def test_compaction_replaces_the_oldest_range_and_the_next_request_uses_it(
        server: LoopbackServer, db_url: str, corpus_dir: Path, tmp_path: Path) -> None:
    service, pid = make_service(server, db_url, corpus_dir, tmp_path, max_context=32768, history=20)
    try:
        session = service.playthroughs.playthrough(pid).session_id
        chat = [m for m in derive_messages(service.store.events, session) if m.source != "system-prompt"]
        assert len(chat) == 21  # the greeting + 20
        server.enqueue_sse(sse_chunks_for("Ann met Seraphina in the glade; the lantern thread is open."))
        done = await service.compaction.compact(pid, keep=5)
        body = server.requests[-1].json
        assert body["messages"][0] == {"role": "system",
                                       "content": DEFAULT_SUMMARY_PROMPT}
        transcript = body["messages"][1]["content"]
        assert transcript.startswith("Seraphina: ") and f"Ann: {line(0)}" in transcript
        assert f"{line(14)}" in transcript and line(15) not in transcript
        assert done.targets == tuple(m.ref for m in chat[:16]) and done.covers == 16
        # The originals stay in the log; the surface shows the summary, then the 5 kept.
        assert all(service.store.events.events_at([m.ref]) for m in chat[:16])
        surface = [m for m in derive_messages(service.store.events, session) if m.source != "system-prompt"]
        assert surface[0].source == SUMMARY_SOURCE and surface[0].ref == done.summary
        assert [m.content for m in surface[1:]] == [m.content for m in chat[16:]]
        assert service.traces.verify_trace(done.trace).ok
        assert service.traces.traces(pid)[-1].generation == "summary"
        server.enqueue_sse(sse_chunks_for("On we go."))
        await say(service, pid, "Next.")
        sent = server.requests[-1].json["messages"]
        at = next(i for i, m in enumerate(sent) if m["content"] == done.text)
        assert sent[at]["role"] == "system"
        assert history_numbers(sent[at + 1:]) == list(range(15, 20))
        assert sent[-1]["content"] == "Next."
        assert all(v.ok for _, v in service.traces.verify_all())
        # Editing the summary: a replacement of it, still a summary, sent next time.
        edited = service.compaction.edit_summary(pid, done.summary, "Ann and Seraphina rest in the glade.")
        shown = [m for m in derive_messages(service.store.events, session) if m.ref == edited]
        assert shown and shown[0].source == SUMMARY_SOURCE and shown[0].content.startswith("Ann and")
        server.enqueue_sse(sse_chunks_for("Yes."))
        await say(service, pid, "Again.")
        assert any(m["content"] == "Ann and Seraphina rest in the glade." for m in server.requests[-1].json["messages"])
        assert done.text not in [m["content"] for m in server.requests[-1].json["messages"]]
    finally:
        service.close()


async def test_a_fork_before_the_compaction_does_not_see_it(server: LoopbackServer, db_url: str, corpus_dir: Path,
                                                             tmp_path: Path) -> None:
    service, pid = make_service(server, db_url, corpus_dir, tmp_path, max_context=32768, history=12)
    try:
        session = service.playthroughs.playthrough(pid).session_id
        chat = [m for m in derive_messages(service.store.events, session) if m.source != "system-prompt"]
        server.enqueue_sse(sse_chunks_for("A recap."))
        done = await service.compaction.compact(pid, keep=4)
        before = service.timeline.fork(pid, chat[10].ref)  # a message inside the range, before the point
        seen = [m.content for m in derive_messages(service.store.events, before)]
        assert "A recap." not in seen and line(9) in seen
        server.enqueue_sse(sse_chunks_for("Later reply."))
        await say(service, pid, "After.")
        reply = derive_messages(service.store.events, service.playthroughs.playthrough(pid).session_id)[-1]
        after = service.timeline.fork(pid, reply.ref)
        seen_after = derive_messages(service.store.events, after)
        assert any(m.ref == done.summary for m in seen_after) and line(0) not in [m.content for m in seen_after]
    finally:
        service.close()


async def test_auto_compaction_fires_only_when_history_would_be_dropped(server: LoopbackServer, db_url: str,
                                                                        corpus_dir: Path, tmp_path: Path) -> None:
    service, pid = make_service(server, db_url, corpus_dir, tmp_path, max_context=4096, history=6,
                                auto_compact=True)
    try:
        server.enqueue_sse(sse_chunks_for("Short chat, no summary."))
        await say(service, pid, "Hi.")
        assert len(server.requests) == 1 and server.requests[0].json["messages"][0]["content"] != DEFAULT_SUMMARY_PROMPT
    finally:
        service.close()
    service, pid = make_service(server, db_url.replace(".sqlite3", "b.sqlite3"), corpus_dir, tmp_path,
                                max_context=4096, history=300, auto_compact=True)
    try:
        # A preview (and the gauge, which is one) never creates a summary, auto-compaction or not.
        before = len(server.requests)
        assert service.steps.preview(pid, "Hi again.")["context"]["dropped_messages"] > 0
        assert service.steps.context_gauge(pid)["dropped_messages"] > 0
        session = service.playthroughs.playthrough(pid).session_id
        assert len(server.requests) == before
        assert not any(m.source == SUMMARY_SOURCE for m in derive_messages(service.store.events, session))
        for _ in range(40):  # the summary parts, then the reply (each answer is the same text)
            server.enqueue_sse(sse_chunks_for("Ann and Seraphina talked for a long time."))
        await say(service, pid, "Hi again.")
        server.clear()
        made = server.requests[before:]
        summaries = [r.json for r in made if r.json["messages"][0]["content"] == DEFAULT_SUMMARY_PROMPT]
        step_request = made[-1].json
        assert len(summaries) == len(made) - 1 >= 2  # the whole block that would be dropped, in parts
        assert f"Ann: {line(0)}" in summaries[0]["messages"][1]["content"]
        # The summary covers every message the fit would have dropped: none is dropped now.
        assert service.traces.trace(service.traces.traces(pid)[-1].id)["context"]["dropped_messages"] == 0
        sent = [m["content"] for m in step_request["messages"]]
        assert "Ann and Seraphina talked for a long time." in sent and sent[-1] == "Hi again."
        assert cost(service.ctx.token_counter, step_request["messages"]) <= 4096 - 300
    finally:
        service.close()


def test_the_cli_compacts_and_names_the_fit(server: LoopbackServer, db_url: str, corpus_dir: Path, tmp_path: Path,
                                            isolated_profile: Path) -> None:
    import os
    import subprocess

    service, pid = make_service(server, db_url, corpus_dir, tmp_path, max_context=4096, history=400)
    service.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env.update(TAVERN_HOME=str(isolated_profile), TAVERN_API_BASE=server.base_url, TAVERN_MODEL="loop-1",
               TAVERN_DB_URL=db_url)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(args, env)

    shown = run("preview", str(pid), "--input", "Hello", "--json")
    assert shown.returncode == 0, shown.stderr
    context = json.loads(shown.stdout)["context"]
    assert context["limit"] == 4096 - 300 and 0 < context["used"] <= context["limit"]
    assert context["dropped_messages"] > 0 and context["first_kept"] and context["summaries"] == []
    for _ in range(30):  # 380 messages do not fit one 4k summary request: it takes parts
        server.enqueue_sse(sse_chunks_for("Ann and Seraphina walked and talked."))
    done = run("compact", str(pid), "--keep", "20", "--json")
    server.clear()
    assert done.returncode == 0, done.stderr
    compacted = json.loads(done.stdout)
    assert compacted["text"] == "Ann and Seraphina walked and talked." and compacted["covers"] == 401 - 20
    assert compacted["requests"] > 1
    after = json.loads(run("preview", str(pid), "--input", "Hello", "--json").stdout)["context"]
    assert after["summaries"] == [compacted["summary"]]
    listing = run("show", str(pid), "--all")
    assert listing.returncode == 0, listing.stderr
    assert f"[summary of {compacted['covers']} messages · {compacted['summary']}]" in listing.stdout
    assert f"[replaced by {compacted['summary']} · not sent · user" in listing.stdout and line(0) in listing.stdout
    server.enqueue_sse(sse_chunks_for("Fine."))
    sent = run("chat", "Seraphina", "--playthrough", str(pid), "--say", "Hello")
    assert sent.returncode == 0, sent.stderr
    traces = json.loads(run("trace", "list", "--playthrough", str(pid), "--json").stdout)
    assert [t["generation"] for t in traces] == ["summary"] * compacted["requests"] + ["normal"]
    trace_text = run("trace", "show", traces[-1]["id"]).stdout
    assert f"summaries {compacted['summary']}" in trace_text and "tokens (preset)" in trace_text
    verified = run("trace", "verify", traces[0]["id"])
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.parametrize("limit", [3796, 32468])
def test_cutting_the_unfittable_oldest_messages_builds_the_same_prompt(corpus_dir: Path, limit: int) -> None:
    # The pre-build cut (issue 16 §6, speed) must not change what SillyTavern's fill keeps.
    from tavern_tui.assembly.preset import cut_unfittable
    from tavern_tui.assembly.sillytavern import HistoryMessage, PromptInputs, build_prompt
    from tavern_tui.formats.presets import parse_preset
    from tavern_tui.text.tokens import DEFAULT_COUNTER

    path = corpus_dir / "presets" / "st_openai_default_staging.json"
    preset = parse_preset(path.read_bytes(), path.name)
    chat = [HistoryMessage("user" if n % 2 == 0 else "assistant", line(n), (1, n + 2), "Ann" if n % 2 == 0 else "Sera")
            for n in range(2000)]
    chat[5] = HistoryMessage("user", "The {{char}} macro makes this one count as 0.", (1, 7), "Ann")
    chat.append(HistoryMessage("user", "Now.", None, "Ann", is_input=True))
    card = {"description": "A healer in a glade.", "personality": "kind", "scenario": "A forest."}
    whole = build_prompt(PromptInputs(preset=preset, card=card, char="Sera", user="Ann", history=chat,
                                      context_limit=limit, macros=None))
    kept, offset = cut_unfittable(chat, limit, DEFAULT_COUNTER)
    assert 0 < offset <= whole.history_dropped  # never more than the fill itself leaves out
    cut = build_prompt(PromptInputs(preset=preset, card=card, char="Sera", user="Ann", history=kept,
                                    history_offset=offset, context_limit=limit, macros=None))
    assert cut.parts == whole.parts and cut.history_dropped == whole.history_dropped
    assert cut.adjustments == whole.adjustments


async def test_a_summary_is_summarised_again_with_later_messages(server: LoopbackServer, db_url: str,
                                                                 corpus_dir: Path, tmp_path: Path) -> None:
    service, pid = make_service(server, db_url, corpus_dir, tmp_path, max_context=32768, history=30)
    try:
        session = service.playthroughs.playthrough(pid).session_id
        server.enqueue_sse(sse_chunks_for("First recap."))
        first = await service.compaction.compact(pid, keep=20)  # the greeting and 10 lines
        server.enqueue_sse(sse_chunks_for("Second recap."))
        second = await service.compaction.compact(pid, keep=5)
        assert second.targets[0] == first.summary  # the old summary is the range's first node
        assert "[Summary of earlier events] First recap." in server.requests[-1].json["messages"][1]["content"]
        assert first.covers == 11 and second.covers == 26  # 11 + the 15 lines after them
        surface = [m for m in derive_messages(service.store.events, session) if m.source != "system-prompt"]
        assert [m.content for m in surface[:1]] == ["Second recap."] and len(surface) == 6
        originals = service.compaction.replaced_views(pid)[second.summary]
        assert len(originals) == 26 and originals[1].content == line(0)
        assert service.playthroughs.playthrough(pid).message_count == 6
    finally:
        service.close()


def test_the_endpoint_is_asked_once_for_its_context(server: LoopbackServer, db_url: str, corpus_dir: Path,
                                                    tmp_path: Path) -> None:
    from tavern_tui.providers.openai_compat import OpenAICompatProvider

    # OpenAI-compatible /models (OpenRouter's context_length); vLLM names it max_model_len.
    server.enqueue_get("/v1/models", 200, {"data": [{"id": "other", "context_length": 4096},
                                                    {"id": "loop-1", "context_length": 131072}]})
    provider = OpenAICompatProvider(ProviderSettings(base_url=server.base_url, model="loop-1", timeout=5))
    assert provider.context_window() == (131072, "endpoint:/models")
    assert provider.context_window() == (131072, "endpoint:/models")  # cached: one request
    assert [(r.method, r.path) for r in server.gets] == [("GET", "/v1/models")]
    # llama.cpp: no context in /models, /props has default_generation_settings.n_ctx.
    server.enqueue_get("/v1/models", 200, {"data": [{"id": "loop-1"}]})
    server.enqueue_get("/props", 200, {"default_generation_settings": {"n_ctx": 8192}})
    llama = OpenAICompatProvider(ProviderSettings(base_url=server.base_url, model="loop-1", timeout=5))
    assert llama.context_window() == (8192, "endpoint:/props")
    assert [r.path for r in server.gets[1:]] == ["/v1/models", "/props"]
    # An endpoint that reports nothing (404s): not reported, asked once, the default applies.
    silent = OpenAICompatProvider(ProviderSettings(base_url=server.base_url, model="loop-1", timeout=5))
    assert silent.context_window() is None and silent.context_window() is None
    assert [r.path for r in server.gets[3:]] == ["/v1/models", "/props"]
    # The service asks by default, when neither a bound preset nor the config says.
    server.enqueue_get("/v1/models", 200, {"data": [{"id": "loop-1", "max_model_len": 16384}]})
    settings = Settings(db_url=db_url, provider=ProviderSettings(base_url=server.base_url, model="loop-1", timeout=5))
    assert settings.probe_context is True
    service = Tavern(settings)
    try:
        [card] = service.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])
        pid = service.playthroughs.new_playthrough(card.id).id
        assert service.compaction.limit_for(pid) == ContextLimit(16384, 300, "endpoint:/models")
        assert len(server.gets) == 6  # read once: asking again is served from the cache
        assert service.compaction.limit_for(pid) == ContextLimit(16384, 300, "endpoint:/models")
        assert len(server.gets) == 6 and server.requests == []
    finally:
        service.close()
    # `probe_context = false` turns it off.
    off = Tavern(Settings(db_url=db_url, provider=ProviderSettings(base_url=server.base_url, model="loop-1"),
                          probe_context=False))
    try:
        pid = off.playthroughs.new_playthrough(card.id).id
        assert off.compaction.limit_for(pid).source == "default" and len(server.gets) == 6
    finally:
        off.close()


def test_a_probe_never_hangs_on_a_silent_or_huge_answer() -> None:
    import http.server
    import threading
    import time

    from tavern_tui.providers import openai_compat
    from tavern_tui.providers.openai_compat import OpenAICompatProvider

    class Silent(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - stdlib naming
            if self.path.endswith("/models"):  # headers, then an endless body
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                try:
                    while True:
                        self.wfile.write(b" " * 65536)
                except OSError:
                    return
            time.sleep(5)  # /props: never answers in time

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Silent)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        provider = OpenAICompatProvider(ProviderSettings(
            base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", model="m", timeout=30))
        started = time.monotonic()
        assert provider.context_window() is None
        # The endless /models stops at PROBE_MAX_BYTES; the silent /props at PROBE_TIMEOUT.
        assert time.monotonic() - started < 4 * openai_compat.PROBE_TIMEOUT + 5
    finally:
        server.shutdown()
        server.server_close()


async def test_the_demo_provider_cannot_compact(db_url: str, corpus_dir: Path) -> None:
    from tavern_tui.errors import TavernError
    from tavern_tui.providers.demo import DemoProvider

    service = Tavern(Settings(db_url=db_url), provider=DemoProvider(delay=0))
    try:
        [card] = service.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])
        pid = service.playthroughs.new_playthrough(card.id).id
        session = service.playthroughs.playthrough(pid).session_id
        before = service.store.events.head_seq(session)
        with pytest.raises(TavernError, match="needs a model"):
            await service.compaction.compact(pid, keep=0)
        assert service.store.events.head_seq(session) == before
    finally:
        service.close()


def st_chat_lines(count: int) -> list[dict]:
    """A SillyTavern chat body: `count` messages after the greeting, Ann and Seraphina taking turns."""
    out = [{"name": "Seraphina", "is_user": False, "is_system": False, "send_date": "2024-03-12T10:00:00.000Z",
            "mes": "Welcome to the glade, traveller.", "extra": {}}]
    for n in range(count):
        out.append({"name": "Ann" if n % 2 == 0 else "Seraphina", "is_user": n % 2 == 0, "is_system": False,
                    "send_date": f"2024-03-{12 + n * 3 // count:02d}T11:00:00.000Z", "mes": line(n), "extra": {}})
    return out


async def test_a_new_user_imports_a_long_chat_binds_a_4k_preset_sends_compacts_and_sends_again(
        server: LoopbackServer, db_url: str, corpus_dir: Path, tmp_path: Path) -> None:
    # The "tried as a new user would" path, through the service the TUI and CLI use.
    settings = Settings(db_url=db_url, provider=ProviderSettings(base_url=server.base_url, model="loop-1", timeout=10))
    service = Tavern(settings)
    try:
        preset = json.loads((corpus_dir / "presets" / "st_openai_default_staging.json").read_text())
        preset["openai_max_context"], preset["openai_max_tokens"] = 4096, 300
        preset_path = tmp_path / "four-k.json"
        preset_path.write_text(json.dumps(preset))
        chat_path = tmp_path / "Seraphina - 2024-3-12@10h00m00s.jsonl"
        header = {"user_name": "Ann", "character_name": "Seraphina", "create_date": "2024-3-12@10h00m00s",
                  "chat_metadata": {}}
        chat_path.write_text("\n".join(json.dumps(o) for o in [header, *st_chat_lines(2000)]) + "\n")
        card, bound = service.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png", preset_path])
        [chat] = service.imports.import_paths([chat_path])
        assert chat.ok, chat
        pid = next(p.id for p in service.playthroughs.playthroughs() if p.character_name == "Seraphina")
        service.presets.bind_preset(pid, bound.id)
        # The gauge before sending: history is being dropped (the warning colour's condition).
        gauge = service.steps.context_gauge(pid)
        assert gauge["limit"] == 4096 - 300 and gauge["dropped_messages"] > 1900 and not gauge["overflow"]
        server.enqueue_sse(sse_chunks_for("A reply."))
        await say(service, pid, "Where are we?")
        sent = server.requests[-1].json["messages"]
        assert cost(service.ctx.token_counter, sent) <= 4096 - 300 and sent[-1]["content"] == "Where are we?"
        trace = service.traces.trace(service.traces.traces(pid)[-1].id)
        dropped = trace["context"]["dropped_messages"]
        assert dropped > 1900 and history_numbers(sent)[0] == dropped - 1  # the greeting was dropped too
        # Compact: the whole range (all but the newest 10) is summarised, in parts that each fit.
        for n in range(200):
            server.enqueue_sse(sse_chunks_for(f"Recap {n}."))
        before = len(server.requests)
        done = await service.compaction.compact(pid)
        parts = server.requests[before:]
        server.clear()
        assert done.requests == len(parts) > 1
        assert all(cost(service.ctx.token_counter, p.json["messages"]) <= 4096 - 300 for p in parts)
        for n, part in enumerate(parts[1:]):  # each later part summarises the summary so far with what follows
            assert part.json["messages"][1]["content"].startswith(f"[Summary of earlier events] Recap {n}.")
        assert done.text == f"Recap {len(parts) - 1}."
        assert done.covers == 2003 - 10  # greeting + 2000 + the exchange just sent, less the 10 kept
        session = service.playthroughs.playthrough(pid).session_id
        surface = [m for m in derive_messages(service.store.events, session) if m.source != "system-prompt"]
        assert len(surface) == 11 and surface[0].source == SUMMARY_SOURCE
        assert all(v.ok for _, v in service.traces.verify_all())
        # Send again: the summary, then the kept messages, then the input; nothing dropped.
        assert service.steps.context_gauge(pid)["dropped_messages"] == 0
        server.enqueue_sse(sse_chunks_for("Another reply."))
        await say(service, pid, "And now?")
        sent = [m["content"] for m in server.requests[-1].json["messages"]]
        at = sent.index(done.text)
        assert sent[at + 1:at + 11] == [line(n) for n in range(1992, 2000)] + ["Where are we?", "A reply."]
        assert sent[-1] == "And now?"
        assert service.traces.trace(service.traces.traces(pid)[-1].id)["context"]["dropped_messages"] == 0
    finally:
        service.close()
