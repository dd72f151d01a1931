"""The configured API key and base-URL credentials are refused BY VALUE (issue 23 item 3): on
every write surface (chat send, edit, chat import, persona CLI and HTTP PUT), in plain, base64,
dash-less and spaced forms; echoed back by a provider, they are redacted before they are stored,
logged or shown. Checked against the database file, its WAL, the log records, printed output and
the requests the model server received. The key has a shape no scanner knows (the trial's
`token-abc123456789` kind), so only the by-value check can catch it."""

from __future__ import annotations

import base64
import io
import json
import logging
import stat
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tavern_tui.cli import main
from tavern_tui.config import Settings
from tavern_tui.errors import SecretRefused
from tavern_tui.http_api import READ, WRITE, build_app
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel
from tests.support.loopback import LoopbackServer, sse_chunks_for

KEY = "token-abc123456789"
URL_PASSWORD = "hunter2-swordfish99"


def forms(secret: str) -> dict[str, str]:
    """The encodings the trial slipped past a shape scanner (issue 23 item 3)."""
    return {"plain": f"my key is {secret} ok",
            "base64": "here: " + base64.b64encode(f"Bearer {secret}".encode()).decode(),
            "dashless": f"try {secret.replace('-', '')} now",
            "spaced": "spelled out " + " ".join(secret)}


FORMS = forms(KEY)


def _leaks(blob: bytes) -> list[str]:
    """Which forms of KEY (and of the URL password) appear in `blob`, checked byte-wise."""
    text = blob.decode("utf-8", "replace")
    found = []
    for secret in (KEY, URL_PASSWORD):
        core = secret.replace("-", "")
        b64 = [base64.b64encode(p.encode()).decode()[4:-4] for p in (secret, "x" + secret, "xy" + secret)]
        if secret in text or core in text.replace("-", "") or core in "".join(text.split()) \
                or any(c and c in text for c in b64):
            found.append(secret)
    return found


def _stored(home_db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in home_db.parent.glob(home_db.name + "*"))


@pytest.fixture
def keyed(tmp_path: Path, corpus_dir: Path):  # type: ignore[no-untyped-def]
    db = tmp_path / "data" / "tavern.sqlite3"
    model = ScriptedModel(delay=0)
    settings = Settings(db_url=f"sqlite:///{db}",
                        provider=ProviderSettings(base_url=f"http://me:{URL_PASSWORD}@127.0.0.1:9/v1", api_key=KEY))
    tavern = Tavern(settings, provider=model)
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
    assert cid is not None
    pid = tavern.playthroughs.new_playthrough(cid, user_name="Ada").id
    yield tavern, model, pid, db
    tavern.close()


@pytest.mark.parametrize("form", sorted(FORMS))
async def test_a_send_holding_the_key_is_refused_and_nothing_is_stored_or_sent(keyed, form: str,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    tavern, model, pid, db = keyed
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SecretRefused, match="the configured provider API key") as refused:
        async for _ in tavern.steps.send(pid, FORMS[form], allow_secrets=True):
            pass
    assert _leaks(str(refused.value).encode()) == []
    assert model.requests == [] and len(tavern.playthroughs.messages(pid)) == 1
    assert _leaks(_stored(db)) == [] and _leaks(caplog.text.encode()) == []


@pytest.mark.parametrize("form", sorted(FORMS))
async def test_an_edit_holding_the_key_is_refused(keyed, form: str) -> None:
    tavern, model, pid, db = keyed
    model.enqueue("*She smiles.*")
    async for _ in tavern.steps.send(pid, "hello"):
        pass
    last = tavern.playthroughs.messages(pid)[-1]
    with pytest.raises(SecretRefused, match="edit: refused"):
        tavern.timeline.edit_message(pid, last.ref, FORMS[form], allow_secrets=True)
    assert _leaks(_stored(db)) == []


def test_the_base_url_password_is_refused_in_every_form_too(keyed) -> None:
    tavern, _model, pid, _db = keyed
    for text in forms(URL_PASSWORD).values():
        with pytest.raises(SecretRefused):
            tavern.playthroughs.check_message(text, allow_secrets=True)
    assert URL_PASSWORD not in repr(tavern.ctx.settings.provider) and URL_PASSWORD not in repr(tavern)
    tavern.playthroughs.check_message("an ordinary token-abc line", allow_secrets=False)  # not the key: passes


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_chat_file_holding_the_key_is_not_imported(keyed, form: str) -> None:
    tavern, _model, _pid, db = keyed
    lines = [{"user_name": "Ada", "character_name": "Seraphina", "chat_metadata": {}},
             {"name": "Ada", "is_user": True, "send_date": "2024-07-12T01:31:37.000Z", "mes": FORMS[form]}]
    payload = "\n".join(json.dumps(line) for line in lines).encode()
    result = tavern.chat_files.import_chat_bytes(payload, "leak.jsonl")
    assert result.error is not None and "leak.jsonl: refused" in result.error and result.id is None
    assert _leaks(result.error.encode()) == [] and _leaks(_stored(db)) == []


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_persona_http_put_refuses_the_key(keyed, form: str) -> None:
    tavern, _model, _pid, db = keyed
    client = TestClient(build_app(tavern, enabled=True, tokens={"w-token-1234": frozenset({READ, WRITE})}))
    answer = client.put("/v1/persona", headers={"Authorization": "Bearer w-token-1234"},
                        json={"expected_version": 0, "add": FORMS[form]})
    assert answer.status_code == 422 and answer.json()["error"] == "secret_refused"
    assert _leaks(answer.content) == [] and _leaks(_stored(db)) == []


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_persona_cli_refuses_the_key(form: str, isolated_profile: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAVERN_API_KEY", KEY)
    out, err = io.StringIO(), io.StringIO()
    code = main(["persona", "edit", "--expected-version", "0", "--add", FORMS[form]], out=out, err=err)
    assert code == 1 and "refused: the text contains the configured provider API key" in err.getvalue()
    printed = (out.getvalue() + err.getvalue()).encode()
    assert _leaks(printed) == [] and _leaks(_stored(isolated_profile / "data" / "tavern.sqlite3")) == []


async def test_a_server_echoing_the_key_gets_it_redacted_before_it_is_stored_or_shown(
        tmp_path: Path, corpus_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    db = tmp_path / "data" / "tavern.sqlite3"
    echoed = " | ".join(FORMS.values())
    with LoopbackServer() as server:
        base = server.base_url.replace("http://", f"http://me:{URL_PASSWORD}@")
        server.enqueue_json(401, {"error": {"message": f"bad key {echoed}; url password {URL_PASSWORD}",
                                            "type": "invalid_request_error", "code": "invalid_api_key"}},
                            headers={"X-Echo": f"Bearer {KEY}"})
        tavern = Tavern(Settings(db_url=f"sqlite:///{db}",
                                 provider=ProviderSettings(base_url=base, model="m", api_key=KEY)))
        try:
            cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
            assert cid is not None
            pid = tavern.playthroughs.new_playthrough(cid).id
            with pytest.raises(Exception) as failed:  # StepFailed(AuthenticationError)
                async for _ in tavern.steps.send(pid, "hello"):
                    pass
            shown = tavern.playthroughs.messages(pid)[-1]
        finally:
            await tavern.aclose()
        requests = b"".join(r.body for r in server.requests)
    assert "bad key" in str(failed.value) and _leaks(str(failed.value).encode()) == []
    assert shown.partial and shown.error is not None and _leaks(shown.error.encode()) == []
    assert _leaks(_stored(db)) == [] and _leaks(caplog.text.encode()) == [] and _leaks(requests) == []


def test_the_database_file_and_folder_are_private(tmp_path: Path) -> None:
    db = tmp_path / "fresh" / "data" / "tavern.sqlite3"
    tavern = Tavern(Settings(db_url=f"sqlite:///{db}"))
    try:
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (db.parent, *db.parent.iterdir())}
    finally:
        tavern.close()
    assert modes.pop("data") == 0o700
    assert modes and set(modes.values()) == {0o600}, modes  # the file, its -wal and -shm


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_card_or_world_book_file_holding_the_key_is_not_imported(keyed, form: str, tmp_path: Path) -> None:
    tavern, _model, _pid, db = keyed
    card = {"spec": "chara_card_v2", "spec_version": "2.0",
            "data": {"name": "Leaky", "description": FORMS[form], "first_mes": "Hi."}}
    book = {"entries": {"0": {"uid": 0, "key": ["k"], "content": FORMS[form]}}}
    (tmp_path / "leaky_card.json").write_text(json.dumps(card), encoding="utf-8")
    (tmp_path / "leaky_book.json").write_text(json.dumps(book), encoding="utf-8")
    results = tavern.imports.import_paths([tmp_path / "leaky_card.json", tmp_path / "leaky_book.json"])
    assert [r.id for r in results] == [None, None]
    assert all("refused: the text contains the configured provider API key" in (r.error or "") for r in results)
    assert _leaks(_stored(db)) == []


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_world_book_edit_holding_the_key_is_refused(keyed, form: str, tmp_path: Path) -> None:
    from dataclasses import replace

    tavern, _model, _pid, db = keyed
    path = tmp_path / "book.json"
    path.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": ["k"], "content": "plain lore"}}}))
    book_id = tavern.imports.import_paths([path])[0].id
    assert book_id is not None
    book = tavern.lore.world_book(book_id)
    edited = replace(book, entries=[replace(book.entries[0], content=FORMS[form])])
    with pytest.raises(SecretRefused, match="world book"):
        tavern.lore.save_world_book(book_id, edited)
    assert tavern.lore.world_book(book_id).entries[0].content == "plain lore" and _leaks(_stored(db)) == []


async def test_a_reply_echoing_the_key_in_its_text_is_redacted_before_it_is_stored_shown_or_sent_again(
        server: LoopbackServer, tmp_path: Path, corpus_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    db = tmp_path / "data" / "tavern.sqlite3"
    echoed = "Your header said Authorization: Bearer " + " | ".join(FORMS.values()) + " and that is all."
    # 40 pieces: every form of the key is cut across two or more deltas.
    server.enqueue_sse(sse_chunks_for(echoed, pieces=40, reasoning=f"thinking about {KEY} now"))
    server.enqueue_sse(sse_chunks_for("*She nods.*"))
    tavern = Tavern(Settings(db_url=f"sqlite:///{db}",
                             provider=ProviderSettings(base_url=server.base_url, model="m", api_key=KEY)))
    try:
        cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id
        assert cid is not None
        pid = tavern.playthroughs.new_playthrough(cid).id
        streamed: list[str] = []
        async for update in tavern.steps.send(pid, "what did my header say?"):
            streamed.append(str(update))
        async for _ in tavern.steps.send(pid, "thanks"):
            pass
        reply = tavern.playthroughs.messages(pid)[-3]
    finally:
        await tavern.aclose()
    assert reply.role == "assistant" and reply.content.startswith("Your header said Authorization: Bearer ")
    assert reply.content.endswith(" and that is all.") and "[redacted]" in reply.content
    assert _leaks(reply.content.encode()) == [] and _leaks("".join(streamed).encode()) == []
    second = json.loads(server.requests[1].body)
    assert _leaks(json.dumps(second["messages"]).encode()) == []  # not sent back to the model
    assert _leaks(_stored(db)) == [] and _leaks(caplog.text.encode()) == []
    assert "sent the configured API key back in its reply" in caplog.text


@pytest.mark.parametrize("scope", ["local", "global"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_variable_holding_the_key_is_refused_in_either_scope(keyed, form: str, scope: str) -> None:
    tavern, _model, pid, db = keyed
    with pytest.raises(SecretRefused, match="the configured provider API key") as refused:
        tavern.variables.set(pid, "note", FORMS[form], scope=scope)
    with pytest.raises(SecretRefused):
        tavern.variables.set(pid, FORMS[form], "1", scope=scope)  # as a name too
    assert _leaks(str(refused.value).encode()) == []
    after = tavern.variables.variables(pid)
    assert after.local == {} and after.global_ == {}
    assert _leaks(_stored(db)) == []
    assert tavern.variables.set(pid, "mood", "calm", scope=scope)  # an ordinary value is still kept


@pytest.mark.parametrize("macro", ["setvar", "setglobalvar", "addvar"])
def test_a_macro_writing_the_key_into_a_variable_writes_nothing(keyed, macro: str) -> None:
    # E.g. a world book imported before the key was configured: its {{setvar}} runs in every step.
    from tavern_tui.assembly.macros import substitute

    tavern, _model, pid, _db = keyed
    ctx = tavern.variables.macro_context(tavern.playthroughs.playthrough(pid).session_id)
    assert substitute(f"{{{{{macro}::note::{KEY}}}}}{{{{{macro}::mood::calm}}}}", ctx) == ""
    written = {**ctx.local_vars, **ctx.global_vars}
    assert "note" not in written and written["mood"] == "calm"
    assert "a variable holding the configured API key was not written" in ctx.limits_hit


@pytest.mark.parametrize("shorthand", ["{{.note = %s}}", "{{$note = %s}}", "{{.note += %s}}", "{{.note ||= %s}}",
                                       "{{$note ??= %s}}"])
def test_a_variable_shorthand_writing_the_key_writes_nothing(keyed, shorthand: str) -> None:
    # SillyTavern 1.18's `{{.name = value}}` forms write variables like {{setvar}}: refused alike.
    from tavern_tui.assembly.macros import substitute

    tavern, _model, pid, _db = keyed
    ctx = tavern.variables.macro_context(tavern.playthroughs.playthrough(pid).session_id)
    substitute(shorthand % KEY + "{{.mood = calm}}", ctx)
    written = {**ctx.local_vars, **ctx.global_vars}
    assert "note" not in written and written["mood"] == "calm"
    assert "a variable holding the configured API key was not written" in ctx.limits_hit


@pytest.mark.parametrize("form", sorted(FORMS))
def test_an_mvu_update_holding_the_key_commits_nothing(form: str, tmp_path: Path, corpus_dir: Path) -> None:
    # A state tool's commands (or a reply's, or a macro's output in them) writing the key into MVU state:
    # the update is refused whole, and the refusal names the command by a marker, never by its text.
    db = tmp_path / "data" / "tavern.sqlite3"
    tavern = Tavern(Settings(db_url=f"sqlite:///{db}", provider=ProviderSettings(
        base_url="http://127.0.0.1:9/v1", model="m", api_key=KEY)), provider=ScriptedModel(delay=0))
    try:
        [card] = tavern.imports.import_paths([corpus_dir / "stateful" / "qingkong_li_mvu.png"])
        pid = tavern.playthroughs.new_playthrough(card.id, user_name="Ann").id
        tavern.timeline.swipe(pid, 1)  # the second greeting: 理.好感度 = 15
        tavern.mvu.ensure_initialised(pid)
        for command in [f"_.set('日期', '{FORMS[form]}');", f"_.set('理.好感度', 15, 20);//{FORMS[form]}"]:
            view = tavern.mvu.commit_commands(pid, command)
            assert not view.committed and view.changes == []
            assert view.refused == [{"command": "(a command holding the configured API key)",
                                     "reason": "a value holds the configured API key; nothing of this update is "
                                               "stored"}]
        record = tavern.mvu.head(pid).record
        assert record["stat_data"]["日期"][0] == "03月15日" and record["stat_data"]["理"]["好感度"][0] == 15
        assert tavern.mvu.commit_commands(pid, "_.add('理.好感度', 4);").committed  # an ordinary update is kept
        assert _leaks(_stored(db)) == []
    finally:
        tavern.close()
