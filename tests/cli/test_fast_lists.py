"""`tavern sessions`, `tavern presets` and `tavern trace list`, read with sqlite3 before the service
opens (`service.list_reads`), print byte for byte what the service path prints: on the corpus
cards and presets, with a fork, a swipe, a branch, a compaction, a deleted message, an archived
chat, a group chat, an imported chat, a persona lock, OOC, a title, recorded traces and two
presets that share a name, and `--character` by name (case-insensitive) or id. What the fast path
does not read (a schema behind, another database, a character named by none or several, a
playthrough that does not exist, a database file not created yet) goes to the service and prints
the same."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import tavern_tui.service.list_reads as list_reads
from tavern_tui.cli.commands import library as library_commands
from tavern_tui.cli.commands import strategy as strategy_commands
from tavern_tui.cli.commands import trace as trace_commands
from tavern_tui.config import Settings
from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel, seed_database
from tests.support.cli import run_cli

SESSION_COMMANDS = (["sessions"], ["sessions", "--json"], ["sessions", "--all"], ["sessions", "--all", "--json"])
PRESET_COMMANDS = (["presets"], ["presets", "--json"])
TRACE_COMMANDS = (["trace", "list"], ["trace", "list", "--json"])


async def _say(tavern: Tavern, model: ScriptedModel, pid: int, *exchanges: tuple[str, str]) -> None:
    for line, reply in exchanges:
        model.enqueue(reply)
        async for _ in tavern.steps.send(pid, line):
            pass


def _imported_chat(folder: Path) -> Path:
    """A SillyTavern chat with Seraphina: the person is "User" in the file, four lines."""
    header = {"user_name": "User", "character_name": "Seraphina", "create_date": "2024-3-12@10h00m00s",
              "chat_metadata": {}}
    lines = [{"name": "User" if n % 2 == 0 else "Seraphina", "is_user": n % 2 == 0, "is_system": False,
              "send_date": "2024-03-12T11:00:00.000Z", "mes": f"Old line {n}.", "extra": {}} for n in range(4)]
    path = folder / "Seraphina - 2024.jsonl"
    path.write_text("\n".join(json.dumps(o) for o in [header, *lines]) + "\n", encoding="utf-8")
    return path


def _twin_presets(corpus_dir: Path, folder: Path) -> list[Path]:
    """Two different presets both named "Twin" (a preset's name is its file's stem)."""
    made = []
    for sub, temperature in (("a", 0.5), ("b", 0.9)):
        (folder / sub).mkdir()
        data = json.loads((corpus_dir / "presets" / "st_openai_default_staging.json").read_text(encoding="utf-8"))
        data["temperature"] = temperature
        (folder / sub / "Twin.json").write_text(json.dumps(data), encoding="utf-8")
        made.append(folder / sub / "Twin.json")
    return made


async def _populate(tavern: Tavern, model: ScriptedModel, corpus_dir: Path, folder: Path) -> dict[str, int]:
    chars = {c.name: c.id for c in tavern.library.characters()}
    new = tavern.playthroughs.new_playthrough
    ids: dict[str, int] = {}
    ids["plain"] = new(chars["Seraphina"]).id
    await _say(tavern, model, ids["plain"], ("Hello there.", "Welcome, traveller."), ("Where am I?", "In the glade."))
    model.enqueue("Another answer.")
    async for _ in tavern.steps.regenerate(ids["plain"]):  # a swipe: a fork of the last reply
        pass
    tavern.persona.new_persona("Bo")
    tavern.persona.use_persona("Bo", ids["plain"])
    first_line = tavern.playthroughs.messages(ids["plain"])[1]
    ids["branch"] = tavern.timeline.branch_playthrough(ids["plain"], first_line.ref).id
    ids["cut"] = new(chars["Coding Sensei"]).id
    await _say(tavern, model, ids["cut"], ("one", "reply one"), ("two", "reply two"))
    tavern.timeline.delete_message(ids["cut"], tavern.playthroughs.messages(ids["cut"])[2].ref)
    tavern.roleplay.set_ooc(ids["cut"], True)
    ids["long"] = new(chars["Shodan"]).id
    session = tavern.playthroughs.playthrough(ids["long"]).session_id
    tavern.store.events.append(session, [
        NewEvent(EventKind.USER_MESSAGE if n % 2 == 0 else EventKind.ASSISTANT_MESSAGE,
                 "user" if n % 2 == 0 else "assistant", {"content": f"Line {n}."}) for n in range(39)])
    model.enqueue("A recap of thirty lines.")
    await tavern.compaction.compact(ids["long"], keep=10)
    tavern.playthroughs.rename(ids["long"], "A long night")
    ids["old"] = new(chars["Skynet"]).id
    tavern.playthroughs.archive(ids["old"])
    ids["group"] = tavern.groups.new_group("Glade", ["Seraphina", "Shodan"])[1].id
    [chat] = tavern.imports.import_paths([_imported_chat(folder)])
    ids["imported"] = chat.id or 0
    presets = [corpus_dir / "presets" / "atelier_1_2.json", corpus_dir / "presets" / "nemo_vivarium_v1_0_beta.json",
               *_twin_presets(corpus_dir, folder)]
    results = tavern.imports.import_paths(presets)
    assert all(r.ok for r in results), [r.error for r in results]
    return ids


@pytest.fixture
async def populated(tmp_path: Path, database_templates: dict[str, Path], corpus_dir: Path,
                    model: ScriptedModel) -> AsyncIterator[tuple[Tavern, str, dict[str, int]]]:
    """The corpus cards' database with the chats, traces and presets `_populate` makes."""
    url = f"sqlite:///{tmp_path / 'tavern.sqlite3'}"
    seed_database(database_templates["corpus"], url)
    tavern = Tavern(Settings(db_url=url), provider=model)
    try:
        yield tavern, url, await _populate(tavern, model, corpus_dir, tmp_path)
    finally:
        tavern.close()


def _env(url: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    return {**env, "TAVERN_HOME": str(home), "TAVERN_DB_URL": url, "TAVERN_USER_NAME": "Ada"}


def _refused(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("the service was opened")


def _fast(args: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    """The command's output when the service must not be opened (the fast path)."""
    with monkeypatch.context() as patch:
        for module in (library_commands, strategy_commands, trace_commands):
            patch.setattr(module, "service_for", _refused)
        done = run_cli(args, env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _served(args: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of the command on the service path only."""
    with monkeypatch.context() as patch:
        for name in ("session_list", "preset_list", "trace_list"):
            patch.setattr(list_reads, name, lambda *_a, **_k: None)
        done = run_cli(args, env)
    return done.returncode, done.stdout, done.stderr


def _same(args: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    fast = _fast(args, env, monkeypatch)
    assert (0, fast, "") == _served(args, env, monkeypatch), args
    return fast


def test_the_lists_read_before_the_service_are_the_services(
        populated: tuple[Tavern, str, dict[str, int]], isolated_profile: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    tavern, url, ids = populated
    env = _env(url, isolated_profile)
    plain_sessions = tavern.store.events.playthrough_sessions(ids["plain"], tavern.playthroughs.playthrough(
        ids["plain"]).session_id)
    seraphina = tavern.library.find_character("Seraphina").id
    commands = [*SESSION_COMMANDS, *PRESET_COMMANDS, *TRACE_COMMANDS,
                ["sessions", "--character", "seraphina", "--json"], ["sessions", "--character", str(seraphina)],
                ["trace", "list", "--playthrough", str(ids["plain"])], ["trace", "list", str(ids["plain"])],
                ["trace", "list", "--json", "--session", str(plain_sessions[0].id)]]
    out = {" ".join(c): _same(list(c), env, monkeypatch) for c in commands}

    listed = {p["id"]: p for p in json.loads(out["sessions --all --json"])}
    # Greeting + two exchanges; the swipe replaces the last reply, the delete takes one away;
    # 40 lines compacted keeping 10: a summary of 30 and the 10 (service/test_played_counts_and_names).
    assert (listed[ids["plain"]]["messages"], listed[ids["cut"]]["messages"]) == (5, 4)
    assert [listed[ids["long"]][k] for k in ("messages", "played", "summarised", "title")] == [11, 40, 30,
                                                                                             "A long night"]
    assert (listed[ids["cut"]]["ooc"], listed[ids["old"]]["archived"]) == (True, True)
    assert listed[ids["plain"]]["user_name"] == "Bo"  # the persona the chat is locked to
    # The configured name (TAVERN_USER_NAME) over the file's "User", which its old lines keep.
    assert (listed[ids["imported"]]["user_name"], listed[ids["imported"]]["imported_user_name"]) == ("Ada", "User")
    assert listed[ids["plain"]]["title"] == "Hello there."  # its first line
    # A character's own chats, by name in any case or by id: not the group chat it leads.
    sera = {p["id"] for p in json.loads(out["sessions --character seraphina --json"])}
    assert sera == {ids["plain"], ids["branch"], ids["imported"]}
    assert {int(line.split()[0]) for line in out[f"sessions --character {seraphina}"].splitlines()} == sera
    assert ids["old"] not in {p["id"] for p in json.loads(out["sessions --json"])}
    group_line = next(line for line in out["sessions"].splitlines() if line.split()[0] == str(ids["group"]))
    assert "Glade (group)" in group_line
    assert "(archived)" in next(line for line in out["sessions --all"].splitlines()
                                if line.split()[0] == str(ids["old"]))

    presets = json.loads(out["presets --json"])
    # FACTS.md: atelier 88 prompts, 50 sent by its 100001 order; vivarium 16 prompts, 8 sent.
    facts = {p["name"]: (p["prompts"], p["order_source"], p["enabled"]) for p in presets}
    assert (facts["atelier_1_2"], facts["nemo_vivarium_v1_0_beta"]) == ((88, "100001", 50), (16, "100001", 8))
    twins = [p for p in presets if p["name"] == "Twin"]
    assert len(twins) == 2 and all(f"Twin (Twin.json #{p['id']})" in out["presets"] for p in twins)
    assert "SillyTavern default (built in)" in out["presets"] and "12 prompts" in out["presets"]

    traces = json.loads(out["trace list --json"])
    # Two sends and a swipe in `plain`, two sends in `cut`, one summary request in `long`.
    assert len(traces) == 6 and {t["outcome"] for t in traces} == {"ok"}
    assert len(out[f"trace list --playthrough {ids['plain']}"].splitlines()) == 1 + 3  # the header, then three
    # The playthrough as `show` and `preview` take it (a trial: "unrecognized arguments: 1").
    assert out[f"trace list {ids['plain']}"] == out[f"trace list --playthrough {ids['plain']}"]
    assert [t["session_id"] for t in json.loads(out[f"trace list --json --session {plain_sessions[0].id}"])] == [
        plain_sessions[0].id] * 2


def test_the_fast_views_are_the_services_views(populated: tuple[Tavern, str, dict[str, int]]) -> None:
    tavern, url, ids = populated
    listed = list_reads.session_list(url, tavern.ctx.settings.user_name, include_archived=True, with_groups=True)
    assert listed is not None
    assert listed.playthroughs == tavern.playthroughs.playthroughs(include_archived=True)
    assert listed.groups == {ids["group"]: "Glade"}
    presets = list_reads.preset_list(url)
    assert presets is not None and presets.presets == tavern.presets.presets()
    assert presets.default == tavern.presets.preset_of(None)[0]
    assert list_reads.trace_list(url) == tavern.traces.traces()
    assert list_reads.trace_list(url, ids["long"]) == tavern.traces.traces(ids["long"]) != []


def _copy(url: str, target: Path, change: Callable[[sqlite3.Connection], None]) -> str:
    path = Path(url.removeprefix("sqlite:///"))
    with sqlite3.connect(path) as source, sqlite3.connect(target) as copy:
        source.backup(copy)  # the WAL's pages too
    with sqlite3.connect(target) as conn:
        change(conn)
    return f"sqlite:///{target}"


def test_what_the_fast_path_does_not_read_goes_to_the_service(
        populated: tuple[Tavern, str, dict[str, int]], isolated_profile: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    tavern, url, ids = populated
    before = {" ".join(c): _served(list(c), _env(url, isolated_profile), monkeypatch)
              for c in (*SESSION_COMMANDS, *PRESET_COMMANDS, *TRACE_COMMANDS)}

    def back_to_0021(conn: sqlite3.Connection) -> None:  # as migration 0022's downgrade leaves it
        conn.execute("ALTER TABLE playthroughs DROP COLUMN opening_draft")
        conn.execute("UPDATE alembic_version SET version_num = '0021'")

    behind = _copy(url, tmp_path / "behind.sqlite3", back_to_0021)
    assert list_reads.session_list(behind, "User") is None and list_reads.preset_list(behind) is None
    assert list_reads.trace_list(behind) is None
    # The service migrates it (0022 adds a column no listed chat uses) and lists the same.
    for command, served in before.items():
        assert run_cli(command.split(), _env(behind, isolated_profile)).stdout == served[1], command
    assert list_reads.session_list(behind, "User") is not None  # at head now

    broken = _copy(url, tmp_path / "broken.sqlite3",
                   lambda conn: conn.execute("UPDATE playthroughs SET meta = '{\"ooc\": tru' WHERE id = ?",
                                             (ids["cut"],)))
    # A meta that is not JSON reads as the service reads it (`roleplay.ooc_of`: OOC off).
    assert list_reads.session_list(broken, "User") is not None
    env = _env(broken, isolated_profile)
    assert run_cli(["sessions", "--json"], env).stdout == _served(["sessions", "--json"], env, monkeypatch)[1]

    assert list_reads.session_list("postgresql://u@localhost/tavern", "User") is None
    assert list_reads.preset_list("sqlite://") is None and list_reads.trace_list("sqlite:///:memory:") is None
    assert list_reads.trace_list(url, 9999) is None  # the service says there is no such playthrough
    env = _env(url, isolated_profile)
    for args in (["trace", "list", "--playthrough", "9999"], ["sessions", "--character", "Nobody"]):
        fast = run_cli(args, env)
        assert (fast.returncode, fast.stdout, fast.stderr) == _served(args, env, monkeypatch), args
    assert "no playthrough with id 9999" in run_cli(["trace", "list", "--playthrough", "9999"], env).stderr
    assert "no character named 'Nobody'" in run_cli(["sessions", "--character", "Nobody"], env).stderr


def test_a_database_not_created_yet_is_created_by_the_service_and_lists_nothing(
        isolated_profile: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new' / 'tavern.sqlite3'}"
    assert list_reads.session_list(url, "User") is None and list_reads.preset_list(url) is None
    assert list_reads.trace_list(url) is None and not (tmp_path / "new").exists()
    env = _env(url, isolated_profile)
    listed = run_cli(["sessions"], env)
    assert (listed.returncode, listed.stdout) == (0, "no playthroughs yet; start one with `tavern chat CHARACTER "
                                                     "--say TEXT` or in the TUI\n")
    assert (tmp_path / "new" / "tavern.sqlite3").is_file()  # as every command opening the service makes it
    assert run_cli(["trace", "list"], env).stdout == "no recorded requests yet\n"
    assert run_cli(["presets", "--json"], env).stdout == "[]\n"
    assert list_reads.session_list(url, "User") == list_reads.SessionList([], {})  # read before the service now
