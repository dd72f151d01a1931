"""At 80×24: a long status line ends with "…" and its whole text is in the notifications (ctrl+l);
a toast never covers the composer."""

from __future__ import annotations

from pathlib import Path

from textual.widgets._toast import Toast

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.notices import NoticesScreen
from tests.tui.conftest import ScriptedProvider, open_character, screen_text, wait_until
from tests.tui.test_app import send

NARROW = (80, 24)
REFUSED = "SCHEMA VIOLATION: Cannot assign new key 'x' into non-extensible object at path 'user'. (试试)"
REPLY = ("理点头。\n<UpdateVariable>\n_.add('理.好感度', 5);//她很开心\n_.insert('user', 'x', 1);//试试\n"
         "_.insert('user', 'y', 2);//再试\n</UpdateVariable>")


async def test_a_long_refusal_is_cut_with_an_ellipsis_and_kept_whole_in_the_notifications(
        corpus_tavern: Tavern, scripted: ScriptedProvider, corpus_dir: Path) -> None:
    [result] = corpus_tavern.imports.import_paths([corpus_dir / "stateful" / "qingkong_li_mvu.png"])
    assert result.id is not None
    corpus_tavern.scripts.set_allowed(result.id)
    scripted.enqueue(REPLY)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        await open_character(pilot, "青空 理")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and bool(app.screen.transcript.boxes))
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await pilot.press("ctrl+right")  # the second greeting
        await wait_until(pilot, lambda: "新来的牧师" in chat.transcript.boxes[-1].text)
        await send(pilot, chat, "hello")
        await wait_until(pilot, lambda: "MVU refused" in chat.status.detail)
        await pilot.pause()
        row = next(line for line in screen_text(app).splitlines() if "MVU refused" in line)
        assert row.rstrip().endswith("…")
        kept = [n for n in app.notices if n.title == "Status line"]
        assert len(kept) == 1
        assert kept[0].text.splitlines()[0] == "MVU refused 2 commands:"
        assert kept[0].text.splitlines()[1].startswith("• " + REFUSED)
        assert "Cannot assign new key 'y'" in kept[0].text.splitlines()[2]
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: isinstance(app.screen, NoticesScreen) and app.screen.is_mounted)
        assert "Cannot assign new key 'y'" in screen_text(app)


async def test_a_long_toast_stays_off_the_composer_at_80_columns(corpus_tavern: Tavern,
                                                                 scripted: ScriptedProvider) -> None:
    failure = RuntimeError("the endpoint closed the stream " + "and said nothing more about why, " * 8)
    scripted.enqueue("Half a rep", failure)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW, notifications=True) as pilot:
        await open_character(pilot, "Seraphina")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and bool(app.screen.transcript.boxes))
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await send(pilot, chat, "hello")
        await wait_until(pilot, lambda: chat.status.state != "streaming" and not chat.generating)
        await wait_until(pilot, lambda: chat.status.state == "error" and bool(chat.query(Toast)))
        await pilot.pause()
        toast = chat.query(Toast).last()
        assert "and said nothing more" in str(toast.render())
        assert toast.region.height > 0 and toast.region.width > 0
        assert not toast.region.overlaps(chat.prompt.region)
        assert not toast.region.overlaps(chat.status.region)
        assert toast.region.y >= 1  # under the title
        # The status line ends with an ellipsis; the error is whole in the notifications.
        row = next(line for line in screen_text(app).splitlines() if "error — internal" in line)
        assert row.rstrip().endswith("…")
        assert [n.text for n in app.notices] == [f"internal: RuntimeError: {failure}"]  # once, whole


async def test_the_notifications_wrap_inside_their_box_at_80_columns(corpus_tavern: Tavern) -> None:
    words = "Message cursor: alt+up picks a message, then e edits it, c continues from here · [enter] opens it"
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        await pilot.pause()
        app.notify(words, title="Message cursor")
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: isinstance(app.screen, NoticesScreen) and app.screen.is_mounted)
        await pilot.pause()
        shown = screen_text(app)
        # Every word is on the screen: none cut off at the box's right edge (RichLog drew 78 wide).
        assert " ".join(shown.split()).count("opens it") == 1
        assert all(word in shown for word in words.split())
