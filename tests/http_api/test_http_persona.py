"""The optional persona HTTP routes (seed 002 ADR-0079 decision 10) against a real `Tavern` on SQLite."""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from tavern_tui import http_api
from tavern_tui.errors import TavernError
from tavern_tui.http_api import ENABLE_ENV, READ, TOKENS_ENV, WRITE, build_app, parse_tokens, serve
from tavern_tui.service import Tavern

READER = "read-token-1234"
WRITER = "write-token-5678"
TOKENS = {READER: frozenset({READ}), WRITER: frozenset({READ, WRITE})}
SECRET = "sk-proj-Abc123Def456Ghi789Jkl012Mno345"

PERSONA_ROUTES = [("GET", "/v1/persona"), ("PUT", "/v1/persona"), ("GET", "/v1/persona/history"),
                  ("GET", "/v1/persona/nominations"), ("POST", "/v1/persona/nominations/1/affirm"),
                  ("POST", "/v1/persona/nominations/1/decline")]


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def client(tavern: Tavern) -> TestClient:
    """The persona routes mounted, with a read token and a read+write token."""
    return TestClient(build_app(tavern, enabled=True, tokens=TOKENS))


def nominate(tavern: Tavern, corpus_dir: Path, *texts: str) -> int:
    """Send the person's messages through the real step pipeline, then consolidate; the playthrough id."""
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "skynet_v1_legacy.png"])[0].id
    assert cid is not None
    pid = tavern.playthroughs.new_playthrough(cid).id

    async def talk() -> None:
        for text in texts:
            async for _ in tavern.steps.send(pid, text):
                pass

    asyncio.run(talk())
    tavern.persona.consolidate(pid)
    return pid


# -- mounting --------------------------------------------------------------------------------------


def test_routes_are_absent_when_not_enabled(tavern: Tavern) -> None:
    client = TestClient(build_app(tavern, enabled=False, tokens=TOKENS))
    for method, path in PERSONA_ROUTES:
        assert client.request(method, path, headers=auth(WRITER)).status_code == 404, (method, path)
    assert client.get("/v1/health").json() == {"ok": True}


@pytest.mark.parametrize("value", [None, "", "0", "false", "no", "FALSE"])
def test_routes_are_absent_by_default_from_the_environment(tavern: Tavern, monkeypatch: pytest.MonkeyPatch,
                                                           value: str | None) -> None:
    monkeypatch.setenv(TOKENS_ENV, f"{WRITER}:{READ}+{WRITE}")
    if value is None:
        monkeypatch.delenv(ENABLE_ENV, raising=False)
    else:
        monkeypatch.setenv(ENABLE_ENV, value)
    client = TestClient(build_app(tavern))
    for method, path in PERSONA_ROUTES:
        assert client.request(method, path, headers=auth(WRITER)).status_code == 404, (method, path)
    assert client.get("/v1/health").status_code == 200


def test_the_environment_enables_the_routes_and_supplies_the_tokens(tavern: Tavern,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENABLE_ENV, "1")
    monkeypatch.setenv(TOKENS_ENV, f"{WRITER}:{READ}+{WRITE},{READER}:{READ}")
    client = TestClient(build_app(tavern))
    assert client.get("/v1/persona", headers=auth(READER)).status_code == 200
    assert client.put("/v1/persona", headers=auth(READER), json={"expected_version": 0, "add": "x"}).status_code == 403
    assert client.get("/v1/persona").status_code == 401


def test_a_malformed_token_variable_fails_the_app_without_echoing_the_token(tavern: Tavern,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENABLE_ENV, "yes")
    monkeypatch.setenv(TOKENS_ENV, f"{WRITER}:{READ},hunter2-token-value")
    with pytest.raises(TavernError) as caught:
        build_app(tavern)
    assert "item 2" in str(caught.value)
    assert "hunter2" not in str(caught.value) and WRITER not in str(caught.value)


def test_exactly_six_persona_routes_each_with_one_method(tavern: Tavern) -> None:
    app = build_app(tavern, enabled=True, tokens=TOKENS)
    mounted = sorted((method, route.path) for route in app.routes if isinstance(route, Route)
                     for method in route.methods or () if method != "HEAD")
    expected = sorted([("GET", "/v1/health")] + [
        (method, path.replace("/1/", "/{belief_id:int}/")) for method, path in PERSONA_ROUTES])
    assert mounted == expected


# -- auth --------------------------------------------------------------------------------------------


def test_every_route_answers_401_without_a_token_or_with_an_unknown_one(client: TestClient) -> None:
    for headers in ({}, auth("not-a-token"), {"Authorization": READER}, {"Authorization": f"Basic {READER}"},
                    {"Authorization": "Bearer "}):
        for method, path in PERSONA_ROUTES:
            response = client.request(method, path, headers=headers, json={"expected_version": 0, "add": "x"})
            assert response.status_code == 401, (method, path, headers)
            assert response.headers["www-authenticate"] == "Bearer"
            assert "not-a-token" not in response.text and READER not in response.text


def test_a_read_token_is_forbidden_on_every_write_route(client: TestClient, tavern: Tavern) -> None:
    for method, path in PERSONA_ROUTES:
        if method == "GET":
            continue
        response = client.request(method, path, headers=auth(READER), json={"expected_version": 0, "add": "x"})
        assert response.status_code == 403, (method, path)
        assert response.json()["error"] == "forbidden" and WRITE in response.json()["message"]
        assert READER not in response.text
    assert tavern.persona.persona().version == 0 and tavern.persona.persona_history() == []


def test_a_write_only_token_cannot_read(tavern: Tavern) -> None:
    client = TestClient(build_app(tavern, enabled=True, tokens={"w-only": frozenset({WRITE})}))
    assert client.get("/v1/persona", headers=auth("w-only")).status_code == 403


def test_reads_answer_200_with_the_service_shapes(client: TestClient, tavern: Tavern) -> None:
    shown = client.get("/v1/persona", headers=auth(READER))
    assert shown.status_code == 200 and shown.json() == tavern.persona.persona().to_json()
    assert shown.json()["version"] == 0 and shown.json()["entries"] == []
    assert client.get("/v1/persona/history", headers=auth(READER)).json() == []
    assert client.get("/v1/persona/nominations", headers=auth(READER)).json() == []


# -- writes --------------------------------------------------------------------------------------------


def test_put_adds_an_entry_and_get_shows_it_one_version_later(client: TestClient, tavern: Tavern) -> None:
    before = client.get("/v1/persona", headers=auth(READER)).json()
    written = client.put("/v1/persona", headers=auth(WRITER),
                         json={"expected_version": before["version"], "add": "{{user}} is a lighthouse keeper.",
                               "sensitivity": "low", "name": "Sam"})
    assert written.status_code == 200, written.text
    shown = client.get("/v1/persona", headers=auth(READER)).json()
    assert shown == written.json() == tavern.persona.persona().to_json()
    assert shown["version"] == before["version"] + 1 and shown["name"] == "Sam"
    assert [(e["text"], e["provenance"], e["sensitivity"]) for e in shown["entries"]] == [
        ("{{user}} is a lighthouse keeper.", "owner", "low")]
    history = client.get("/v1/persona/history", headers=auth(READER)).json()
    assert [d["version"] for d in history] == [1]

    removed = client.put("/v1/persona", headers=auth(WRITER),
                         json={"expected_version": 1, "remove": shown["entries"][0]["id"]})
    assert removed.status_code == 200 and removed.json()["entries"] == [] and removed.json()["version"] == 2
    replaced = client.put("/v1/persona", headers=auth(WRITER),
                          json={"expected_version": 2,
                                "entries": [{"text": "A"}, {"text": "B", "sensitivity": "high"}]})
    assert [e["text"] for e in replaced.json()["entries"]] == ["A", "B"]


def test_a_stale_expected_version_is_409_and_writes_nothing(client: TestClient, tavern: Tavern) -> None:
    client.put("/v1/persona", headers=auth(WRITER), json={"expected_version": 0, "add": "first"})
    history = len(tavern.persona.persona_history())
    response = client.put("/v1/persona", headers=auth(WRITER), json={"expected_version": 0, "add": "second"})
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "conflict" and body["expected"] == 0 and body["current"] == 1 and body["message"]
    assert len(tavern.persona.persona_history()) == history
    assert [e.text for e in tavern.persona.persona().entries] == ["first"]


@pytest.mark.parametrize("body", [{"add": "x"}, {"expected_version": "0", "add": "x"},
                                  {"expected_version": None, "add": "x"}, {"expected_version": True, "add": "x"},
                                  {"expected_version": 1.0, "add": "x"}])
def test_put_without_an_integer_expected_version_is_422(client: TestClient, tavern: Tavern,
                                                        body: dict[str, Any]) -> None:
    response = client.put("/v1/persona", headers=auth(WRITER), json=body)
    assert response.status_code == 422
    assert response.json()["error"] == "invalid" and response.json()["field"] == "expected_version"
    assert tavern.persona.persona_history() == []


@pytest.mark.parametrize("body", [{"expected_version": 0, "add": 3}, {"expected_version": 0, "remove": "1"},
                                  {"expected_version": 0, "entries": "A"}, {"expected_version": 0, "where": "x"},
                                  {"expected_version": 0, "name": ["Sam"]}, [1, 2]])
def test_put_with_a_field_of_the_wrong_type_or_unknown_is_422(client: TestClient, tavern: Tavern, body: Any) -> None:
    response = client.put("/v1/persona", headers=auth(WRITER), json=body)
    assert response.status_code == 422 and response.json()["error"] == "invalid"
    assert tavern.persona.persona_history() == []


def test_bad_json_is_400_and_service_refusals_are_400_or_404(client: TestClient, tavern: Tavern) -> None:
    bad = client.put("/v1/persona", headers={**auth(WRITER), "Content-Type": "application/json"}, content=b"{oops")
    assert bad.status_code == 400 and bad.json()["error"] == "bad_json"
    assert client.put("/v1/persona", headers=auth(WRITER)).status_code == 422  # no body at all
    nothing = client.put("/v1/persona", headers=auth(WRITER), json={"expected_version": 0})
    assert nothing.status_code == 400 and "nothing to change" in nothing.json()["message"]
    level = client.put("/v1/persona", headers=auth(WRITER), json={"expected_version": 0, "add": "x",
                                                                   "sensitivity": "extreme"})
    assert level.status_code == 400 and level.json()["error"] == "bad_request"
    missing = client.post("/v1/persona/nominations/999/affirm", headers=auth(WRITER))
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    assert client.post("/v1/persona/nominations/999/decline", headers=auth(WRITER)).status_code == 404
    assert client.post("/v1/persona/nominations/abc/affirm", headers=auth(WRITER)).status_code == 404
    assert tavern.persona.persona_history() == []


@pytest.mark.parametrize("body", [{"expected_version": 0, "add": f"my key is {SECRET}"},
                                  {"expected_version": 0, "name": f"Sam {SECRET}"},
                                  {"expected_version": 0, "entries": [{"text": "fine"}, {"text": f"x {SECRET}"}]}])
def test_secret_text_is_422_naming_the_kind_and_never_echoed(client: TestClient, tavern: Tavern,
                                                             body: dict[str, Any]) -> None:
    response = client.put("/v1/persona", headers=auth(WRITER), json=body)
    assert response.status_code == 422
    payload = response.json()
    assert payload["error"] == "secret_refused" and payload["kind"] == "api_key"
    assert "api key" in payload["message"]
    assert SECRET not in response.text and SECRET[:12] not in response.text
    assert tavern.persona.persona_history() == []


# -- nominations ----------------------------------------------------------------------------------------


def test_nominations_carry_their_messages_and_affirm_and_decline_go_through_the_service(
        client: TestClient, tavern: Tavern, corpus_dir: Path) -> None:
    nominate(tavern, corpus_dir, "My name is Sam.", "Hello there.", "My name is Sam.")
    listed = client.get("/v1/persona/nominations", headers=auth(READER))
    assert listed.status_code == 200
    noms = listed.json()
    assert noms, "the pipeline should nominate a belief said twice"
    first = noms[0]
    assert {k: v for k, v in first.items() if k != "messages"} == tavern.persona.belief(first["id"]).to_json()
    assert len(first["messages"]) == 2
    assert all(m["text"] == "My name is Sam." and len(m["ref"]) == 2 for m in first["messages"])

    stale = client.post(f"/v1/persona/nominations/{first['id']}/affirm", headers=auth(WRITER),
                        json={"expected_version": 7})
    assert stale.status_code == 409 and stale.json()["current"] == 0
    assert tavern.persona.belief(first["id"]).nominated and tavern.persona.persona_history() == []

    affirmed = client.post(f"/v1/persona/nominations/{first['id']}/affirm", headers=auth(WRITER),
                           json={"expected_version": 0})
    assert affirmed.status_code == 200, affirmed.text
    doc = affirmed.json()
    assert doc["version"] == 1 and doc["reason"] == "affirm"
    assert [(e["provenance"], e["belief_id"], e["text"]) for e in doc["entries"]] == [
        ("affirmed", first["id"], first["statement"])]
    assert tavern.persona.belief(first["id"]).promoted
    again = client.post(f"/v1/persona/nominations/{first['id']}/decline", headers=auth(WRITER))
    assert again.status_code == 400 and "already in the persona" in again.json()["message"]


def test_decline_returns_the_belief_and_takes_no_body_fields(client: TestClient, tavern: Tavern,
                                                             corpus_dir: Path) -> None:
    nominate(tavern, corpus_dir, "My name is Sam.", "My name is Sam.")
    belief_id = client.get("/v1/persona/nominations", headers=auth(READER)).json()[0]["id"]
    odd = client.post(f"/v1/persona/nominations/{belief_id}/decline", headers=auth(WRITER), json={"statement": "x"})
    assert odd.status_code == 422
    declined = client.post(f"/v1/persona/nominations/{belief_id}/decline", headers=auth(WRITER))
    assert declined.status_code == 200
    assert declined.json() == tavern.persona.belief(belief_id).to_json()
    assert declined.json()["nominated"] is False and declined.json()["promoted"] is False
    assert client.get("/v1/persona/nominations", headers=auth(READER)).json() == []
    assert tavern.persona.persona_history() == []


# -- no route writes beliefs -----------------------------------------------------------------------------

_MARKS = {"promoted", "entry_id", "nominated", "declined", "updated_at"}
"""The marks affirm and decline set through the service; nothing else of a belief may change."""


def _beliefs(tavern: Tavern) -> dict[int, dict[str, Any]]:
    return {b.id: json.loads(json.dumps(b.to_json())) for b in tavern.persona.beliefs()}


def test_no_route_or_method_writes_beliefs(client: TestClient, tavern: Tavern, corpus_dir: Path) -> None:
    """Walk `app.routes`: every route, every declared method and every other method, with a write
    token and plausible bodies. Beliefs are neither created nor deleted; only the marks change."""
    nominate(tavern, corpus_dir, "My name is Sam.", "I love cats.", "My name is Sam.", "I love cats.")
    before = _beliefs(tavern)
    assert before, "the pipeline should learn beliefs"
    nominated = [b.id for b in tavern.persona.nominations()]
    assert len(nominated) >= 2, "two beliefs said twice each should both be nominated"
    bodies: list[Any] = [None, {}, {"expected_version": 0}, {"expected_version": 0, "add": "{{user}} rows boats."},
                         {"statement": "{{user}} is evil.", "key": "x", "confidence": 1.0},
                         {"expected_version": 0, "entries": [{"text": "owner text"}]}]
    app = client.app
    seen = set()
    for route in app.routes:
        assert isinstance(route, Route)
        for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
            for body in bodies:
                version = tavern.persona.persona().version
                if isinstance(body, dict) and "expected_version" in body:
                    body = {**body, "expected_version": version}
                open_now = [b.id for b in tavern.persona.nominations()]
                # affirm leaves one nomination for decline; once none is open, a resolved id (400).
                keep = 1 if route.path.endswith("/affirm") else 0
                pick = open_now[0] if len(open_now) > keep else nominated[0]
                path = route.path.replace("{belief_id:int}", str(pick))
                response = client.request(method, path, headers=auth(WRITER),
                                          **({} if body is None else {"json": body}))
                assert response.status_code < 500, (method, path, response.text)
                seen.add((method, route.path, response.status_code))
    assert any(status == 200 for method, path, status in seen if path.endswith("/affirm"))
    assert any(status == 200 for method, path, status in seen if path.endswith("/decline"))

    after = _beliefs(tavern)
    assert set(after) == set(before), "no belief is created or deleted"
    for belief_id, old in before.items():
        new = after[belief_id]
        assert {k: v for k, v in new.items() if k not in _MARKS} == {k: v for k, v in old.items() if k not in _MARKS}
    changed = {i for i in before if before[i] != after[i]}
    assert changed <= set(nominated) | {b.id for b in tavern.persona.nominations()}


def test_the_routes_call_the_service_never_the_store() -> None:
    tree = ast.parse(Path(http_api.__file__).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            assert node.attr not in {"_store", "store", "unit_of_work", "beliefs", "events"}, node.attr
        if isinstance(node, ast.ImportFrom) and node.module:
            assert not node.module.startswith(("tavern_tui.store", "sqlalchemy")), node.module


# -- tokens and serving -------------------------------------------------------------------------------


def test_parse_tokens_reads_scopes_joined_by_plus() -> None:
    assert parse_tokens(f"abc:{READ}+{WRITE}, other:{READ} ,") == {
        "abc": frozenset({READ, WRITE}), "other": frozenset({READ})}
    assert parse_tokens("") == {} and parse_tokens("  ,  ") == {}
    assert parse_tokens(f"a:b:c:{WRITE}") == {"a:b:c": frozenset({WRITE})}


@pytest.mark.parametrize(("text", "item"), [
    ("secret-one", 1),
    (f"ok:{READ},secret-two:", 2),
    (f"ok:{READ},secret-three:persona.admin", 2),
    (f":{READ}", 1),
    (f"ok:{READ},,secret four:{READ}", 3),
    (f"secret-five:{READ},secret-five:{WRITE}", 2),
    (f"secret-six:{READ}+", 1),
])
def test_parse_tokens_names_the_bad_item_and_never_the_token(text: str, item: int) -> None:
    with pytest.raises(TavernError) as caught:
        parse_tokens(text)
    message = str(caught.value)
    assert f"item {item}" in message and TOKENS_ENV in message
    assert "secret" not in message


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "example.com", ""])
def test_serve_refuses_any_host_but_loopback(tavern: Tavern, host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("must not bind"))
    with pytest.raises(TavernError, match="loopback"):
        serve(tavern, host=host)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_serve_runs_uvicorn_on_loopback(tavern: Tavern, host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    calls: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append((app, kw)))
    monkeypatch.delenv(ENABLE_ENV, raising=False)
    serve(tavern, host=host, port=9999)
    assert len(calls) == 1 and calls[0][1] == {"host": host, "port": 9999}
    name = "[::1]" if host == "::1" else host
    assert TestClient(calls[0][0], base_url=f"http://{name}:9999").get("/v1/persona").status_code == 404
    assert TestClient(calls[0][0], base_url="http://rebound.example:9999").get("/v1/health").status_code == 400
