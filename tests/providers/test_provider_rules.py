"""Provider conformance through a real step (issue 24 item 5), on the loopback server: an error
object inside a 200 event stream keeps the upstream message in what the person sees, the attempt
and the trace; an unsupported reasoning effort is preflighted to the adapter default (seed 000 §3:
"Unsupported effort preflight uses the adapter default rather than guessing an alias"); another
rejected parameter fails naming it and the one step past it, which is recorded and shown in the
trace. The per-field fallback rules are tested against the provider in
tests/providers/test_config_fallback.py."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tavern_tui.cli import main
from tavern_tui.config import Settings
from tavern_tui.engine.events import EventKind
from tavern_tui.engine.step import StepFailed
from tavern_tui.errors import BadRequestError
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.service import Tavern
from tests.support.loopback import LoopbackServer, sse_chunks_for

# llama.cpp's server answer when the prompt does not fit (its `exceed_context_size_error`).
CONTEXT_ERROR = {"code": 400, "message": "request (4476 tokens) exceeds the available context size (4096 tokens), "
                                         "try increasing it", "type": "exceed_context_size_error",
                 "n_prompt_tokens": 4476, "n_ctx": 4096}



def make(server: LoopbackServer, db_url: str, corpus_dir: Path, tmp_path: Path, effort: str = "") -> tuple[Tavern, int]:
    settings = Settings(db_url=db_url, provider=ProviderSettings(base_url=server.base_url, model="loop-1",
                                                                 api_key="", timeout=10))
    service = Tavern(settings)
    preset = json.loads((corpus_dir / "presets" / "st_openai_default_staging.json").read_text(encoding="utf-8"))
    if effort:
        preset["reasoning_effort"] = effort
    path = tmp_path / "Preset.json"
    path.write_text(json.dumps(preset), encoding="utf-8")
    card, bound = service.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png", path])
    pid = service.playthroughs.new_playthrough(card.id, user_name="Ann").id
    service.presets.bind_preset(pid, bound.id)
    return service, pid


async def say(service: Tavern, pid: int, text: str) -> None:
    async for _ in service.steps.send(pid, text):
        pass


@pytest.mark.parametrize("line", [
    "error: " + json.dumps(CONTEXT_ERROR) + "\n\n",  # llama.cpp: an `error:` line after the 200 status
    "data: " + json.dumps(CONTEXT_ERROR) + "\n\n",  # the object without the {"error": …} wrapper
    "data: " + json.dumps({"error": CONTEXT_ERROR}) + "\n\n",  # the OpenAI shape
])
async def test_an_error_inside_a_200_stream_keeps_the_upstream_message(server: LoopbackServer, db_url: str,
                                                                       corpus_dir: Path, tmp_path: Path,
                                                                       line: str) -> None:
    service, pid = make(server, db_url, corpus_dir, tmp_path)
    server.enqueue_sse([line], done=False)
    with pytest.raises(StepFailed) as info:
        await say(service, pid, "Tell me everything.")
    upstream = "exceeds the available context size (4096 tokens)"
    seen = str(info.value)
    assert upstream in seen and "base URL" not in seen
    assert isinstance(info.value.cause, BadRequestError)
    attempt = info.value.attempt
    assert attempt is not None and attempt.kind == EventKind.ASSISTANT_ATTEMPT
    assert upstream in attempt.body["error"]["message"]
    [trace] = service.traces.traces(pid)
    assert trace.outcome == "failed"
    assert upstream in trace.attempts[0]["message"]
    service.close()


@pytest.mark.parametrize(("effort", "sent"), [("min", None), ("max", None), ("auto", None), ("high", "high")])
async def test_reasoning_effort_is_preflighted_to_the_adapter_default(server: LoopbackServer, db_url: str,
                                                                       corpus_dir: Path, tmp_path: Path,
                                                                       effort: str, sent: str | None) -> None:
    service, pid = make(server, db_url, corpus_dir, tmp_path, effort)
    server.enqueue_sse(sse_chunks_for("Hm."))
    await say(service, pid, "Hello.")
    body = server.requests[0].json
    assert body.get("reasoning_effort") == sent  # "min" is never sent as "low", nor "max" as "high"
    [trace] = service.traces.traces(pid)
    notes = service.traces.trace(trace.id)["adjustments"]
    assert any(f"reasoning effort {effort!r} not sent" in n for n in notes) == (effort in ("min", "max"))
    assert len(server.requests) == 1  # preflight: no refused request first
    service.close()


async def test_another_rejected_parameter_names_it_and_the_one_step_past_it(server: LoopbackServer, db_url: str,
                                                                            corpus_dir: Path, tmp_path: Path) -> None:
    service, pid = make(server, db_url, corpus_dir, tmp_path)
    server.enqueue_json(400, {"error": {"message": "Unsupported parameter: 'top_p' is not supported with this model.",
                                        "type": "invalid_request_error", "param": "top_p",
                                        "code": "unsupported_parameter"}})
    with pytest.raises(StepFailed) as info:
        await say(service, pid, "Hello.")
    assert len(server.requests) == 1 and server.requests[0].json["top_p"] == 1  # not retried
    command = f"tavern omit-param {pid} top_p"
    assert "rejected the call parameter 'top_p'" in str(info.value) and command in str(info.value)
    # The one step, as printed.
    out, err = io.StringIO(), io.StringIO()
    assert main(["--db", db_url, *command.split()[1:]], out, err) == 0, err.getvalue()
    assert "leaves out: top_p" in out.getvalue()
    server.enqueue_sse(sse_chunks_for("Better."))
    await say(service, pid, "Hello again.")
    second = server.requests[1].json
    assert "top_p" not in second and second["temperature"] == 1  # only top_p goes
    trace = service.traces.traces(pid)[-1]
    assert "top_p" not in trace.config
    notes = service.traces.trace(trace.id)["adjustments"]
    assert any("'top_p' left out for this playthrough" in n for n in notes)
    # Undone, it is sent again; the preset itself never changed.
    assert main(["--db", db_url, "omit-param", str(pid), "top_p", "--send"], io.StringIO(), io.StringIO()) == 0
    assert service.steps.preview(pid)["config"]["top_p"] == 1
    service.close()
