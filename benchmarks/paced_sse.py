"""A loopback OpenAI-compatible SSE server with scripted pacing, for `stream_render` and
`turn_overhead` (performance-anchors §7: "a fake OpenAI-compatible SSE server on 127.0.0.1
with scripted pacing and bursts").

Each request is answered by the next script: a wait before the first byte (time to first
byte), then network writes of 1-20 SSE events each (seeded), each write sent when its tokens
are due at the scripted rate (tokens/s; 0 = unpaced). The server records when each write left.

The server runs in a process of its own (`python -m benchmarks.paced_sse`), as a real endpoint
does: in a thread of the measured process its writes took the GIL from the app's event loop,
which the loop meter counted as the app's busy time and the time to first byte as the app's
overhead. Scripts go to it as JSON lines on its stdin; it reports each answer's timings as JSON
lines on its stdout. Both processes read `time.perf_counter`, which on Linux is the system-wide
CLOCK_MONOTONIC; the server's first line carries its clock, checked to fall between the
benchmark's readings around the server's start.
"""

from __future__ import annotations

import json
import os
import queue
import random
import re
import select
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPLY_HEAD = "## The road north\n\n*She folds the map and looks at you.*\n\n"


def long_reply(tokens: int = 1500) -> str:
    """A reply of about `tokens` tokens (one word or punctuation mark each, ~4 characters) with
    headings, lists and a 40-line code fence, as B6 asks."""
    parts = [REPLY_HEAD]
    words = ("the river bends where the old mill stands and the path climbs through pine and stone "
             "toward a pass that few still walk").split()
    count = 0
    section = 0
    while count < tokens:
        section += 1
        parts.append(f"### Part {section}\n\n")
        for i in range(4):
            line = " ".join(words[(section + i + k) % len(words)] for k in range(9))
            parts.append(f"- **step {i + 1}**: {line}\n")
        parts.append("\n" + " ".join(words[(section * 3 + k) % len(words)] for k in range(60)) + ".\n\n")
        if section == 2:
            parts.append("```python\n" + "".join(f"route_{n} = plan(step={n}, pace='slow')  # leg {n}\n"
                                                  for n in range(40)) + "```\n\n")
        count = len(tokenize("".join(parts)))
    return "".join(parts)


def tokenize(text: str) -> list[str]:
    """`text` cut into ~tokens: a word with the spaces before it, or one other character."""
    return re.findall(r"\s*\w+|\s*[^\w\s]|\s+", text)


def _event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    obj = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000, "model": "bench",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(obj)}\n\n".encode()


@dataclass
class Script:
    """One answer: `tokens` sent at `rate` tokens/s (0 = as fast as possible) after `ttfb` s,
    grouped 1-`burst` tokens per network write (seeded by `seed`). Its timings (`sent`,
    `received_at`, `done_at`) are the server's report: 0/empty until `poll` or `finished` took it."""

    tokens: list[str]
    rate: float = 0.0
    ttfb: float = 0.0
    burst: int = 20
    seed: int = 1
    sent: list[tuple[float, int]] = field(default_factory=list)
    """(perf_counter when the write left, characters of reply text sent so far), per write."""
    received_at: float = 0.0
    done_at: float = 0.0
    id: int = 0
    server: PacedServer | None = field(default=None, repr=False)

    def spec(self) -> dict[str, Any]:
        """What the server process needs of it."""
        return {"id": self.id, "tokens": self.tokens, "rate": self.rate, "ttfb": self.ttfb, "burst": self.burst,
                "seed": self.seed}

    def poll(self) -> bool:
        """Whether the server has reported this answer done (its timings taken); never waits."""
        if not self.done_at and self.server is not None:
            self.server.take_reports(0.0)
        return bool(self.done_at)

    def finished(self, timeout: float = 30.0) -> Script:
        """Wait for the server's report of this answer (the stream has ended); returns self.

        Raises:
            TimeoutError: no report within `timeout` seconds.
        """
        deadline = time.monotonic() + timeout
        while not self.done_at:
            left = deadline - time.monotonic()
            if left <= 0 or self.server is None:
                raise TimeoutError(f"the server did not report answer {self.id}")
            self.server.take_reports(left)
        return self


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        received = time.perf_counter()
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            script = self.server.scripts.get(timeout=5)  # its JSON line may still be on its way
        except queue.Empty:
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        script.received_at = received
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        rng = random.Random(script.seed)
        writes: list[list[bytes]] = [[_event({"role": "assistant", "content": ""})]]
        upto = [0]  # reply characters sent once each write has left
        i = 0
        while i < len(script.tokens):
            n = rng.randint(1, script.burst)
            writes.append([_event({"content": t}) for t in script.tokens[i:i + n]])
            upto.append(upto[-1] + sum(len(t) for t in script.tokens[i:i + n]))
            i += n
        writes.append([_event({}, "stop"), b"data: [DONE]\n\n"])
        upto.append(upto[-1])
        start = received + script.ttfb
        due = start
        try:
            for w, events in enumerate(writes):
                if 0 < w < len(writes) - 1 and script.rate:
                    due += len(events) / script.rate
                wait = due - time.perf_counter() if w else start - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                body = b"".join(events)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(body), body))
                self.wfile.flush()
                script.sent.append((time.perf_counter(), upto[w]))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        script.done_at = time.perf_counter()
        self.server.report(script)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    scripts: queue.Queue[Script]
    _out = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closed its kept-alive connection (the app shutting down) is not an error
        worth a traceback in the figures; anything else is printed as the standard library does."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)

    def report(self, script: Script) -> None:
        """One answer's timings, as a JSON line on stdout (for `PacedServer.take_reports`)."""
        line = json.dumps({"id": script.id, "received_at": script.received_at, "done_at": script.done_at,
                           "sent": script.sent})
        with self._out:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


def serve() -> None:
    """The server process: announce the port and clock, then read scripts from stdin until it closes."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.scripts = queue.Queue()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdout.write(json.dumps({"port": server.server_address[1], "clock": time.perf_counter()}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        spec = json.loads(line)
        server.scripts.put(Script(spec["tokens"], spec["rate"], spec["ttfb"], spec["burst"], spec["seed"],
                                  id=spec["id"]))
    server.shutdown()


class PacedServer:
    """The server on 127.0.0.1 (an ephemeral port) in a process of its own; `base_url` is the
    OpenAI-style root (`…/v1`). Use as a context manager.

    Raises:
        RuntimeError: the server did not start, or its clock is not this process's.
    """

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._scripts: dict[int, Script] = {}
        self.base_url = ""

    def enqueue(self, script: Script) -> Script:
        """Answer the next request with `script` (returned, to read its timings afterwards)."""
        assert self._proc is not None and self._proc.stdin is not None
        script.id, script.server = len(self._scripts) + 1, self
        self._scripts[script.id] = script
        self._proc.stdin.write(json.dumps(script.spec()).encode() + b"\n")
        self._proc.stdin.flush()
        return script

    def take_reports(self, timeout: float) -> None:
        """Take the server's reports that have arrived, waiting up to `timeout` s for one when none has."""
        line = self._line(timeout)
        while line is not None:
            report = json.loads(line)
            script = self._scripts[report["id"]]
            script.received_at, script.sent = report["received_at"], [tuple(w) for w in report["sent"]]
            script.done_at = report["done_at"]
            line = self._line(0.0)

    def _line(self, timeout: float) -> bytes | None:
        """The server's next stdout line, waiting up to `timeout` s (None: none came)."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise RuntimeError("the paced server ended")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def __enter__(self) -> PacedServer:
        root = str(Path(__file__).resolve().parent.parent)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        before = time.perf_counter()
        self._proc = subprocess.Popen([sys.executable, "-m", "benchmarks.paced_sse"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, env=env)
        line = self._line(30.0)
        after = time.perf_counter()
        if line is None:
            raise RuntimeError("the paced server did not start")
        ready = json.loads(line)
        if not before <= ready["clock"] <= after:
            raise RuntimeError("the paced server's perf_counter is not this process's clock")
        self.base_url = f"http://127.0.0.1:{ready['port']}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


if __name__ == "__main__":
    serve()
