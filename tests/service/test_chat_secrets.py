"""Secrets typed into the chat (send, edit, `tavern chat --say`, `tavern edit`) are refused before
anything is stored or sent: the configured provider API key always, other key-shaped text unless
the person allows it. Real detectors (persona.safety), a real SQLite file, the scripted model."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy

from tavern_tui.cli import main
from tavern_tui.config import Settings
from tavern_tui.errors import SecretRefused
from tavern_tui.persona.safety import find_secrets
from tavern_tui.providers.base import ProviderSettings
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

SERAPHINA = "cards/seraphina_chara_ccv3.png"

SK_KEY = "sk-" + "A1b2C3d4E5" * 4  # sk- and 40 alphanumerics
CONFIGURED = "local-9f8e7d6c5b4a3f2e1d0c"  # no known key shape: only the verbatim check catches it
PEM = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB\n"
       "-----END OPENSSH PRIVATE KEY-----")
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

SECRETS = [  # (message, kind, the secret itself)
    (f"Oops, here is my key {SK_KEY} sorry", "api_key", SK_KEY),
    ("Authorization: Bearer abc123def456ghi", "bearer_token", "abc123def456ghi"),
    (f"The scroll reads:\n{PEM}\nand nothing more.", "private_key", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"),
    (f"token {JWT}", "jwt", JWT),
    (f"password: {SK_KEY}", "api_key", SK_KEY),  # a password field does not hide the key in it
]

PASSWORD_PROSE = [
    "*I lean closer.* My password is swordfish, but don't tell anyone.",
    "my password is swordfish",
    "The guard squints. \"Password: hunter2!\"",
    "password: opensesame",
]


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


def db_bytes(db_url: str) -> bytes:
    """Everything the database holds, as bytes: the SQLite files (WAL included), or on
    PostgreSQL (TAVERN_TEST_PG_URL) every row of every table as text."""
    if db_url.startswith("sqlite:///"):
        path = Path(db_url.removeprefix("sqlite:///"))
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    engine = sqlalchemy.create_engine(db_url)
    try:
        with engine.connect() as conn:
            tables = sqlalchemy.inspect(conn).get_table_names()
            return "".join(repr(row) for table in tables
                           for row in conn.execute(sqlalchemy.text(f'SELECT * FROM "{table}"'))).encode()
    finally:
        engine.dispose()


def event_count(db_url: str) -> int:
    engine = sqlalchemy.create_engine(db_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sqlalchemy.text("SELECT count(*) FROM events")).scalar_one())
    finally:
        engine.dispose()


@pytest.fixture
def keyed(db_url: str, model: ScriptedModel) -> Iterator[Tavern]:
    """The service with a provider API key configured (as TAVERN_API_KEY or the config file sets it)."""
    service = Tavern(Settings(db_url=db_url, provider=ProviderSettings(api_key=CONFIGURED)), provider=model)
    yield service
    service.close()


def start(tavern: Tavern, corpus_dir: Path) -> int:
    [result] = tavern.imports.import_paths([corpus_dir / SERAPHINA])
    return tavern.playthroughs.new_playthrough(result.id, user_name="Ann").id


async def test_the_configured_api_key_is_refused_even_when_secrets_are_allowed(
        keyed: Tavern, model: ScriptedModel, corpus_dir: Path, db_url: str) -> None:
    pid = start(keyed, corpus_dir)
    assert find_secrets(CONFIGURED) == []  # the pattern scan alone would let it through
    before, shown = event_count(db_url), keyed.playthroughs.messages(pid)
    for allow in (False, True):
        with pytest.raises(SecretRefused) as refused:
            await drain(keyed.steps.send(pid, f"my key is {CONFIGURED}, keep it safe", allow_secrets=allow))
        assert refused.value.configured and not refused.value.overridable and refused.value.kind == "api_key"
        assert "configured provider API key" in str(refused.value) and CONFIGURED not in str(refused.value)
    assert event_count(db_url) == before and keyed.playthroughs.messages(pid) == shown
    assert model.requests == [] and keyed.traces.traces(pid) == []
    assert CONFIGURED.encode() not in db_bytes(db_url)


async def test_a_short_configured_key_does_not_refuse_ordinary_words(db_url: str, model: ScriptedModel,
                                                                      corpus_dir: Path) -> None:
    service = Tavern(Settings(db_url=db_url, provider=ProviderSettings(api_key="none")), provider=model)
    try:
        pid = start(service, corpus_dir)
        await drain(service.steps.send(pid, "none of that, please"))
        assert service.playthroughs.messages(pid)[-2].content == "none of that, please" and len(model.requests) == 1
    finally:
        service.close()


@pytest.mark.parametrize(("text", "kind", "secret"), SECRETS, ids=[s[1] + str(i) for i, s in enumerate(SECRETS)])
async def test_a_secret_looking_message_is_refused_until_allowed(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path, db_url: str, text: str, kind: str,
        secret: str) -> None:
    pid = start(tavern, corpus_dir)
    before, shown = event_count(db_url), tavern.playthroughs.messages(pid)
    with pytest.raises(SecretRefused) as refused:
        await drain(tavern.steps.send(pid, text))
    assert refused.value.kind == kind and refused.value.overridable and not refused.value.configured
    assert refused.value.where == "message" and kind.replace("_", " ") in str(refused.value)
    assert secret not in str(refused.value)
    assert event_count(db_url) == before and tavern.playthroughs.messages(pid) == shown
    assert model.requests == [] and tavern.traces.traces(pid) == []
    assert secret.encode() not in db_bytes(db_url)

    model.enqueue("Noted.")
    await drain(tavern.steps.send(pid, text, allow_secrets=True))  # the person confirmed
    assert [(m.role, m.content) for m in tavern.playthroughs.messages(pid)[-2:]] == [("user", text),
                                                                                    ("assistant", "Noted.")]
    assert model.requests[0].messages[-1]["content"] == text and len(tavern.traces.traces(pid)) == 1


@pytest.mark.parametrize("text", PASSWORD_PROSE)
async def test_password_sentences_are_ordinary_roleplay_text(tavern: Tavern, model: ScriptedModel,
                                                             corpus_dir: Path, text: str) -> None:
    # The persona refuses these ("password" is a persona secret kind); fiction is full of them.
    assert [f.kind for f in find_secrets(text)] == ["password"]
    pid = start(tavern, corpus_dir)
    tavern.playthroughs.check_message(text)
    await drain(tavern.steps.send(pid, text))
    assert tavern.playthroughs.messages(pid)[-2].content == text and model.requests[0].messages[-1]["content"] == text


async def test_an_edit_is_checked_like_a_send(keyed: Tavern, model: ScriptedModel, corpus_dir: Path,
                                              db_url: str) -> None:
    pid = start(keyed, corpus_dir)
    await drain(keyed.steps.send(pid, "helo"))
    user, reply = keyed.playthroughs.messages(pid)[-2:]
    before = event_count(db_url)
    with pytest.raises(SecretRefused) as refused:
        keyed.timeline.edit_message(pid, user.ref, f"hello {SK_KEY}")
    assert refused.value.where == "edit" and refused.value.overridable and SK_KEY not in str(refused.value)
    for ref in (user.ref, reply.ref):  # the configured key: never, whoever's message it is
        with pytest.raises(SecretRefused) as refused:
            keyed.timeline.edit_message(pid, ref, f"hello {CONFIGURED}", allow_secrets=True)
        assert refused.value.configured
    assert event_count(db_url) == before and keyed.playthroughs.messages(pid)[-2:] == [user, reply]

    keyed.timeline.edit_message(pid, user.ref, f"hello {SK_KEY}", allow_secrets=True)
    edited = keyed.playthroughs.messages(pid)[-2]
    assert edited.content == f"hello {SK_KEY}"
    # Fixing a typo around a secret the person already allowed does not ask again.
    keyed.timeline.edit_message(pid, edited.ref, f"Hello {SK_KEY}!")
    assert keyed.playthroughs.messages(pid)[-2].content == f"Hello {SK_KEY}!"
    assert CONFIGURED.encode() not in db_bytes(db_url)


def run(db_url: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(["--db", db_url, *args], out, err), out.getvalue(), err.getvalue()


def test_cli_chat_refuses_secrets_and_allow_secrets_sends_them(db_url: str, corpus_dir: Path) -> None:
    assert run(db_url, "import", str(corpus_dir / SERAPHINA))[0] == 0
    code, out, err = run(db_url, "chat", "Seraphina", "--say", f"key: {SK_KEY}")
    assert code == 1 and out == "" and "api key" in err and "--allow-secrets" in err and SK_KEY not in err
    code, _out, err = run(db_url, "--api-key", CONFIGURED, "chat", "Seraphina", "--say", f"k {CONFIGURED}",
                          "--allow-secrets")
    assert code == 1 and "configured provider API key" in err and "--allow-secrets" not in err
    assert CONFIGURED not in err
    assert event_count(db_url) == 0  # not even a playthrough was started
    assert SK_KEY.encode() not in db_bytes(db_url) and CONFIGURED.encode() not in db_bytes(db_url)

    code, out, err = run(db_url, "chat", "Seraphina", "--say", f"key: {SK_KEY}", "--allow-secrets")
    assert code == 0, err
    code, out, err = run(db_url, "show", "1")
    assert code == 0 and SK_KEY in out


def test_cli_edit_refuses_secrets_and_allow_secrets_stores_them(db_url: str, corpus_dir: Path) -> None:
    assert run(db_url, "import", str(corpus_dir / SERAPHINA))[0] == 0
    assert run(db_url, "chat", "Seraphina", "--say", "helo")[0] == 0
    service = Tavern(Settings(db_url=db_url))
    try:
        user = service.playthroughs.messages(1)[-2]
        before = event_count(db_url)
        code, _out, err = run(db_url, "edit", "1", f"{user.ref[0]}:{user.ref[1]}", "--text", f"hello {JWT}")
        assert code == 1 and "jwt" in err and "--allow-secrets" in err and JWT not in err
        assert event_count(db_url) == before
        code, _out, err = run(db_url, "edit", "1", f"{user.ref[0]}:{user.ref[1]}", "--text", f"hello {JWT}",
                              "--allow-secrets")
        assert code == 0, err
        assert service.playthroughs.messages(1)[-2].content == f"hello {JWT}"
    finally:
        service.close()
