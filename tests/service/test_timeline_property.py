"""Property (issue 4): any sequence of send / swipe / edit / delete / rollback / branch keeps
every variant ever produced reachable and every stored event unchanged."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tavern_tui.config import Settings
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel, seed_database

CARD = ('{"spec":"chara_card_v2","spec_version":"2.0","data":{"name":"Mira","first_mes":"Hello.",'
        '"alternate_greetings":["Hi there."]}}')

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.text("abcdefgh ", min_size=1, max_size=8)),
        st.tuples(st.just("swipe"), st.sampled_from([-1, 1])),
        st.tuples(st.just("regenerate"), st.just(0)),
        st.tuples(st.just("continue"), st.just(0)),
        st.tuples(st.just("edit"), st.integers(0, 30)),
        st.tuples(st.just("delete"), st.integers(0, 30)),
        st.tuples(st.just("rollback"), st.integers(0, 30)),
        st.tuples(st.just("branch"), st.integers(0, 30)),
        st.tuples(st.just("jump"), st.integers(0, 60)),
    ),
    min_size=1, max_size=14,
)


def _events(db: Path) -> dict[tuple[int, int], tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return {(s, q): (b, h) for s, q, b, h in conn.execute("SELECT session_id, seq, body, body_sha256 FROM events")}


async def _drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


def _apply(tavern: Tavern, pid: int, op: str, arg: object, branches: list[int]) -> None:
    shown = tavern.playthroughs.messages(pid)
    try:
        if op == "send":
            asyncio.run(_drain(tavern.steps.send(pid, str(arg))))
        elif op == "swipe":
            if tavern.timeline.swipe(pid, int(arg)) is None:  # type: ignore[call-overload]
                asyncio.run(_drain(tavern.steps.regenerate(pid)))
        elif op == "regenerate":
            asyncio.run(_drain(tavern.steps.regenerate(pid)))
        elif op == "continue":
            asyncio.run(_drain(tavern.steps.continue_reply(pid)))
        elif shown and op in ("edit", "delete", "rollback", "branch"):
            target = shown[int(arg) % len(shown)]  # type: ignore[call-overload]
            if op == "edit":
                tavern.timeline.edit_message(pid, target.ref, f"edited {target.content}")
            elif op == "delete":
                tavern.timeline.delete_message(pid, target.ref)
            else:
                tree_refs = {v.ref for v in tavern.timeline.timeline(pid).variants}
                if target.ref in tree_refs:  # an edit's own ref is not a variant
                    if op == "rollback":
                        tavern.timeline.rollback(pid, target.ref)
                    else:
                        branches.append(tavern.timeline.branch_playthrough(pid, target.ref).id)
        elif op == "jump":
            variants = tavern.timeline.timeline(pid).variants
            tavern.timeline.select_variant(pid, variants[int(arg) % len(variants)].ref)  # type: ignore[call-overload]
    except Exception as exc:  # only the refusals the API documents are expected
        from tavern_tui.errors import TavernError

        if not isinstance(exc, TavernError):
            raise


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_every_variant_stays_reachable_and_no_event_changes(database_templates: dict[str, Path],
                                                            ops: list[tuple[str, object]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "t.sqlite3"
        seed_database(database_templates["empty"], f"sqlite:///{db}")  # migrated once, copied per example
        tavern = Tavern(Settings(db_url=f"sqlite:///{db}"), provider=ScriptedModel(delay=0))
        try:
            card = Path(folder) / "mira.json"
            card.write_text(CARD)
            [imported] = tavern.imports.import_paths([card])
            pid = tavern.playthroughs.new_playthrough(imported.id, user_name="Ann").id
            branches: list[int] = []
            seen: dict[int, set[tuple[int, int]]] = {pid: set()}
            stored = _events(db)
            for op, arg in ops:
                _apply(tavern, pid, op, arg, branches)
                now = _events(db)
                assert {k: now[k] for k in stored} == stored, f"an event changed after {op}"
                stored = now
                for playthrough in [pid, *branches]:
                    refs = {v.ref for v in tavern.timeline.timeline(playthrough).variants}
                    missing = seen.setdefault(playthrough, set()) - refs
                    assert not missing, f"{op} lost variants {missing}"
                    seen[playthrough] |= refs
            for body, digest in stored.values():
                assert hashlib.sha256(body.encode("utf-8")).hexdigest() == digest
            # Every variant ever produced can be shown again.
            for ref in seen[pid]:
                tavern.timeline.select_variant(pid, ref)
                assert ref in tavern.timeline.timeline(pid).path
        finally:
            tavern.close()
