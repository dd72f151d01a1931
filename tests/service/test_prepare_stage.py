"""The step's prepare stage and `request/context` record through the service, against the real
OpenAI-compatible adapter and the loopback SSE server (seed 000 §1 `prepareCall()`, DESIGN.md
"One step"): a provider whose endpoint URL is unusable refuses the step before anything is
admitted, the typed line stays in the inbox and the error names what to fix; with the settings
fixed, the queued line goes with the next step. The step's `request/context` holds the adapter
context and no credential, anywhere in the database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.assembly.basic import MEMORY_CONTEXT, with_memory
from tavern_tui.config import Settings
from tavern_tui.engine.events import EventKind
from tavern_tui.errors import TavernError
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.providers.openai_compat import OpenAICompatProvider
from tavern_tui.service import Tavern
from tests.support.loopback import LoopbackServer, sse_chunks_for

KEY = "sk-fake-prepare-5d1c0a9e7b"
URL_PASSWORD = "lantern-moss-4411"


def _session_events(tavern: Tavern, pid: int) -> list[object]:
    return tavern.store.events.surface_events(tavern.playthroughs.playthrough(pid).session_id)


async def test_an_unusable_endpoint_is_refused_by_prepare_and_the_fixed_settings_send_the_queued_line(
        tmp_path: Path, corpus_dir: Path) -> None:
    db = tmp_path / "tavern.sqlite3"
    # The provider's own endpoint is wrong while the settings name none (the early check passes):
    # the step's prepare stage is what refuses it.
    broken = OpenAICompatProvider(ProviderSettings(base_url="ftp://127.0.0.1/v1", model="loop-1", api_key=KEY))
    tavern = Tavern(Settings(db_url=f"sqlite:///{db}"), provider=broken)
    try:
        cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
        assert cid is not None
        pid = tavern.playthroughs.new_playthrough(cid).id
        with pytest.raises(TavernError) as refused:
            async for _ in tavern.steps.send(pid, "I wake up under the oak."):
                pass
        message = str(refused.value)
        assert "'ftp://127.0.0.1/v1' must start with http:// or https://" in message
        assert "set [provider] base_url in config.toml" in message and "your message is kept in the queue" in message
        kinds = [e.kind for e in _session_events(tavern, pid)]  # type: ignore[attr-defined]
        assert EventKind.USER_MESSAGE not in kinds and EventKind.SYSTEM_MESSAGE not in kinds
        assert [item.text for item in tavern.inbox.pending(pid)] == ["I wake up under the oak."]
        with LoopbackServer() as server:
            server.enqueue_sse(sse_chunks_for("*Seraphina smiles.* You are awake.", pieces=3))
            base = server.base_url.replace("http://", f"http://me:{URL_PASSWORD}@")
            await tavern.apply_settings(Settings(db_url=f"sqlite:///{db}",
                                                 provider=ProviderSettings(base_url=base, model="loop-1", api_key=KEY)))
            async for _ in tavern.steps.run_queued(pid):
                pass
            sent = server.requests[0].json
            port = server.base_url.split(":")[2].split("/")[0]
        assert sent["messages"][-1] == {"role": "user", "content": "I wake up under the oak."}
        assert [m.content for m in tavern.playthroughs.messages(pid)][1:] == [
            "I wake up under the oak.", "*Seraphina smiles.* You are awake."]
        assert tavern.inbox.pending(pid) == []
        events = _session_events(tavern, pid)
        [call] = [e for e in events if e.kind == EventKind.REQUEST_CONTEXT]  # type: ignore[attr-defined]
        assert call.body["adapter"]["endpoint"] == f"http://127.0.0.1:{port}"  # no user, password or path
        assert call.body["adapter"]["model"] == "loop-1" and call.body["adapter"]["provider"] == "openai-compatible"
        for event in events:
            body = json.dumps(event.body)  # type: ignore[attr-defined]
            assert KEY not in body and URL_PASSWORD not in body
        trace = tavern.traces.trace(tavern.traces.traces(pid)[-1].id)
        assert trace["request_context"] == call.body
    finally:
        await tavern.aclose_provider()
        tavern.close()
    stored = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))
    assert KEY.encode() not in stored and URL_PASSWORD.encode() not in stored


def test_the_memory_entry_is_reread_replaced_dropped_or_added() -> None:
    proposed = (("note", "N"), (MEMORY_CONTEXT, "old"))
    assert with_memory(proposed, "new") == (("note", "N"), (MEMORY_CONTEXT, "new"))
    assert with_memory(proposed, "  ") == (("note", "N"),)  # no longer applies: cleared at admission
    assert with_memory((("note", "N"),), "fresh") == (("note", "N"), (MEMORY_CONTEXT, "fresh"))
