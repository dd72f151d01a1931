"""The `tavern` command line end to end against the loopback SSE server: commands run in this process
(`tests/support/cli.py`) unless the process itself is the point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.loopback import LoopbackServer, sse_chunks_for

SECRET = "sk-test-DO-NOT-LEAK-1234567890"


def _run(args: list[str], env: dict[str, str], timeout: float = 60, *,
         process: bool = False) -> subprocess.CompletedProcess[str]:
    """`tavern ARGS` with `env`: in this process (`tests/support/cli.py`), or with `process` in a real one."""
    if not process:
        return run_cli(args, env, timeout=timeout)
    return subprocess.run([sys.executable, "-m", "tavern_tui", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture
def cli_env(isolated_profile: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env["TAVERN_HOME"] = str(isolated_profile)
    return env


def test_import_json_lists_results_and_fails_on_a_broken_file(cli_env: dict[str, str], corpus_dir: Path,
                                                             tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"spec": "chara_card_v2", "data": {}}', encoding="utf-8")
    done = _run(["import", "--json", str(corpus_dir / "cards" / "skynet_v1_legacy.png"), str(broken)], cli_env)
    assert done.returncode == 1
    results = json.loads(done.stdout)
    assert [(r["kind"], r["name"], r["error"] is None) for r in results] == [("character", "Skynet", True),
                                                                             ("character", None, False)]
    assert isinstance(results[0]["id"], int) and str(broken) in results[1]["error"]
    ok = _run(["import", str(corpus_dir / "cards")], cli_env)
    assert ok.returncode == 0
    assert ok.stdout.count("imported character") == 6 and "already imported" in ok.stdout
    # Skynet was imported above: its line says so up front, with the id it already has
    skynet = corpus_dir / "cards" / "skynet_v1_legacy.png"
    assert f"already imported character {results[0]['id']}: Skynet  [{skynet}]\n" in ok.stdout
    assert "(already imported)" not in ok.stdout


def test_chat_against_a_loopback_server_then_a_new_process_reads_the_session(cli_env: dict[str, str],
                                                                             corpus_dir: Path) -> None:
    assert _run(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], cli_env).returncode == 0
    with LoopbackServer() as server:
        server.enqueue_sse(sse_chunks_for("*Seraphina tends to your wounds.* Rest now.", pieces=4, usage=(321, 12)))
        env = {**cli_env, "TAVERN_API_BASE": server.base_url, "TAVERN_MODEL": "loop-1", "TAVERN_API_KEY": SECRET}
        chat = _run(["chat", "Seraphina", "--say", "Where am I?"], env)
        assert chat.returncode == 0, chat.stderr
        assert chat.stdout.strip() == "*Seraphina tends to your wounds.* Rest now."
        assert "openai-compatible · loop-1" in chat.stderr
        request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    body = request.json
    assert body["model"] == "loop-1" and body["stream"] is True
    assert [m["role"] for m in body["messages"]] == ["system", "assistant", "user"]
    assert body["messages"][0]["content"].startswith(
        "Write Seraphina's next reply in a fictional chat between Seraphina and User.")
    assert body["messages"][2]["content"] == "Where am I?"

    shown = _run(["show", "1", "--json"], cli_env)  # a new process, no provider settings
    assert shown.returncode == 0, shown.stderr
    messages = json.loads(shown.stdout)["messages"]
    assert [(m["role"], m["origin"], m["kind"]) for m in messages] == [
        ("assistant", "engine", "assistant/message"),
        ("user", "customer", "user/message"),
        ("assistant", "agent", "assistant/message"),
    ]
    assert messages[1]["content"] == "Where am I?"
    assert messages[2]["content"] == "*Seraphina tends to your wounds.* Rest now."
    sessions = json.loads(_run(["sessions", "--json"], cli_env).stdout)
    assert [(s["id"], s["character"], s["messages"]) for s in sessions] == [(1, "Seraphina", 3)]
    # The key never reaches the database.
    db = Path(cli_env["TAVERN_HOME"]) / "data" / "tavern.sqlite3"
    stored = b"".join(p.read_bytes() for p in db.parent.glob("tavern.sqlite3*"))
    assert SECRET.encode() not in stored


def test_chat_reports_a_classified_error_and_show_lists_the_failed_reply(cli_env: dict[str, str],
                                                                        corpus_dir: Path) -> None:
    assert _run(["import", str(corpus_dir / "cards" / "skynet_v1_legacy.png")], cli_env).returncode == 0
    with LoopbackServer() as server:
        server.enqueue_json(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
        env = {**cli_env, "TAVERN_API_BASE": server.base_url, "TAVERN_API_KEY": SECRET}
        chat = _run(["chat", "Skynet", "--say", "status report"], env)
    assert chat.returncode == 1
    assert "error (authentication)" in chat.stderr and "Incorrect API key" in chat.stderr
    assert SECRET not in chat.stderr and SECRET not in chat.stdout
    shown = json.loads(_run(["show", "1", "--json"], cli_env).stdout)["messages"]
    assert [(m["role"], m["partial"]) for m in shown] == [("assistant", False), ("user", False), ("assistant", True)]
    assert (shown[2]["content"], shown[2]["error_category"]) == ("", "authentication")
    text = _run(["show", "1"], cli_env).stdout
    assert "[assistant · agent · partial: " in text and "(no text arrived)" in text


def test_chat_without_an_endpoint_uses_the_labelled_demo(cli_env: dict[str, str], corpus_dir: Path) -> None:
    assert _run(["import", str(corpus_dir / "cards" / "coding_sensei_v2.png")], cli_env).returncode == 0
    chat = _run(["chat", "coding sensei", "--say", "hello"], cli_env)
    assert chat.returncode == 0, chat.stderr
    assert "[demo reply" in chat.stdout and "demo · demo" in chat.stderr
    new = _run(["chat", "Coding Sensei", "--say", "again", "--new"], cli_env)
    assert "started playthrough 2" in new.stderr
    listed = json.loads(_run(["sessions", "--json"], cli_env).stdout)
    assert [s["id"] for s in listed] == [2, 1]


def test_unknown_character_is_a_clear_error(cli_env: dict[str, str]) -> None:
    done = _run(["chat", "Nobody", "--say", "hi"], cli_env)
    assert done.returncode == 1 and "no character named 'Nobody'" in done.stderr


def test_global_options_work_after_the_command_and_bad_databases_are_plain_errors(cli_env: dict[str, str],
                                                                                tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'elsewhere' / 'db.sqlite3'}"
    after = _run(["sessions", "--db", url, "--json"], cli_env)
    assert after.returncode == 0 and json.loads(after.stdout) == []
    assert (tmp_path / "elsewhere" / "db.sqlite3").is_file()
    missing_driver = _run(["--db", "postgresql+nosuchdriver://u:secretpw@127.0.0.1:1/db", "sessions"], cli_env)
    assert missing_driver.returncode == 1 and "Traceback" not in missing_driver.stderr
    assert missing_driver.stderr.startswith("error: ") and "secretpw" not in missing_driver.stderr
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("x")
    bad_folder = _run(["sessions", "--db", f"sqlite:///{blocked / 'sub' / 'db.sqlite3'}"], cli_env)
    assert bad_folder.returncode == 1 and "cannot create the database folder" in bad_folder.stderr
    assert "Traceback" not in bad_folder.stderr


def test_lore_import_bind_list_and_export_round_trip(cli_env: dict[str, str], corpus_dir: Path, tmp_path: Path) -> None:
    done = _run(["import", "--json", str(corpus_dir / "worldbooks"),
                 str(corpus_dir / "cards" / "skynet_v1_legacy.png")], cli_env)
    assert done.returncode == 0, done.stderr
    kinds = [(r["kind"], r["name"]) for r in json.loads(done.stdout)]
    # SillyTavern names an imported book after its file (src/endpoints/worldinfo.js `/import`),
    # whatever `name` the JSON holds ("Honkai Impact RPG", "Hogwarts Legacy Lore").
    assert kinds == [("world_book", "eldoria_st_release_oldformat"), ("world_book", "eldoria_st_staging"),
                     ("world_book", "hogwarts_agnai_memory"), ("world_book", "honkai_chub_st_hybrid"),
                     ("character", "Skynet")]
    bound = _run(["lore", "bind", "HONKAI_chub_st_hybrid", "--global"], cli_env)
    assert bound.stdout == "honkai_chub_st_hybrid bound to global\n"
    assert "already bound" in _run(["lore", "bind", "4", "--global"], cli_env).stdout
    assert _run(["lore", "bind", "hogwarts_agnai_memory", "--character", "skynet"], cli_env).returncode == 0
    listed = {b["name"]: b for b in json.loads(_run(["lore", "list", "--json"], cli_env).stdout)}
    honkai = listed["honkai_chub_st_hybrid"]
    assert honkai["bindings"] == ["global"] and honkai["entries"] == 34
    assert listed["hogwarts_agnai_memory"]["bindings"] == ["character:1"]
    out = tmp_path / "honkai.json"
    assert _run(["lore", "export", "--id", "4", "--out", str(out)], cli_env).returncode == 0
    exported = json.loads(out.read_text(encoding="utf-8"))
    assert len(exported["entries"]) == 34
    # uid 13 (key "14" in the Chub file) is the one constant entry (FACTS.md), kept by uid on export
    assert exported["entries"]["13"]["constant"] is True and exported["entries"]["15"]["disable"] is True
    missing = _run(["lore", "bind", "Nope", "--global"], cli_env)
    assert missing.returncode == 1 and "no world book named 'Nope'" in missing.stderr


def test_lore_test_prints_each_decision_with_rolls_settings_and_history(
        cli_env: dict[str, str], tmp_path: Path) -> None:
    book = {"entries": {
        "0": {"uid": 0, "key": ["busy"], "content": "Work is hectic.", "order": 50},
        "1": {"uid": 1, "key": ["dragon"], "content": "Dragons sleep.", "probability": 10, "useProbability": True,
              "order": 10},
        "2": {"uid": 2, "key": ["AI"], "content": "An AI.", "order": 20},
        "3": {"uid": 3, "key": ["old"], "content": "Old news.", "order": 30},
    }}
    path = tmp_path / "book.json"
    path.write_text(json.dumps(book), encoding="utf-8")
    history = tmp_path / "history.json"
    history.write_text(json.dumps([{"name": "Ada", "role": "user", "text": "an old story"},
                                   {"name": "Bot", "role": "assistant", "text": "Maine is a state, ain't it?"}]))

    def decisions(*extra: str) -> dict[int, dict]:
        done = _run(["lore", "test", str(path), "--input", "I'm busy with a dragon", "--json", *extra], cli_env)
        assert done.returncode == 0, done.stderr
        return {d["uid"]: d for d in json.loads(done.stdout)}

    pinned_low = decisions("--roll", "10", "--history", str(history))
    assert pinned_low[0]["fired"] and pinned_low[0]["reason"] == "key" and pinned_low[0]["matched_in"] == "input"
    assert pinned_low[1]["fired"]  # roll 10 <= probability 10
    assert not pinned_low[2]["fired"] and pinned_low[2]["reason"] == "no_match"  # "AI" is not a word in "ain't"
    # Default scan depth 2 covers the input and the newest message only, not "an old story".
    assert pinned_low[3]["fired"] is False and pinned_low[3]["reason"] == "no_match"
    for field_name in ("book", "uid", "fired", "reason", "position", "depth", "order"):
        assert field_name in pinned_low[0]
    pinned_high = decisions("--roll", "11")
    assert not pinned_high[1]["fired"] and pinned_high[1]["reason"] == "probability_failed"
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"world_info_depth": 3, "max_context": 8192}))
    deeper = decisions("--roll", "0", "--history", str(history), "--settings", str(settings))
    assert deeper[3]["fired"] and deeper[3]["reason"] == "key"  # depth 3 reaches "an old story"
    fired_order = [uid for uid, d in deeper.items() if d["fired"]]
    assert fired_order == [1, 3, 0]  # prompt insertion order: ascending `order` (10, 30, 50)
    text = _run(["lore", "test", str(path), "--input", "busy"], cli_env).stdout
    assert text.splitlines()[0].startswith("fired   book#0: key: key 'busy' found in the input")
    bad = _run(["lore", "test", str(path), "--input", "x", "--settings", str(history)], cli_env)
    assert bad.returncode == 1 and str(history) in bad.stderr and "Traceback" not in bad.stderr


def test_lore_test_reads_a_sillytavern_chat_as_history(cli_env: dict[str, str], tmp_path: Path) -> None:
    book = {"entries": {"0": {"uid": 0, "key": ["lantern"], "content": "The lantern is cursed."},
                        "1": {"uid": 1, "key": ["narrator"], "content": "Hidden lines are not scanned."}}}
    path = tmp_path / "book.json"
    path.write_text(json.dumps(book), encoding="utf-8")
    chat = tmp_path / "chat.jsonl"
    lines = [{"user_name": "Ann", "character_name": "Mira", "chat_metadata": {}},
             {"name": "SillyTavern System", "is_user": False, "is_system": True, "mes": "narrator note"},
             {"name": "Mira", "is_user": False, "is_system": False, "mes": "Take the lantern.",
              "swipes": ["Take the torch.", "Take the lantern."], "swipe_id": 1}]
    chat.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    done = _run(["lore", "test", str(path), "--input", "ok", "--history", str(chat), "--json"], cli_env)
    assert done.returncode == 0, done.stderr
    decided = {d["uid"]: d for d in json.loads(done.stdout)}
    assert decided[0]["fired"]  # the chosen swipe (swipe_id 1) is what was said
    assert not decided[1]["fired"]  # is_system lines are hidden from the scan


def test_projection_with_a_preset_sends_the_preset_order_and_preview_matches_the_next_request(
        cli_env: dict[str, str], corpus_dir: Path) -> None:
    from tavern_tui.formats.cards import parse_card
    from tavern_tui.text.names import substitute_names

    card_path = corpus_dir / "cards" / "seraphina_chara_ccv3.png"
    card = parse_card(card_path.read_bytes(), card_path.name)
    assert _run(["import", str(card_path), str(corpus_dir / "presets" / "st_openai_default_staging.json")],
                cli_env).returncode == 0
    with LoopbackServer() as server:
        server.enqueue_sse(sse_chunks_for("*She smiles.*"))
        server.enqueue_sse(sse_chunks_for("*She nods.*"))
        env = {**cli_env, "TAVERN_API_BASE": server.base_url, "TAVERN_MODEL": "loop-1"}
        chat = _run(["chat", "Seraphina", "--say", "Where am I?", "--preset", "st_openai_default_staging",
                     "--strategy", "projection"], env)
        assert chat.returncode == 0, chat.stderr
        body = server.requests[0].json
        messages = body["messages"]
        # Default.json 100001: main first (its text, names filled), then the card's description …
        assert messages[0] == {"role": "system", "content": "Write Seraphina's next reply in a fictional chat between "
                                                            "Seraphina and User."}
        # … the history starts with the new-chat line, and the input is the last message.
        history_start = [m["content"] for m in messages].index("[Start a new Chat]")
        description = {"role": "system", "content": substitute_names(card.data["description"], "Seraphina", "User")}
        assert description in messages[1:history_start]
        assert messages[history_start + 1]["role"] == "assistant"  # the greeting
        assert messages[-1] == {"role": "user", "content": "Where am I?"}
        # Preset parameters are call config only (Default.json: temperature 1, openai_max_tokens 300).
        assert body["temperature"] == 1 and body["max_tokens"] == 300
        preview = _run(["preview", "1", "--input", "And now?", "--json"], env)
        assert preview.returncode == 0, preview.stderr
        shown = json.loads(preview.stdout)
        assert shown["strategy"] == "projection" and shown["tokens"]["total"] > 0
        sent = _run(["chat", "Seraphina", "--say", "And now?", "--playthrough", "1"], env)
        assert sent.returncode == 0, sent.stderr
        second = server.requests[1].json["messages"]
    assert [{k: v for k, v in m.items() if k != "source"} for m in shown["messages"]] == second
    # Request-only bodies never enter the chat history: no system section was admitted.
    history = json.loads(_run(["show", "1", "--json", "--system"], cli_env).stdout)["messages"]
    assert [m["role"] for m in history] == ["assistant", "user", "assistant", "user", "assistant"]
