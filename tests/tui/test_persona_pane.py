"""Pilot tests of the persona pane (F8 in the chat, p on the home screen; issue 7 §8, seed 002
ADR-0079 decisions 4-8 and 12) on the real app and service with the scripted provider: the
nominations come from messages the person sent through the service, and every check of what
was written reads the service back. Plus the pane's SVG snapshot."""

from __future__ import annotations

import pytest
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, Select

from tavern_tui.persona.model import MAX_ENTRIES, Belief
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.confirm import ConfirmScreen
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.home import HomeScreen
from tavern_tui.tui.screens.persona import PersonaScreen
from tavern_tui.tui.screens.persona.editor import PersonaEditor
from tavern_tui.tui.screens.persona.history import PersonaHistoryScreen
from tests.tui.conftest import noted, notes, wait_until
from tests.tui.test_app import SIZE, open_seraphina

SECRET = "sk-proj-abcdefghijklmnopqrstuvwx1234"
"""Shaped like an OpenAI API key: the persona refuses it."""



def rows(table: object) -> list[list[str]]:
    """A DataTable's rows as shown (plain text per cell)."""
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]  # type: ignore[attr-defined]


async def say(tavern: Tavern, playthrough_id: int, text: str) -> None:
    """Send the person's message through the service (the step consolidates after it)."""
    async for _ in tavern.steps.send(playthrough_id, text):
        pass


async def two_nominations(tavern: Tavern) -> tuple[int, Belief, Belief]:
    """A Seraphina playthrough where the person said their name and a taste twice each;
    returns it and the two nominations (name, then jazz)."""
    pid = tavern.playthroughs.new_playthrough(tavern.library.find_character("Seraphina").id).id
    for text in ("My name is Sam.", "I love jazz.", "Honestly, my name is Sam.", "I really love jazz."):
        await say(tavern, pid, text)
    tavern.persona.consolidate(pid)  # idempotent after the steps' own runs
    name, jazz = tavern.persona.nominations()
    assert (name.key, jazz.key) == ("name:sam", "likes:jazz")
    return pid, name, jazz


async def open_pane(pilot: Pilot[object], key: str) -> PersonaScreen:
    """Press `key` and wait until the persona pane shows its first read."""
    await pilot.press(key)
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, PersonaScreen) and pilot.app.screen.loads > 0)
    screen = pilot.app.screen
    assert isinstance(screen, PersonaScreen)
    return screen


async def settle(pilot: Pilot[object], screen: PersonaScreen, loads: int) -> None:
    """Wait until the pane has shown a read after the `loads`th (a write's reload)."""
    await wait_until(pilot, lambda: screen.loads > loads and not screen.busy)


async def open_editor(pilot: Pilot[object], key: str) -> PersonaEditor:
    await pilot.press(key)
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, PersonaEditor) and pilot.app.screen.is_mounted)
    editor = pilot.app.screen
    assert isinstance(editor, PersonaEditor)
    return editor


async def test_affirm_and_decline_nominations_from_the_chat(corpus_tavern: Tavern) -> None:
    pid, name, jazz = await two_nominations(corpus_tavern)
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        assert chat.playthrough_id == pid
        screen = await open_pane(pilot, "f8")
        assert screen.playthrough_id == pid
        title = str(screen.query_one("#persona-title").content)
        assert title.startswith("Persona v0 · no name") and title.endswith("· no entries")
        assert "sent to the model on every call" in str(screen.query_one("#persona-note").content)
        assert f"playthrough #{pid}'s sensitivity ceiling" in str(screen.query_one("#persona-note").content)
        assert rows(screen.entries) == []
        assert rows(screen.nomination_table) == [
            [str(name.id), name.statement, f"{name.confidence:.2f}", "2", "low"],
            [str(jazz.id), jazz.statement, f"{jazz.confidence:.2f}", "2", "low"]]
        # the highlighted nomination's supporting messages, as session:seq and text
        for (session, seq), text in corpus_tavern.persona.supporting_messages(name):
            assert f"{session}:{seq}  {text}" in screen.support_text
        assert "Honestly, my name is Sam." in screen.support_text

        loads = screen.loads
        await pilot.press("y")
        await settle(pilot, screen, loads)
        affirmed = await noted(pilot, seen, lambda n: n.startswith("Affirmed:"))
        assert len([n for n in notes(seen) if n.startswith("Affirmed:")]) == 1
        first, note = affirmed.split("\n")
        assert first == f"Affirmed: {name.statement} (persona v1)"
        # ADR-0079 d4: affirming copies the statement only; the pane says how to set the name
        assert note.startswith("The persona's name was not changed") and "--name Sam" in note
        doc = corpus_tavern.persona.persona()
        [entry] = doc.entries
        assert (entry.provenance, entry.text, entry.belief_id) == ("affirmed", name.statement, name.id)
        assert corpus_tavern.persona.belief(name.id).promoted and not corpus_tavern.persona.belief(name.id).nominated
        assert rows(screen.entries) == [[str(entry.id), name.statement, f"affirmed #{name.id}", "low", ""]]
        assert [r[0] for r in rows(screen.nomination_table)] == [str(jazz.id)]
        assert "I really love jazz." in screen.support_text

        loads = screen.loads
        await pilot.press("n")
        await settle(pilot, screen, loads)
        await noted(pilot, seen, f"Declined: {jazz.statement} (never nominated again)")
        declined = corpus_tavern.persona.belief(jazz.id)
        assert declined.declined and not declined.nominated
        assert corpus_tavern.persona.nominations() == [] and rows(screen.nomination_table) == []
        assert corpus_tavern.persona.persona().version == 1  # a decline writes no persona text
        assert "No outstanding nominations" in screen.support_text

        # Saying it again does not bring the declined one back; a new name supersedes the
        # affirmed one, whose entry is flagged stale for review (never rewritten).
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat)
        await say(corpus_tavern, pid, "I love jazz.")
        await say(corpus_tavern, pid, "My name is Alex.")
        assert corpus_tavern.persona.nominations() == []
        assert (corpus_tavern.persona.persona().entries[0].stale
                and corpus_tavern.persona.persona().entries[0].text == name.statement)
        screen = await open_pane(pilot, "f8")
        assert rows(screen.entries)[0][-1] == "stale"
        editor = await open_editor(pilot, "e")
        stale_box = editor.query_one("#persona-stale", Checkbox)
        assert stale_box.value
        stale_box.value = False  # reviewed: keep the text, clear the mark
        loads = screen.loads
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen is screen)
        await settle(pilot, screen, loads)
        [entry] = corpus_tavern.persona.persona().entries
        assert not entry.stale and (entry.provenance, entry.belief_id, entry.text) == ("affirmed", name.id,
                                                                                       name.statement)
        assert rows(screen.entries)[0][-1] == ""


async def test_add_edit_remove_and_history_from_home(corpus_tavern: Tavern) -> None:
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        screen = await open_pane(pilot, "f8")
        assert screen.playthrough_id is None
        assert "a new playthrough's (normal) sensitivity ceiling" in str(screen.query_one("#persona-note").content)
        assert "No outstanding nominations" in screen.support_text
        assert app.focused is screen.entries
        await pilot.press("tab")
        assert app.focused is screen.nomination_table
        await pilot.press("tab")  # the supporting messages take no focus: back to the entries
        assert app.focused is screen.entries
        await pilot.press("shift+tab")
        assert app.focused is screen.nomination_table
        await pilot.press("shift+tab")
        assert app.focused is screen.entries

        # a: a new entry, typed, with a sensitivity above the default ceiling
        editor = await open_editor(pilot, "a")
        await pilot.press(*"Sam plays the cello.")
        editor.query_one("#persona-sensitivity", Select).value = "high"
        loads = screen.loads
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen is screen)
        await settle(pilot, screen, loads)
        [entry] = corpus_tavern.persona.persona().entries
        assert (entry.text, entry.provenance, entry.sensitivity) == ("Sam plays the cello.", "owner", "high")
        await noted(pilot, seen, f"Added entry {entry.id}: persona is now v1.")
        assert rows(screen.entries) == [[str(entry.id), "Sam plays the cello.", "owner", "high", "left out"]]

        # e: edit the text; the whole list is written with the ids kept
        editor = await open_editor(pilot, "e")
        assert editor.text == "Sam plays the cello."
        await pilot.press("end", *" And the piano.")
        loads = screen.loads
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen is screen)
        await settle(pilot, screen, loads)
        doc = corpus_tavern.persona.persona()
        assert [(e.id, e.text, e.sensitivity) for e in doc.entries] == [
            (entry.id, "Sam plays the cello. And the piano.", "high")]
        assert doc.version == 2

        # x: remove, after the confirm
        await pilot.press("x")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and bool(app.screen.query("#no")))
        await pilot.press("escape")  # no: nothing changes
        await wait_until(pilot, lambda: app.screen is screen)
        assert corpus_tavern.persona.persona().version == 2
        await pilot.press("delete")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and bool(app.screen.query("#no")))
        loads = screen.loads
        await pilot.press("y")
        await settle(pilot, screen, loads)
        assert corpus_tavern.persona.persona().entries == () and corpus_tavern.persona.persona().version == 3
        await noted(pilot, seen, f"Removed entry {entry.id}: persona is now v3.")
        assert rows(screen.entries) == []

        # h: every revision, newest first; the highlighted one's entries read-only
        await pilot.press("h")
        await wait_until(pilot, lambda: isinstance(app.screen, PersonaHistoryScreen) and app.screen.loaded)
        history = app.screen
        assert isinstance(history, PersonaHistoryScreen)
        assert [r[0] for r in rows(history.revisions)] == ["v3", "v2", "v1"]
        assert [r[2:] for r in rows(history.revisions)] == [["edit", "0 entries"], ["edit", "1 entry"],
                                                          ["edit", "1 entry"]]
        assert "(empty: nothing was sent)" in history.shown_text
        await pilot.press("down")
        await wait_until(pilot, lambda: "And the piano." in history.shown_text)
        assert "(owner, high)" in history.shown_text
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)

        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.is_mounted)


async def test_a_stale_version_writes_nothing_and_reloads(corpus_tavern: Tavern) -> None:
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        screen = await open_pane(pilot, "f8")
        assert screen.version == 0
        # another surface (the CLI, say) writes behind the pane's back
        behind = corpus_tavern.persona.edit_persona(0, add="Written elsewhere.")
        await open_editor(pilot, "a")
        await pilot.press(*"Mine.")
        loads = screen.loads
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen is screen)
        await settle(pilot, screen, loads)
        await noted(pilot, seen, lambda n: "Nothing was written: the persona changed since this pane read it "
                                          "(v0, now v1)" in n)
        assert corpus_tavern.persona.persona() == behind  # nothing written
        assert screen.version == 1 and [r[1] for r in rows(screen.entries)] == ["Written elsewhere."]


async def test_a_secret_is_refused_and_the_editor_stays_open(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_pane(pilot, "f8")
        editor = await open_editor(pilot, "a")
        await pilot.press(*f"My key is {SECRET}")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: bool(editor.error_text))
        assert app.screen is editor and editor.text == f"My key is {SECRET}"  # still open, the text kept
        assert "refused" in editor.error_text and "api key" in editor.error_text
        assert SECRET not in editor.error_text and "sk-" not in editor.error_text
        assert corpus_tavern.persona.persona().version == 0 and corpus_tavern.persona.persona().entries == ()
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)
        assert corpus_tavern.persona.persona().entries == ()


async def test_a_persona_over_its_cap_is_shown_with_the_error(corpus_tavern: Tavern) -> None:
    from tests.persona.test_persona import store_over_cap

    store_over_cap(corpus_tavern, [f"Fact number {i}." for i in range(MAX_ENTRIES + 1)])  # stored before write caps
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_pane(pilot, "f8")
        assert "over a cap: sessions will not open" in str(screen.query_one("#persona-title").content)
        note = screen.query_one("#persona-note").content
        assert "persona over its cap: 31 entries, the cap is 30 entries" in str(note)
        assert screen.entries.row_count == MAX_ENTRIES + 1  # still listed, so the owner can shorten it
        assert all(r[-1] == "" for r in rows(screen.entries))


async def test_the_chat_binding_is_shown_and_closes_back(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        assert any(b.id == "chat.persona" and b.key == "f8" for _, b, *_ in chat.active_bindings.values())
        await open_pane(pilot, "f8")
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)


@pytest.mark.usefixtures("no_cursor_blink")
def test_persona_screen_snapshot(snap_compare, corpus_tavern: Tavern) -> None:
    async def _open_the_pane(pilot: Pilot[object]) -> None:
        tavern = corpus_tavern
        pid, name, _jazz = await two_nominations(tavern)
        tavern.persona.affirm(name.id, expected_version=0)
        tavern.persona.edit_persona(1, add="Sam plays the cello in a quartet on Sundays.", sensitivity="high")
        await say(tavern, pid, "My name is Alex.")  # supersedes the affirmed name: its entry is flagged stale
        await open_pane(pilot, "f8")
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=SIZE, run_before=_open_the_pane)


# -- several personas (issue 20 item 6) ----------------------------------------------------


async def test_switching_personas_locking_the_chat_and_naming_one(corpus_tavern: Tavern) -> None:
    tavern = corpus_tavern
    ann, bo = tavern.persona.new_persona("Ann"), tavern.persona.new_persona("Bo")
    tavern.persona.edit_persona(bo.version, add="{{user}} bakes bread.", persona=bo.id)
    tavern.persona.use_persona("Ann")
    app = TavernApp(tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        pid = chat.playthrough_id
        screen = await open_pane(pilot, "f8")
        title = screen.query_one("#persona-title")
        assert screen.persona_id == ann.id and "Ann (2 of 3 · default)" in str(title.content)
        loads = screen.loads
        await pilot.press("s")  # shows Bo; nothing changes yet
        await settle(pilot, screen, loads)
        assert screen.persona_id == bo.id and [r[1] for r in rows(screen.entries)] == ["{{user}} bakes bread."]
        assert "Bo (3 of 3 · this chat plays as Ann)" in str(title.content)
        assert tavern.persona.playthrough_persona(pid).id == ann.id
        loads = screen.loads
        await pilot.press("u")  # from a chat: this chat is locked to Bo
        await settle(pilot, screen, loads)
        assert tavern.persona.is_locked(pid) and tavern.persona.playthrough_persona(pid).id == bo.id
        assert tavern.persona.find_persona(None).id == ann.id  # the default stays
        assert "this chat's, locked" in str(title.content)
        editor = await open_editor(pilot, "r")
        editor.query_one("#persona-text", Input).value = "Bea"
        loads = screen.loads
        await pilot.press("ctrl+s")
        await settle(pilot, screen, loads)
        assert tavern.persona.find_persona(bo.id).name == "Bea" and tavern.persona.find_persona(ann.id).name == "Ann"
        assert tavern.playthroughs.playthrough(pid).user_name == "Bea"


@pytest.mark.usefixtures("no_cursor_blink")
def test_persona_switcher_snapshot(snap_compare, corpus_tavern: Tavern) -> None:
    async def _open_the_second(pilot: Pilot[object]) -> None:
        tavern = corpus_tavern
        tavern.persona.new_persona("Ann")
        bo = tavern.persona.new_persona("Bo")
        tavern.persona.edit_persona(bo.version, add="{{user}} bakes bread at dawn.", persona=bo.id)
        tavern.persona.use_persona("Ann")
        screen = await open_pane(pilot, "f8")
        loads = screen.loads
        await pilot.press("s")
        await settle(pilot, screen, loads)
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=SIZE, run_before=_open_the_second)
