"""Provides `LoopbackServer`: a scripted OpenAI-compatible HTTP/1.1 server on 127.0.0.1 for tests.

Not a test module. Import it as `from tests.support.loopback import LoopbackServer`.

The server runs `http.server.ThreadingHTTPServer` in a background thread on an ephemeral
port. Each incoming request is recorded in `requests`, then answered by the next scripted
response: an SSE stream (chunked transfer encoding, one chunk per scripted piece, written
and flushed separately with TCP_NODELAY, so the client really reads them apart), a JSON
answer, or a hang. With an empty script the server answers 500 with a JSON error naming
the problem, so a missing `enqueue_*` shows up as a clear failure.
"""

from __future__ import annotations

import json
import queue
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["LoopbackServer", "RecordedRequest", "sse_chunks_for", "sse_tool_call_chunks", "rechunk",
           "closed_port_url"]


@dataclass
class RecordedRequest:
    """One request as the server received it.

    Attributes:
        method, path: e.g. "POST", "/v1/chat/completions".
        headers: header names lower-cased → value.
        body: raw body bytes.
        json: the body parsed as JSON, or None when it is not JSON.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = None


@dataclass
class _Script:
    kind: str  # "sse" | "json" | "hang"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)
    delay: float = 0.0
    body: bytes = b""
    seconds: float = 0.0
    abort: bool = False
    gate: threading.Event | None = None
    gate_after: int = 1


def _bytes(piece: bytes | str) -> bytes:
    return piece.encode("utf-8") if isinstance(piece, str) else piece


def rechunk(chunks: Iterable[bytes | str], size: int) -> list[bytes]:
    """Join `chunks` and cut the result into pieces of `size` bytes (the last may be shorter)."""
    data = b"".join(_bytes(c) for c in chunks)
    return [data[i : i + size] for i in range(0, len(data), size)]


def sse_chunks_for(
    text: str,
    *,
    pieces: int = 3,
    reasoning: str | None = None,
    usage: tuple[int, int] | None = (10, 5),
    finish_reason: str | None = "stop",
    model: str = "loopback-model",
    eol: str = "\n",
) -> list[str]:
    """Realistic OpenAI `chat.completion.chunk` SSE events for `text`.

    Args:
        text: the reply, split into `pieces` roughly equal content deltas.
        pieces: number of content deltas (at least 1).
        reasoning: when given, sent first as `delta.reasoning_content` deltas (2 pieces).
        usage: (prompt_tokens, completion_tokens) for a final usage-only chunk with
            `choices: []` (as `stream_options.include_usage` produces), or None for none.
        finish_reason: put on a last choice chunk with an empty delta.
        model: the `model` field of every chunk.
        eol: line ending ("\\n", "\\r\\n" or "\\r").

    Returns:
        One string per event, each ending with a blank line; `[DONE]` is NOT included
        (`LoopbackServer.enqueue_sse(done=True)` appends it).
    """

    def event(choices: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> str:
        obj: dict[str, Any] = {
            "id": "chatcmpl-loopback",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": model,
            "choices": choices,
        }
        obj.update(extra or {})
        return f"data: {json.dumps(obj, ensure_ascii=False)}{eol}{eol}"

    def split(s: str, n: int) -> list[str]:
        n = max(1, min(n, len(s))) if s else 1
        step = -(-len(s) // n) if s else 1
        return [s[i : i + step] for i in range(0, len(s), step)] or [""]

    out = [event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
    for part in split(reasoning, 2) if reasoning else []:
        out.append(event([{"index": 0, "delta": {"reasoning_content": part}, "finish_reason": None}]))
    for part in split(text, pieces):
        out.append(event([{"index": 0, "delta": {"content": part}, "finish_reason": None}]))
    out.append(event([{"index": 0, "delta": {}, "finish_reason": finish_reason}]))
    if usage is not None:
        prompt, completion = usage
        totals = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        out.append(event([], {"usage": totals}))
    return out


def sse_tool_call_chunks(
    calls: Sequence[tuple[str, str, str]],
    *,
    text: str = "",
    pieces: int = 3,
    interleave: bool = False,
    finish_reason: str | None = "tool_calls",
    usage: tuple[int, int] | None = (10, 5),
    model: str = "loopback-model",
) -> list[str]:
    """OpenAI `chat.completion.chunk` SSE events for a reply that calls tools, as OpenAI streams
    them: the first fragment of each call carries `index`, `id`, `type` and `function.name` with
    empty arguments, later fragments carry only `index` and a piece of `function.arguments`.

    Args:
        calls: (id, name, arguments JSON text) per call; the arguments are sent verbatim (they
            may be invalid JSON), cut into `pieces` fragments.
        text: content deltas sent before the calls (a reply that talks, then calls).
        interleave: send the calls' argument fragments round-robin by index (call 0 piece 1,
            call 1 piece 1, call 0 piece 2, …) instead of one call after the other.
        finish_reason: on the last choice chunk ("tool_calls" as OpenAI sends).
        usage: as `sse_chunks_for`.

    Returns:
        One string per event; `[DONE]` not included (`enqueue_sse(done=True)` appends it).
    """

    def event(choices: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> str:
        obj: dict[str, Any] = {"id": "chatcmpl-loopback", "object": "chat.completion.chunk",
                               "created": 1700000000, "model": model, "choices": choices}
        obj.update(extra or {})
        return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"

    def delta(d: dict[str, Any]) -> str:
        return event([{"index": 0, "delta": d, "finish_reason": None}])

    def split(s: str, n: int) -> list[str]:
        if not s:
            return []
        step = -(-len(s) // max(1, min(n, len(s))))
        return [s[i : i + step] for i in range(0, len(s), step)]

    out = [delta({"role": "assistant", "content": None if not text else ""})]
    for part in split(text, pieces):
        out.append(delta({"content": part}))
    heads = [delta({"tool_calls": [{"index": i, "id": cid, "type": "function",
                                    "function": {"name": name, "arguments": ""}}]})
             for i, (cid, name, _args) in enumerate(calls)]
    fragments = [[delta({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                  for piece in split(args, pieces)] for i, (_cid, _name, args) in enumerate(calls)]
    if interleave:
        out += heads
        for row in range(max((len(f) for f in fragments), default=0)):
            out += [f[row] for f in fragments if row < len(f)]
    else:
        for head, frags in zip(heads, fragments):
            out += [head, *frags]
    out.append(event([{"index": 0, "delta": {}, "finish_reason": finish_reason}]))
    if usage is not None:
        prompt, completion = usage
        out.append(event([], {"usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                        "total_tokens": prompt + completion}}))
    return out


def closed_port_url() -> str:
    """A base URL on 127.0.0.1 whose port was just free; connecting there is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 5  # a keep-alive connection nobody closes frees its thread after this

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep pytest output clean

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._serve()

    def do_POST(self) -> None:  # noqa: N802
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        owner = self.server.owner
        if self.command == "GET":  # a context probe (/models, /props): its own script, never the queue's
            owner._record_get(RecordedRequest(self.command, self.path, headers, body, parsed))
            with owner._lock:
                scripted = owner._gets.get(self.path)
                script = scripted.pop(0) if scripted else _Script(
                    "json", 404, body=b'{"error": {"message": "loopback: no GET scripted", "type": "loopback"}}')
            self._send_json(script)
            return
        owner._record(RecordedRequest(self.command, self.path, headers, body, parsed))
        try:
            script = owner._scripts.get_nowait()
        except queue.Empty:
            script = _Script("json", 500,
                             body=b'{"error": {"message": "loopback: no scripted response", "type": "loopback"}}')
        getattr(self, f"_send_{script.kind}")(script)

    def _head(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def _send_json(self, script: _Script) -> None:
        headers = {"Content-Type": "application/json", "Content-Length": str(len(script.body))}
        headers.update(script.headers)
        self._head(script.status, headers)
        self.wfile.write(script.body)
        self.wfile.flush()

    def _send_sse(self, script: _Script) -> None:
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "Transfer-Encoding": "chunked"}
        headers.update(script.headers)
        self._head(script.status, headers)
        try:
            for sent, chunk in enumerate(script.chunks):
                if script.gate is not None and sent == script.gate_after:
                    while not script.gate.wait(0.05):  # held open until the test lets it go on
                        if self.server.owner._stopping.is_set():
                            return
                if script.delay and self.server.owner._stopping.wait(script.delay):
                    break
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.server.owner.hangups += 1  # the client closed the stream early
            self.close_connection = True
            return
        if script.abort:
            self.close_connection = True  # drop without the terminating chunk: a broken stream
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _send_hang(self, script: _Script) -> None:
        self.server.owner._stopping.wait(script.seconds)
        self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: LoopbackServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the client hanging up mid-stream is expected in tests (cancellation, timeouts)


class LoopbackServer:
    """A scripted OpenAI-compatible server on 127.0.0.1; use as a context manager.

    Attributes:
        base_url: "http://127.0.0.1:PORT/v1" (append "/chat/completions" for the endpoint).
        requests: every non-GET `RecordedRequest` received, in order.
        gets: every GET received (the provider's context probe: `/models`, `/props`), in order;
            answered from `enqueue_get`'s per-path scripts, else 404, never from the main queue.
        hangups: how many SSE answers the client cut off by closing the connection.
    """

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.gets: list[RecordedRequest] = []
        self._gets: dict[str, list[_Script]] = {}
        self.hangups = 0
        self._scripts: queue.Queue[_Script] = queue.Queue()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    def start(self) -> LoopbackServer:
        """Bind an ephemeral port and serve in a daemon thread."""
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake hanging handlers, close the listening socket."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def enqueue_sse(
        self,
        chunks: Sequence[bytes | str],
        delay: float = 0,
        status: int = 200,
        headers: dict[str, str] | None = None,
        done: bool = True,
        *,
        abort: bool = False,
        gate: threading.Event | None = None,
        gate_after: int = 1,
    ) -> None:
        """Script an event-stream answer.

        Args:
            chunks: raw pieces of the body, each sent as its own HTTP chunk (write + flush);
                they need not align with events or even with UTF-8 characters.
            delay: seconds to wait before each piece.
            status: HTTP status line.
            headers: extra or overriding response headers.
            done: append `data: [DONE]\\n\\n` as a last piece.
            abort: close the socket after the pieces without the terminating chunk, so the
                client sees a broken connection rather than a clean end.
            gate: when given, the stream stops after `gate_after` pieces until the test sets it
                (a reply that streams until something else has happened, however slow the machine).
        """
        pieces = [_bytes(c) for c in chunks] + ([b"data: [DONE]\n\n"] if done else [])
        self._scripts.put(_Script("sse", status, dict(headers or {}), pieces, delay, abort=abort, gate=gate,
                                  gate_after=gate_after))

    def _record_get(self, request: RecordedRequest) -> None:
        with self._lock:
            self.gets.append(request)

    def enqueue_get(self, path: str, status: int, obj: Any) -> None:
        """Script the answer to the next GET of `path` (e.g. "/v1/models", "/props")."""
        body = _bytes(obj) if isinstance(obj, (bytes, str)) else json.dumps(obj).encode("utf-8")
        with self._lock:
            self._gets.setdefault(path, []).append(_Script("json", status, {}, body=body))

    def enqueue_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        """Script a Content-Length framed answer; `obj` is JSON-encoded unless it is bytes/str (sent raw)."""
        body = _bytes(obj) if isinstance(obj, (bytes, str)) else json.dumps(obj).encode("utf-8")
        self._scripts.put(_Script("json", status, dict(headers or {}), body=body))

    def enqueue_hang(self, seconds: float) -> None:
        """Script a server that reads the request and sends nothing for `seconds`, then hangs up."""
        self._scripts.put(_Script("hang", seconds=seconds))

    def clear(self) -> int:
        """Drop the scripted answers no request has taken yet; returns how many."""
        dropped = 0
        while True:
            try:
                self._scripts.get_nowait()
            except queue.Empty:
                return dropped
            dropped += 1

    def wait_idle(self, timeout: float = 1.0) -> bool:
        """Wait until every scripted answer was taken; True when the script is empty."""
        deadline = time.monotonic() + timeout
        while not self._scripts.empty():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True
