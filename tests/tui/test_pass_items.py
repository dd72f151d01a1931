"""Issue 21 items 3, 5, 6, 7 and 8: message actions on a middle message, the import picker (a
quoted path, several files, Tab completion), one toast for a folder of presets, the warnings that
are and are not said, labels people read, the narrow layouts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from textual.widgets import Input

from tavern_tui.formats.presets import parse_preset
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.labels import event_label, message_mark
from tavern_tui.tui.modals.confirm import ConfirmScreen
from tavern_tui.tui.modals.edit_message import EditMessageScreen
from tavern_tui.tui.modals.import_screen import ImportScreen, complete_path, split_paths, summarise
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.home import HomeScreen
from tavern_tui.tui.widgets.screen_title import fit_words
from tavern_tui.views import ImportResult
from tests.tui.conftest import ScriptedProvider, open_character, wait_until, workers_idle

SIZE = (120, 40)


async def _chat_with_two_exchanges(pilot, scripted: ScriptedProvider) -> ChatScreen:  # type: ignore[no-untyped-def]
    await open_character(pilot, "Seraphina")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChatScreen)
                     and pilot.app.screen.is_mounted and bool(pilot.app.screen.transcript.boxes))
    chat = pilot.app.screen
    for line, reply in (("First words", "First answer."), ("Second words", "Second answer.")):
        scripted.enqueue(reply)
        await pilot.press(*line)
        await pilot.press("enter")
        await wait_until(pilot, lambda reply=reply: not chat.generating
                         and any(b.text == reply and b.view is not None for b in chat.transcript.boxes))
    await workers_idle(pilot)
    return chat


async def test_message_actions_on_a_middle_message(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await _chat_with_two_exchanges(pilot, scripted)
        # greeting, First words, First answer, Second words, Second answer: alt+↑ three times is "First answer"
        await pilot.press("alt+up", "alt+up", "alt+up")
        assert chat.cursor_message is not None and chat.cursor_message.content == "First answer."
        assert chat.cursor_box().has_class("-cursor") and app.focused is chat.transcript
        await pilot.press("y")  # copy (OSC 52 through Textual's clipboard)
        assert app.clipboard == "First answer."
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, EditMessageScreen) and app.screen.is_mounted)
        app.screen.query_one("#edit-text").text = "First answer, rewritten."
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: any(b.text == "First answer, rewritten." for b in chat.transcript.boxes))
        await workers_idle(pilot)
        texts = [b.text for b in chat.transcript.boxes]
        assert texts[-4:] == ["First words", "First answer, rewritten.", "Second words", "Second answer."]
        edited = next(b for b in chat.transcript.boxes if b.text == "First answer, rewritten.")
        assert message_mark(edited.view) == "edited by you"  # the seed's origin "operator"
        assert edited.view.origin == "operator"
        # The cursor stays on the edited message (Esc then leaves the cursor, not the chat).
        assert chat.cursor_message.content == "First answer, rewritten." and app.focused is chat.transcript
        assert edited.has_class("-cursor")
        # Delete (hide) "Second words", after the confirm.
        await pilot.press("alt+down")
        assert chat.cursor_message.content == "Second words"
        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and bool(app.screen.query("#no")))
        await pilot.press("y")
        await wait_until(pilot, lambda: "Second words" not in [b.text for b in chat.transcript.boxes])
        await workers_idle(pilot)
        # Continue from the first answer: what followed stays a branch, the chat ends there.
        await pilot.press("alt+up", "alt+up")  # after an action the cursor starts again from the newest
        assert chat.cursor_message.content == "First answer, rewritten."
        await pilot.press("c")
        await wait_until(pilot, lambda: chat.transcript.boxes[-1].text == "First answer, rewritten.")
        assert chat.cursor_ref is None and app.focused is chat.prompt  # the action took the cursor away
        await pilot.press("alt+up")
        assert chat.cursor_ref is not None
        await pilot.press("escape")  # Esc leaves the cursor first, the chat stays
        assert chat.cursor_ref is None and app.focused is chat.prompt and app.screen is chat


def test_split_paths_reads_quotes_escapes_and_uris(tmp_path: Path) -> None:
    spaced = tmp_path / "My Cards"
    spaced.mkdir()
    (spaced / "a b.json").write_text("{}")
    assert split_paths(str(spaced / "a b.json")) == [str(spaced / "a b.json")]  # one existing path, unquoted
    assert split_paths(f"'{spaced}/a b.json' {tmp_path}/x\\ y.png") == [f"{spaced}/a b.json", f"{tmp_path}/x y.png"]
    assert split_paths(f'"{spaced}/a b.json"') == [f"{spaced}/a b.json"]
    assert split_paths("file:///tmp/My%20Cards/c.png") == ["/tmp/My Cards/c.png"]
    new, matches = complete_path(f"{tmp_path}/My")
    assert matches == [str(spaced)] and new == f"'{spaced}/'"


async def test_import_picker_with_a_quoted_path_and_several_files(corpus_tavern: Tavern, corpus_dir: Path,
                                                                 tmp_path: Path) -> None:
    folder = tmp_path / "My Cards"
    folder.mkdir()
    shutil.copy(corpus_dir / "cards" / "ai_v3_with_book.json", folder / "ai card.json")
    shutil.copy(corpus_dir / "worldbooks" / "hogwarts_agnai_memory.json", folder / "hogwarts book.json")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        home = app.screen
        await workers_idle(pilot)
        before = home.highlighted_character.id
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, ImportScreen) and app.screen.is_mounted)
        field = app.screen.query_one("#import-path", Input)
        field.value = f"'{folder}/ai card.json' {str(folder / 'hogwarts book.json').replace(' ', chr(92) + ' ')}"
        await pilot.press("enter")
        await wait_until(pilot, lambda: any(n.title == "Import" for n in app.notices))
        await workers_idle(pilot)
        [summary] = [n.text for n in app.notices if n.title == "Import"]
        # The card's bytes were imported with the corpus (under another name): not counted as imported.
        assert summary == "Imported 1 world book · 1 already imported"
        assert isinstance(app.screen, HomeScreen)
        assert home.highlighted_character.id == before  # no new character: the cursor did not jump


async def test_a_folder_of_presets_gives_one_warnings_toast(corpus_tavern: Tavern, corpus_dir: Path,
                                                           tmp_path: Path) -> None:
    folder = tmp_path / "presets"
    shutil.copytree(corpus_dir / "presets", folder / "nested")  # in a subfolder: read too
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await workers_idle(pilot)
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, ImportScreen) and app.screen.is_mounted)
        app.screen.query_one("#import-path", Input).value = str(folder)
        await pilot.press("enter")
        await wait_until(pilot, lambda: any(n.title == "Import" for n in app.notices), timeout=20)
        await workers_idle(pilot)
        [summary] = [n.text for n in app.notices if n.title == "Import"]
        assert summary == "Imported 4 presets"
        toasts = list(app._notifications)
        warned = [t for t in toasts if t.title == "Imported with warnings"]
        assert len(warned) <= 1 and all(t.message.count("\n") == 0 for t in toasts)
        full = [n for n in app.notices if n.title.startswith("Imported ") and n.title.endswith("with warnings")]
        if warned:
            assert warned[0].message.endswith("ctrl+l lists them.") and full
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "NoticesScreen")


def test_marker_prompts_with_an_empty_role_are_not_warned() -> None:
    preset = {"temperature": 1, "prompts": [
        {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True, "role": ""},
        {"identifier": "worldInfoBefore", "name": "World Info (before)", "role": ""},  # a known marker id
        {"identifier": "custom1", "name": "Mine", "role": "", "content": "Be terse."},
    ]}
    parsed = parse_preset(json.dumps(preset).encode(), "p.json")
    assert not any("chatHistory" in w or "worldInfoBefore" in w for w in parsed.warnings)
    assert any("'custom1'" in w and "role is empty; sent as system" in w for w in parsed.warnings)


def test_a_broken_preset_is_called_a_broken_preset(corpus_tavern: Tavern, corpus_dir: Path, tmp_path: Path) -> None:
    text = (corpus_dir / "presets" / "st_openai_default_staging.json").read_text(encoding="utf-8")
    broken = tmp_path / "cut.json"
    broken.write_text(text[: len(text) // 2], encoding="utf-8")  # a download cut off half way
    [result] = corpus_tavern.imports.import_paths([broken])
    assert result.error is not None and "a broken preset" in result.error
    assert "not a PNG or JSON card" not in result.error


def test_an_agnai_entry_whose_constant_is_dropped_is_named(corpus_tavern: Tavern, corpus_dir: Path,
                                                          tmp_path: Path) -> None:
    book = json.loads((corpus_dir / "worldbooks" / "hogwarts_agnai_memory.json").read_text(encoding="utf-8"))
    book["entries"][1]["constant"] = True
    path = tmp_path / "agnai.json"
    path.write_text(json.dumps(book), encoding="utf-8")
    [result] = corpus_tavern.imports.import_paths([path])
    name = book["entries"][1]["name"]
    assert result.ok and any(f"({name}): Agnai's constant: true is dropped" in w for w in result.warnings)
    assert sum("constant" in w for w in result.warnings) == 1


def test_already_imported_is_not_counted_as_imported() -> None:
    results = [ImportResult("a.json", "world_book", 1, "a"), ImportResult("b.json", "world_book", 2, "b"),
               ImportResult("c.json", "chat", 3, "c"), ImportResult("d.png", "character", 4, "d", duplicate=True),
               ImportResult("e.json", "unknown", error="e.json: nope")]
    assert summarise(results) == ("Imported 2 world books, 1 chat · 1 already imported · 1 failed", "warning")


def test_labels_people_read() -> None:
    assert event_label("14:11") == "session 14 · event 11" and event_label((3, 7)) == "session 3 · event 7"
    title = "Seraphina · #12 · playing as Ada · preset-slots-first · default preset"
    cut = fit_words(title, 40)
    assert title[:cut] == "Seraphina · #12 · playing as Ada" and len(title[:cut]) + 1 <= 40
