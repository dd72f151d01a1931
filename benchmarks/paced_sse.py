"""A loopback OpenAI-compatible SSE server with scripted pacing, for `stream_render` and
`turn_overhead` (performance-anchors §7: "a fake OpenAI-compatible SSE server on 127.0.0.1
with scripted pacing and bursts").

Each request is answered by the next script: a wait before the first byte (time to first
byte), then network writes of 1-20 SSE events each (seeded), each write sent when its tokens
are due at the scripted rate (tokens/s; 0 = unpaced). The server records when each write left
(`time.perf_counter`, the same clock as the benchmark in this process).
"""

from __future__ import annotations

import json
import queue
import random
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
    grouped 1-`burst` tokens per network write (seeded by `seed`)."""

    tokens: list[str]
    rate: float = 0.0
    ttfb: float = 0.0
    burst: int = 20
    seed: int = 1
    sent: list[tuple[float, int]] = field(default_factory=list)
    """(perf_counter when the write left, characters of reply text sent so far), per write."""
    received_at: float = 0.0
    done_at: float = 0.0


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
            script = self.server.scripts.get_nowait()
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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    scripts: queue.Queue[Script]


class PacedServer:
    """The server on 127.0.0.1 (an ephemeral port) in a background thread; `base_url` is the
    OpenAI-style root (`…/v1`). Use as a context manager."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.scripts = queue.Queue()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def enqueue(self, script: Script) -> Script:
        """Answer the next request with `script` (returned, to read its timings afterwards)."""
        self._server.scripts.put(script)
        return script

    def __enter__(self) -> PacedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
