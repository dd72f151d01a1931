"""Issue 16 in the TUI: the status line's context gauge and its colours, compaction from the
command palette, the summary block that expands to its originals (marked not sent)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.cells import cell_len
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Collapsible

from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.widgets.message_box import MessageBox
from tests.tui.conftest import ScriptedProvider, wait_until, workers_idle

SIZE = (120, 40)


def bound_playthrough(tavern: Tavern, corpus_dir: Path, tmp_path: Path, max_context: int, history: int) -> int:
    """A Seraphina playthrough with a preset of `max_context` (reply 300) bound and `history`
    stored messages after the greeting."""
    preset = json.loads((corpus_dir / "presets" / "st_openai_default_staging.json").read_text())
    preset["openai_max_context"] = max_context
    path = tmp_path / f"ctx{max_context}.json"
    path.write_text(json.dumps(preset))
    [imported] = tavern.imports.import_paths([path])
    seraphina = tavern.library.find_character("Seraphina")
    pid = tavern.playthroughs.new_playthrough(seraphina.id, user_name="Ann").id
    tavern.presets.bind_preset(pid, imported.id)
    session = tavern.playthroughs.playthrough(pid).session_id
    tavern.store.events.append(session, [
        NewEvent(EventKind.USER_MESSAGE if n % 2 == 0 else EventKind.ASSISTANT_MESSAGE,
                 "user" if n % 2 == 0 else "assistant",
                 {"content": f"Line {n:03d}: the lantern, the river and the old tower again."})
        for n in range(history)])
    return pid


async def open_chat(pilot: Pilot[object], tavern: Tavern, pid: int) -> ChatScreen:
    chat = ChatScreen(tavern, pid)
    await pilot.app.push_screen(chat)
    await wait_until(pilot, lambda: bool(chat.transcript.boxes) and chat.status.gauge is not None)
    return chat


async def test_the_gauge_shows_used_over_limit_and_warns_when_history_is_dropped(
        corpus_tavern: Tavern, corpus_dir: Path, tmp_path: Path) -> None:
    roomy = bound_playthrough(corpus_tavern, corpus_dir, tmp_path, 32768, 4)
    tight = bound_playthrough(corpus_tavern, corpus_dir, tmp_path, 4096, 400)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(pilot, corpus_tavern, roomy)
        assert " / 32.5k tokens" in chat.status.line  # 32768 − 300 = 32,468
        assert not chat.status.has_class("-dropping") and not chat.status.has_class("-overflow")
        chat.dismiss()
        await workers_idle(pilot)
        chat = await open_chat(pilot, corpus_tavern, tight)
        assert " / 3.8k tokens" in chat.status.line and "oldest left out" in chat.status.line
        assert chat.status.has_class("-dropping") and not chat.status.has_class("-overflow")


async def test_the_gauge_turns_to_the_error_colour_when_nothing_fits(corpus_tavern: Tavern, corpus_dir: Path,
                                                                      tmp_path: Path) -> None:
    pid = bound_playthrough(corpus_tavern, corpus_dir, tmp_path, 700, 2)  # 400 tokens: under the card alone
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(pilot, corpus_tavern, pid)
        assert chat.status.has_class("-overflow") and "cannot send" in chat.status.line
        assert " / 400 tokens" in chat.status.line


async def test_compaction_from_the_palette_shows_a_summary_block_with_its_originals(
        corpus_tavern: Tavern, scripted: ScriptedProvider, corpus_dir: Path, tmp_path: Path) -> None:
    pid = bound_playthrough(corpus_tavern, corpus_dir, tmp_path, 32768, 30)
    scripted.enqueue("Ann and Seraphina ", "talked about the lantern.")
    wanted: list[MessageBox.OriginalsWanted] = []

    def hook(message: Message) -> None:
        if isinstance(message, MessageBox.OriginalsWanted) and all(m is not message for m in wanted):
            wanted.append(message)  # once, though it bubbles from the box to the screen

    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        chat = await open_chat(pilot, corpus_tavern, pid)
        await pilot.press("ctrl+p")
        await pilot.press(*"Compact")
        await pilot.pause(0.2)
        await pilot.press("enter")
        # The box is a summary once its originals' section is mounted too (the class comes first).
        await wait_until(pilot, lambda: any(b.has_class("-summary") and b.query(".originals")
                                            for b in chat.transcript.boxes))
        assert scripted.requests[-1].messages[1]["content"].startswith("Seraphina: ")
        box = next(b for b in chat.transcript.boxes if b.has_class("-summary"))
        assert box.text == "Ann and Seraphina talked about the lantern."
        # The greeting and the 20 oldest lines (all but the newest ten): 21 originals.
        assert box.mark.startswith("summary of 21 messages, ")  # type: ignore[attr-defined]
        section = box.query_one(".originals", Collapsible)
        assert section.collapsed
        section.collapsed = False
        await wait_until(pilot, lambda: len(section.query(".original")) == 21)
        first = str(section.query(".original").last().content)  # type: ignore[attr-defined]
        assert "not sent" in first and "Line 019" in first
        assert chat.status.state == "idle" and not chat.generating
        # The box asked once (its originals section was empty), the chat answered it; collapsed
        # and expanded again, it keeps its lines and asks nothing more.
        assert [m.box for m in wanted] == [box]
        section.collapsed = True
        section.collapsed = False
        await workers_idle(pilot)
        assert len(wanted) == 1 and len(section.query(".original")) == 21


def add_summaries(tavern: Tavern, pid: int) -> list[tuple[int, int]]:
    """Two summary nodes on the surface, each replacing its own run of messages (seed 000 §1.1: a
    replacement obscures any contiguous range), oldest first; returns their refs."""
    from tavern_tui.engine.events import Origin
    from tavern_tui.engine.log import SUMMARY_SOURCE, derive_messages

    session = tavern.playthroughs.playthrough(pid).session_id
    chat = [m for m in derive_messages(tavern.store.events, session) if m.source != "system-prompt"]
    refs = []
    for text, run in (("Early recap.", chat[1:5]), ("Later recap.", chat[8:12])):
        meta = {"covers": len(run), "first": list(run[0].ref), "last": list(run[-1].ref),
                "from": run[0].created_at.isoformat(), "to": run[-1].created_at.isoformat(), "targets": len(run)}
        [event] = tavern.store.events.append(session, [NewEvent(
            EventKind.SURFACE_REPLACED, "system", {"targets": [list(m.ref) for m in run],
                                                   "message": {"role": "system", "content": text, "summary": meta}},
            Origin.ENGINE, SUMMARY_SOURCE)])
        refs.append(event.ref)
    return refs


async def test_f12_edits_the_focused_summary_else_the_one_chosen(
        corpus_tavern: Tavern, corpus_dir: Path, tmp_path: Path) -> None:
    from textual.widgets import OptionList, TextArea

    from tavern_tui.engine.log import SUMMARY_SOURCE, derive_messages
    from tavern_tui.tui.modals.choose import ChooseScreen
    from tavern_tui.tui.modals.edit_message import EditMessageScreen

    pid = bound_playthrough(corpus_tavern, corpus_dir, tmp_path, 32768, 16)
    add_summaries(corpus_tavern, pid)
    app = TavernApp(corpus_tavern)

    def summaries() -> list[str]:
        session = corpus_tavern.playthroughs.playthrough(pid).session_id
        return [m.content for m in derive_messages(corpus_tavern.store.events, session) if m.source == SUMMARY_SOURCE]

    async with app.run_test(size=SIZE) as pilot:
        chat = await open_chat(pilot, corpus_tavern, pid)
        boxes = [b for b in chat.transcript.boxes if b.has_class("-summary")]
        assert [b.text for b in boxes] == ["Early recap.", "Later recap."]
        # Focus inside the older summary (its originals' toggle): F12 edits that one.
        boxes[0].query_one(".originals", Collapsible).query_one("CollapsibleTitle").focus()
        await pilot.press("f12")
        await wait_until(pilot, lambda: isinstance(app.screen, EditMessageScreen) and app.screen.is_mounted)
        assert app.screen.query_one(TextArea).text == "Early recap."
        app.screen.query_one(TextArea).text = "Early recap, edited."
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: summaries() == ["Early recap, edited.", "Later recap."])
        await workers_idle(pilot)
        # Focus in the prompt: F12 asks which one, the newest highlighted; choosing the other edits it.
        chat.prompt.focus()
        await pilot.press("f12")
        await wait_until(pilot, lambda: isinstance(app.screen, ChooseScreen) and app.screen.is_mounted)
        options = app.screen.query_one(OptionList)
        assert options.option_count == 2 and options.highlighted == 1
        assert "Later recap." in str(options.get_option_at_index(1).prompt)
        await pilot.press("up", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, EditMessageScreen) and app.screen.is_mounted)
        assert app.screen.query_one(TextArea).text == "Early recap, edited."
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat)
        assert summaries() == ["Early recap, edited.", "Later recap."]


async def test_esc_during_a_compaction_in_parts_says_what_was_kept_and_f12_reaches_it(
        corpus_tavern: Tavern, scripted: ScriptedProvider, corpus_dir: Path, tmp_path: Path) -> None:
    # A range too long for one summary request of a 4k preset is summarised in parts, each part
    # a whole summary node (`CompactionService.compact`): Esc during the second keeps the first
    # and says so; the kept summary is older than the window the chat mounts, and F12 still
    # reaches it (a trial: "No summary in this chat yet" after a stopped compaction).
    from textual.widgets import TextArea

    from tavern_tui.engine.log import SUMMARY_SOURCE, derive_messages
    from tavern_tui.tui.modals.edit_message import EditMessageScreen
    from tests.tui.conftest import GATE, noted, notes

    pid = bound_playthrough(corpus_tavern, corpus_dir, tmp_path, 4096, 400)
    scripted.enqueue("Recap of the first part.")
    scripted.enqueue(GATE)  # the second part waits: Esc stops it there
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_chat(pilot, corpus_tavern, pid)
        await pilot.press("f10")
        await wait_until(pilot, lambda: len(scripted.requests) == 2)
        session = corpus_tavern.playthroughs.playthrough(pid).session_id
        [kept] = [m for m in derive_messages(corpus_tavern.store.events, session) if m.source == SUMMARY_SOURCE]
        covers = int(kept.body["summary"]["covers"])  # the first part's messages
        await pilot.press("escape")
        note = await noted(pilot, seen, lambda n: n.startswith("Stopped after "))
        assert note.startswith(f"Stopped after {covers:,} of the oldest messages were summarised: that summary "
                               "is kept") and "F10 compacts the rest" in note
        await workers_idle(pilot)
        assert notes(seen).count(note) == 1  # said once (a trial saw it twice)
        await workers_idle(pilot)
        assert chat.status.state == "idle" and not chat.generating
        assert not any(b.has_class("-summary") for b in chat.transcript.boxes)  # older than the window
        await pilot.press("f12")
        await wait_until(pilot, lambda: isinstance(app.screen, EditMessageScreen) and app.screen.is_mounted)
        assert app.screen.query_one(TextArea).text == "Recap of the first part."


async def test_at_80_columns_the_state_shows_and_the_provider_label_gives_way(
        corpus_tavern: Tavern, corpus_dir: Path, tmp_path: Path) -> None:
    # A trial at 80x24: "…oldest left out)  ·  e…", the state cut to one letter behind a long
    # provider label and the gauge. The state must show; the provider label gives way first.
    tight = bound_playthrough(corpus_tavern, corpus_dir, tmp_path, 4096, 400)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(80, 24)) as pilot:
        chat = await open_chat(pilot, corpus_tavern, tight)
        status = chat.status
        status.provider = "openai-compatible · my-very-long-model-name-v2 (127.0.0.1:8765)"
        status.swipe = "swipe 3/3"
        status.say("error", "authentication: the key was refused")
        await pilot.pause()
        shown = str(status.render())
        width = status.content_size.width
        assert "oldest left out" in status.line and status.line.startswith("openai-compatible")  # the whole line
        assert width < cell_len(status.line)
        # What the row shows (the rest is cut with "…"): the gauge, the swipe and the state.
        assert "  ·  swipe 3/3  ·  error — authentication" in shown[:width]
        assert shown.startswith("3.8k / 3.8k tokens (") and "my-very-long-model" not in shown
        # A trial: "openai-compatible ·…  ·  32.4k / 32.5k tokens (…)  ·  idle" hid the model the
        # chat talks to behind the kind of endpoint. The kind gives way before the model.
        status.provider = "openai-compatible · fast-model"
        status.say("idle", "")
        await pilot.pause()
        assert str(status.render()).startswith("fast-model  ·  3.8k / 3.8k tokens (")
        await pilot.resize_terminal(200, 40)  # room again: the whole line
        await wait_until(pilot, lambda: str(status.render()) == status.line)

