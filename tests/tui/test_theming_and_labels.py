"""Tests of the theme loader and the plain-text labels (no app needed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tavern_tui.lore.model import Position, WorldInfoEntry
from tavern_tui.lore.result import Decision, Reason
from tavern_tui.service import CharacterView, MessageView, Tavern, WorldBookView
from tavern_tui.tui import theming
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.labels import character_summary, message_classes, message_mark, relative_time, spec_label
from tavern_tui.tui.lore_labels import binding_labels, decision_line, keys_label, position_label

NOW = datetime(2025, 3, 14, 12, 0, tzinfo=UTC)


def test_the_shipped_themes_folder_is_found_and_loads() -> None:
    folder = theming.themes_dir()
    assert (folder / "app.tcss").is_file()
    loaded = theming.load_themes()
    assert loaded.failed == []
    [dark] = [t for t in loaded.themes if t.name == theming.DEFAULT_THEME]
    assert dark.dark and dark.primary.startswith("#")
    # every app variable the theme overrides is declared with a default (else the CSS cannot parse)
    assert set(dark.variables) - {"footer-key-foreground"} <= set(theming.APP_VARIABLES)


def test_a_broken_theme_file_is_reported_by_name(tmp_path: Path) -> None:
    (tmp_path / "ok.toml").write_text('name = "ok"\nprimary = "#123456"\n', encoding="utf-8")
    (tmp_path / "broken.toml").write_text("name = \n", encoding="utf-8")
    (tmp_path / "nameless.toml").write_text('primary = "#123456"\n', encoding="utf-8")
    loaded = theming.load_themes(tmp_path)
    assert [t.name for t in loaded.themes] == ["ok"]
    assert len(loaded.failed) == 2 and any(f.startswith("broken.toml:") for f in loaded.failed)
    assert any(f.startswith("nameless.toml:") for f in loaded.failed)


def test_relative_time() -> None:
    assert relative_time(NOW - timedelta(seconds=5), NOW) == "just now"
    assert relative_time(NOW - timedelta(minutes=5), NOW) == "5 min ago"
    assert relative_time(NOW - timedelta(hours=3), NOW) == "3 h ago"
    assert relative_time(NOW - timedelta(hours=30), NOW) == "yesterday"
    assert relative_time(NOW - timedelta(days=40), NOW)[:4] == "2025"


def _message(**changes: object) -> MessageView:
    base: dict[str, object] = dict(ref=(1, 1), role="assistant", origin="agent", natural=True, kind="assistant/message",
                                   source=None, content="hi", speaker="Seraphina", created_at=NOW)
    base.update(changes)
    return MessageView(**base)  # type: ignore[arg-type]


def test_marks_and_classes_follow_origin_and_partial_state() -> None:
    plain = _message()
    assert message_mark(plain) == "" and message_classes(plain) == ["-assistant"]
    greeting = _message(origin="engine", natural=False, source="opening")
    assert message_mark(greeting) == "greeting" and "-origin-engine" in message_classes(greeting)
    rewritten = _message(origin="operator", natural=False)
    assert message_mark(rewritten) == "edited by you"  # the seed's "operator", as people say it
    stopped = _message(kind="assistant/attempt", partial=True)
    assert message_mark(stopped) == "stopped" and {"-partial", "-stopped"} <= set(message_classes(stopped))
    failed = _message(kind="assistant/attempt", partial=True, error="Invalid API key")
    assert message_mark(failed) == "error: Invalid API key" and "-error" in message_classes(failed)


def test_labels() -> None:
    assert spec_label("chara_card_v3") == "V3 card" and spec_label("odd") == "odd"
    one = CharacterView(1, "A", "chara_card_v2", "", (), 1, 1, "a.png", NOW)
    many = CharacterView(2, "B", "chara_card_v3", "", (), 3, 27, "b.png", NOW)
    assert character_summary(one) == "V2 card · 1 greeting · 1 lorebook entry"
    assert character_summary(many) == "V3 card · 3 greetings · 27 lorebook entries"


def test_world_book_labels() -> None:
    assert keys_label(["shadowfang", "beast", "monster", "monsters", "beasts"], 26) == "shadowfang, beast +3"
    assert keys_label(["glade", "refuge"], 26) == "glade, refuge" and keys_label([], 26) == ""
    assert keys_label(["x" * 40, "y"], 12) == "xxxxxxxx… +1"  # 12 wide
    assert position_label(WorldInfoEntry(0)) == "↑Char"
    assert position_label(WorldInfoEntry(0, position=Position.AT_DEPTH, depth=2)) == "@D 2"

    book = WorldBookView(1, "Lore", 3, "lore.json", NOW, ("global", "character:3", "character:5", "playthrough:7"))
    names = {3: "Seraphina", 5: "Skynet"}
    assert binding_labels(book, character_id=3, playthrough_id=7, character_names=names) == (
        ["global", "this character", "Skynet", "this playthrough"], True)
    assert binding_labels(book, character_id=None, playthrough_id=None, character_names=names) == (
        ["global", "Seraphina", "Skynet", "playthrough #7"], False)

    fired = Decision("Eldoria", 1, "shadowfang", True, Reason.KEY, "key 'shadowfang' found in the input")
    assert decision_line(fired) == "✓ Eldoria#1 shadowfang — key: key 'shadowfang' found in the input"
    skipped = Decision("Eldoria", 2, "", False, Reason.NO_MATCH, "no primary key found")
    assert decision_line(skipped) == "✗ Eldoria#2 — no_match: no primary key found"


async def test_the_stylesheet_works_under_builtin_themes_too(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.theme == theming.DEFAULT_THEME
        for name in ("textual-dark", "textual-light"):
            app.theme = name  # re-parses app.tcss with this theme's variables
            await pilot.pause()
            assert app.theme_variables["speaker-character"] == app.theme_variables["primary"]
