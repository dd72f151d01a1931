"""Pilot test of the MVU state pane (ctrl+g and palette "State" in the chat) and the refusal status, on the
real app and service with MagVarUpdate's demo card (corpus/stateful/qingkong_li_mvu.png).

Expected values: the card's second greeting sets `理.好感度` to 15 (`_.set("理.好感度",0,15)`); the reply's
`_.add('理.好感度', 5);//她很开心` makes it 20 (update_variables.ts:1344-1375); `_.insert('user', 'x', 1)` into the
non-extensible `user` object is refused with MVU's message "SCHEMA VIOLATION: Cannot assign new key 'x' into
non-extensible object at path 'user'." (:862-880).
"""

from __future__ import annotations

from pathlib import Path

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.state import StateScreen
from tests.tui.conftest import ScriptedProvider, open_character, wait_until
from tests.tui.test_app import SIZE, send

REPLY = ("理点头。\n<UpdateVariable>\n_.add('理.好感度', 5);//她很开心\n_.insert('user', 'x', 1);//试试\n"
         "</UpdateVariable>")


def tree_lines(pane: StateScreen) -> list[str]:
    out: list[str] = []

    def walk(node, depth: int) -> None:  # type: ignore[no-untyped-def]
        for child in node.children:
            out.append("  " * depth + str(child.label))
            walk(child, depth + 1)
    walk(pane.tree.root, 0)
    return out


async def test_state_pane_shows_the_change_and_the_status_names_a_refusal(
        corpus_tavern: Tavern, scripted: ScriptedProvider, corpus_dir: Path) -> None:
    [result] = corpus_tavern.imports.import_paths([corpus_dir / "stateful" / "qingkong_li_mvu.png"])
    assert result.id is not None
    corpus_tavern.scripts.set_allowed(result.id)  # no allowance question racing the first paint (its own test)
    scripted.enqueue(REPLY)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await open_character(pilot, "青空 理")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and bool(app.screen.transcript.boxes))
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await pilot.press("ctrl+right")  # the second greeting
        await wait_until(pilot, lambda: "新来的牧师" in chat.transcript.boxes[-1].text)
        await send(pilot, chat, "hello")
        await wait_until(pilot, lambda: "MVU refused" in chat.status.detail)
        assert chat.status.detail == ("MVU refused 1 command (ctrl+g): SCHEMA VIOLATION: Cannot assign new key 'x' "
                                      "into non-extensible object at path 'user'. (试试)")
        await pilot.press("ctrl+g")
        await wait_until(pilot, lambda: isinstance(app.screen, StateScreen) and bool(app.screen.tree.root.children))
        pane = app.screen
        assert isinstance(pane, StateScreen)
        lines = tree_lines(pane)
        assert "理" in lines
        assert any(line.strip().startswith("好感度 = 20  (") for line in lines)
        order = [w.id for w in pane.query_one("#state-body").children]
        assert order.index("state-changes") < order.index("state-tree")  # what changed, before the whole tree
        changes = str(pane.changes.content).splitlines()
        assert changes[0] == "理.好感度: 15 → 20  (她很开心)"
        assert changes[1].startswith("refused _.insert('user', 'x', 1);//试试: SCHEMA VIOLATION")
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)
        await pilot.press("ctrl+p")
        await pilot.press(*"State")
        await pilot.pause(0.2)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, StateScreen) and app.screen.is_mounted)
