"""A lost terminal or a quit signal ends the TUI: the real app runs in tmux (a real terminal),
opens a 2,000-message chat, and is hung up on half-way through opening (`tmux kill-session`, what
an SSH drop does, or SIGHUP), or sent SIGTERM while a worker waits on a SQLite write lock the
test holds. The process must be gone within a generous deadline and the database writable."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (a real terminal)")

MESSAGES = 2000
GONE_DEADLINE = 30.0
"""Seconds the process has to end after the hang-up (the watchdog's grace is a few)."""


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tavern_tui", *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def _long_chat(path: Path) -> Path:
    lines = [{"user_name": "You", "character_name": "Seraphina", "create_date": "2024-03-12T10:00:00.000Z"}]
    for n in range(MESSAGES):
        user = n % 2 == 1
        lines.append({"name": "You" if user else "Seraphina", "is_user": user, "is_system": False,
                      "send_date": f"2024-03-12T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
                      "mes": f"line {n}: " + ("I look around the glade." if user else "*She tends the fire.* Rest."),
                      "extra": {}})
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


class Tmux:
    """A private tmux server (its own socket) running one session."""

    def __init__(self, tmp: Path) -> None:
        self.socket = f"tavern-test-{uuid.uuid4().hex[:10]}"
        self.tmp = tmp

    def run(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30,
                              check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"tmux {args}: {done.stderr}")
        return done.stdout

    def start(self, env: dict[str, str]) -> int:
        script = self.tmp / "start.sh"
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()
                          if k.startswith(("TAVERN_", "PATH", "HOME", "LANG", "LC_", "PYTHON", "VIRTUAL_ENV")))
        # (Textual draws on stderr: it stays the terminal)
        script.write_text(f"{exports}export TERM=xterm-256color\nexec {shlex.quote(sys.executable)} -m tavern_tui\n",
                          encoding="utf-8")
        self.run("new-session", "-d", "-s", "t", "-x", "120", "-y", "40", f"sh {shlex.quote(str(script))}")
        return int(self.run("list-panes", "-t", "t", "-F", "#{pane_pid}").split()[0])

    def screen(self) -> str:
        return self.run("capture-pane", "-t", "t", "-p", check=False)

    def wait_for(self, text: str, deadline: float = 60.0) -> None:
        end = time.monotonic() + deadline
        while text not in self.screen():
            assert time.monotonic() < end, f"{text!r} never showed:\n{self.screen()}"
            time.sleep(0.1)

    def close(self) -> None:
        self.run("kill-server", check=False)


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return "State:\tZ" not in status  # a zombie has ended; its parent reaps it


def _wait_gone(pid: int) -> float:
    start = time.monotonic()
    while _alive(pid):
        if time.monotonic() - start > GONE_DEADLINE:
            os.kill(pid, 9)
            raise AssertionError(f"the TUI (pid {pid}) was still alive {GONE_DEADLINE:g} s after the hang-up")
        time.sleep(0.1)
    return time.monotonic() - start


def _write_succeeds(db: Path) -> None:
    connection = sqlite3.connect(db, timeout=1.0, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("CREATE TABLE IF NOT EXISTS probe_after_exit (x)")
        connection.execute("COMMIT")
    finally:
        connection.close()


@pytest.fixture
def prepared(isolated_profile: Path, corpus_dir: Path, tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env["TAVERN_HOME"] = str(isolated_profile)
    assert _cli(["import", str(corpus_dir / "cards" / "seraphina_chara_ccv3.png")], env).returncode == 0
    imported = _cli(["import", str(_long_chat(tmp_path / "long.jsonl"))], env)
    assert imported.returncode == 0, imported.stderr
    yield env, isolated_profile / "data" / "tavern.sqlite3"


@pytest.mark.parametrize("how", ["kill-session", "SIGHUP"])
def test_a_hang_up_half_way_through_opening_a_long_chat_ends_the_process(
        how: str, prepared: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    env, db = prepared
    tmux = Tmux(tmp_path)
    try:
        pid = tmux.start(env)
        tmux.wait_for("Seraphina")
        tmux.run("send-keys", "-t", "t", "Enter")
        time.sleep(0.5)  # the kill point of the report: half a second into opening (not a synchronisation)
        if how == "kill-session":
            tmux.run("kill-session", "-t", "t")
        else:
            os.kill(pid, 1)
        took = _wait_gone(pid)
    finally:
        tmux.close()
    print(f"{how}: gone after {took:.2f} s")
    _write_succeeds(db)


def test_sigterm_while_a_worker_waits_on_the_write_lock_ends_the_process(
        prepared: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    env, db = prepared
    tmux = Tmux(tmp_path)
    holder = sqlite3.connect(db, timeout=30.0, isolation_level=None)
    try:
        pid = tmux.start(env)
        tmux.wait_for("Seraphina")
        holder.execute("BEGIN IMMEDIATE")  # every write of the app now waits on this lock
        tmux.run("send-keys", "-t", "t", "Enter")
        time.sleep(1.0)  # the kill point: the opening's write is waiting on the lock (not a synchronisation)
        os.kill(pid, 15)
        took = _wait_gone(pid)  # while the lock is still held
        print(f"SIGTERM: gone after {took:.2f} s")
        holder.execute("ROLLBACK")
    finally:
        holder.close()
        tmux.close()
    _write_succeeds(db)
