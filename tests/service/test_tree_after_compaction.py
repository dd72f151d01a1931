"""The branch tree after a compaction: the originals keep their own text, marked summarised,
and the summary is one node naming the range of messages it covers."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

SERAPHINA = "cards/seraphina_chara_ccv3.png"


def played(tavern: Tavern, corpus_dir: Path, history: int) -> int:
    """A Seraphina playthrough with `history` stored lines after the greeting ("Line 000: …")."""
    [card] = tavern.imports.import_paths([corpus_dir / SERAPHINA])
    pid = tavern.playthroughs.new_playthrough(card.id, user_name="Ann").id
    session = tavern.playthroughs.playthrough(pid).session_id
    tavern.store.events.append(session, [
        NewEvent(EventKind.USER_MESSAGE if n % 2 == 0 else EventKind.ASSISTANT_MESSAGE,
                 "user" if n % 2 == 0 else "assistant", {"content": f"Line {n:03d}: the lantern again."})
        for n in range(history)])
    return pid


async def test_the_tree_keeps_the_originals_and_lists_the_summary_once(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path) -> None:
    pid = played(tavern, corpus_dir, 15)  # the greeting + 15 lines: 16 messages
    model.enqueue("Ann and Seraphina talked about the lantern.")
    done = await tavern.compaction.compact(pid, keep=4)
    assert done.covers == 12
    tree = tavern.timeline.timeline(pid)
    messages = [v for v in tree.variants if v.summary_of is None]
    summaries = [v for v in tree.variants if v.summary_of is not None]
    assert len(messages) == 16
    assert [v.summarised for v in messages] == [True] * 12 + [False] * 4
    assert not any(v.edited for v in messages)
    # Each original reads as it was written, never the summary's text.
    assert [v.preview for v in messages[1:13]] == [f"Line {n:03d}: the lantern again." for n in range(12)]
    [summary] = summaries
    assert summary.ref == done.summary and summary.summary_of == (1, 12)
    assert summary.preview == "Ann and Seraphina talked about the lantern."
    assert (summary.source, summary.kind, summary.role) == ("summary", "surface/replaced", "system")
    # Listed right after the last message it covers, before the first one kept.
    at = tree.variants.index(summary)
    assert tree.variants[at - 1].ref == messages[11].ref and tree.variants[at + 1].ref == messages[12].ref
    assert summary.parent == messages[11].ref


async def test_a_summary_of_a_summary_names_the_whole_range_and_edits_keep_their_text(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path) -> None:
    pid = played(tavern, corpus_dir, 15)
    shown = tavern.playthroughs.messages(pid)
    tavern.timeline.edit_message(pid, shown[3].ref, "Line 002, rewritten.")
    model.enqueue("First recap.", "Second recap.")
    await tavern.compaction.compact(pid, keep=10)
    second = await tavern.compaction.compact(pid, keep=4)
    tree = tavern.timeline.timeline(pid)
    [summary] = [v for v in tree.variants if v.summary_of is not None]
    assert summary.ref == second.summary and summary.summary_of == (1, 12)
    assert summary.preview == "Second recap."
    edited = next(v for v in tree.variants if v.preview == "Line 002, rewritten.")
    assert edited.edited and edited.summarised
    # Editing the summary shows the new text on the same single node.
    edited_ref = tavern.compaction.edit_summary(pid, second.summary, "A recap, by hand.")
    [summary] = [v for v in tavern.timeline.timeline(pid).variants if v.summary_of is not None]
    assert summary.ref == edited_ref and summary.preview == "A recap, by hand." and summary.summary_of == (1, 12)


async def test_the_cli_tree_marks_summarised_messages_and_names_the_summary_range(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from contextlib import contextmanager

    from tavern_tui.cli.commands import library

    pid = played(tavern, corpus_dir, 15)
    model.enqueue("Ann and Seraphina talked about the lantern.")
    done = await tavern.compaction.compact(pid, keep=4)

    @contextmanager
    def opened(_args):  # type: ignore[no-untyped-def]
        yield tavern

    monkeypatch.setattr(library, "open_service", opened)
    out = io.StringIO()
    assert library.cmd_tree(argparse.Namespace(playthrough=pid, json=False), out, io.StringIO()) == 0
    lines = out.getvalue().splitlines()
    assert sum("summary of messages 1–12" in line for line in lines) == 1
    summary_line = next(line for line in lines if "summary of messages 1–12" in line)
    assert f"{done.summary[0]}:{done.summary[1]}" in summary_line
    assert "Ann and Seraphina talked about the lantern." in summary_line
    line_005 = next(line for line in lines if "Line 005" in line)
    assert "[summarised]" in line_005 and "[edited]" not in line_005
    assert sum("Ann and Seraphina talked" in line for line in lines) == 1
    kept = next(line for line in lines if "Line 012" in line)
    assert "[summarised]" not in kept
