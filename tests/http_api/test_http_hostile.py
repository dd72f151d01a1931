"""The persona HTTP routes answer hostile requests with a clear 4xx, never a 500 (issue 23
item 7): a lone surrogate, a deeply nested body, a 27-digit id, a chunked body over the cap
(refused while it is read, not after)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from tavern_tui.http_api import MAX_BODY, READ, WRITE, build_app
from tavern_tui.service import Tavern

TOKEN = "w-token-1234"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


@pytest.fixture
def client(tavern: Tavern) -> TestClient:
    return TestClient(build_app(tavern, enabled=True, tokens={TOKEN: frozenset({READ, WRITE})}),
                      raise_server_exceptions=False)


def test_a_lone_surrogate_in_the_body_is_a_422_naming_the_field(client: TestClient, tavern: Tavern) -> None:
    answer = client.put("/v1/persona", headers=AUTH, content=b'{"expected_version": 0, "add": "cut \\ud83d"}')
    assert answer.status_code == 422 and answer.json()["field"] == "add"
    assert "lone UTF-16 surrogate" in answer.json()["message"]
    assert tavern.persona.persona().version == 0


@pytest.mark.parametrize("depth", [101, 5000])
def test_a_deeply_nested_body_is_a_422(client: TestClient, depth: int) -> None:
    body = b'{"expected_version": 0, "entries": ' + b"[" * depth + b"]" * depth + b"}"
    answer = client.put("/v1/persona", headers=AUTH, content=body)
    assert answer.status_code == 422 and "nested more than 100 levels deep" in answer.json()["message"]


def test_a_27_digit_id_is_not_found(client: TestClient) -> None:
    answer = client.post("/v1/persona/nominations/123456789012345678901234567/affirm", headers=AUTH, json={})
    assert answer.status_code == 404 and answer.json()["error"] == "not_found"


def test_a_huge_number_in_the_body_is_a_422(client: TestClient) -> None:
    answer = client.put("/v1/persona", headers=AUTH, content=b'{"expected_version": ' + b"9" * 5000 + b"}")
    assert answer.status_code == 422 and "a number of 5000 characters" in answer.json()["message"]


async def test_a_chunked_body_over_the_cap_is_refused_while_it_is_read(tavern: Tavern) -> None:
    # Straight at the ASGI app: a test client would buffer the whole body before the app saw it.
    app = build_app(tavern, enabled=True, tokens={TOKEN: frozenset({READ, WRITE})})
    piece, pieces = 64 * 1024, 64  # 4 MiB offered, chunked (no Content-Length)
    read: list[int] = []
    sent: list[dict] = []

    async def receive() -> dict:
        read.append(1)
        if len(read) > pieces:
            return {"type": "http.request", "body": b"", "more_body": False}
        return {"type": "http.request", "body": b"a" * piece, "more_body": True}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "PUT", "scheme": "http",
             "path": "/v1/persona", "raw_path": b"/v1/persona", "query_string": b"", "root_path": "",
             "headers": [(b"authorization", f"Bearer {TOKEN}".encode()), (b"transfer-encoding", b"chunked")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8765)}
    await app(scope, receive, send)
    assert sent[0]["status"] == 413
    assert b"over 1048576 bytes" in sent[1]["body"]
    assert len(read) == MAX_BODY // piece + 1  # stopped at the first chunk past the cap, not at 4 MiB


def test_a_host_other_than_the_bound_loopback_names_is_refused(tavern: Tavern) -> None:
    app = build_app(tavern, enabled=True, tokens={TOKEN: frozenset({READ, WRITE})}, hosts=["127.0.0.1", "localhost"])
    auth = {"Authorization": f"Bearer {TOKEN}"}
    local = TestClient(app, base_url="http://127.0.0.1:8765")
    assert local.get("/v1/health").status_code == 200
    assert TestClient(app, base_url="http://localhost:8765").get("/v1/persona", headers=auth).status_code == 200
    rebound = TestClient(app, base_url="http://attacker.example:8765")  # DNS rebinding: a page's own name
    answer = rebound.get("/v1/persona", headers=auth)
    assert answer.status_code == 400 and "Ada" not in answer.text
