"""Pilot tests of swipes, regenerate/continue/impersonate keys and the branch tree (F5) on the
real app and service, with the scripted provider."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import SimpleNamespace

from rich.style import Style
from textual.app import App
from textual.message import Message
from textual.pilot import Pilot

from tavern_tui.service import Tavern
from tavern_tui.tui import theming
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.confirm import ConfirmScreen
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.home import HomeScreen
from tavern_tui.tui.screens.tree import TreeScreen, VariantTree, placements
from tavern_tui.views import TimelineView, VariantView
from tests.tui.conftest import ScriptedProvider, notifications, wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina, send


def shown(chat: ChatScreen) -> list[str]:
    """The texts of the chat's message boxes, oldest first."""
    return [box.text for box in chat.transcript.boxes]


def stored(tavern: Tavern, chat: ChatScreen) -> list[str]:
    """The texts the service holds for the chat's playthrough."""
    return [m.content for m in tavern.playthroughs.messages(chat.playthrough_id)]


async def settled(pilot: Pilot[object], chat: ChatScreen, last: str, swipe: str | None = None) -> None:
    """Wait until the step has ended and the chat's last box shows `last` (and, given `swipe`,
    the status line that swipe counter: the transcript and the status line are updated by
    separate awaits of one read, so one can be seen before the other)."""
    await pilot.app.workers.wait_for_complete()
    await wait_until(pilot, lambda: not chat.generating and bool(chat.transcript.boxes)
                     and chat.transcript.boxes[-1].text == last and swipe in (None, chat.status.swipe))


async def open_tree(pilot: Pilot[object]) -> TreeScreen:
    """Press F5 in the chat and wait until the tree's cursor is on a message."""
    await pilot.press("f5")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, TreeScreen)
                     and pilot.app.screen.current is not None)
    screen = pilot.app.screen
    assert isinstance(screen, TreeScreen)
    return screen


async def test_swipe_back_continue_then_jump_to_another_swipe_in_the_tree(corpus_tavern: Tavern,
                                                                           scripted: ScriptedProvider) -> None:
    # The scenario: a reply, three swipes right (replies 2-4), back to swipe 2, a new
    # message from there, then the tree: jump to swipe 3's branch.
    for reply in ("Reply one.", "Reply two.", "Reply three.", "Reply four.", "After two."):
        scripted.enqueue(reply)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        greeting = stored(corpus_tavern, chat)[0]
        await send(pilot, chat, "hello")
        assert shown(chat) == stored(corpus_tavern, chat) == [greeting, "hello", "Reply one."]
        assert chat.status.swipe == "" and "swipe" not in chat.status.line

        for count, reply in enumerate(("Reply two.", "Reply three.", "Reply four."), start=2):
            await pilot.press("ctrl+right")  # past the last reply: generates a new one
            await settled(pilot, chat, reply, f"swipe {count}/{count}")
            assert shown(chat) == stored(corpus_tavern, chat) == [greeting, "hello", reply]
            assert f"swipe {count}/{count}" in chat.status.line
        assert len(scripted.requests) == 4

        for count, reply in ((3, "Reply three."), (2, "Reply two.")):
            await pilot.press("ctrl+left")
            await wait_until(pilot, lambda reply=reply, count=count: shown(chat)[-1] == reply
                             and chat.status.swipe == f"swipe {count}/4")
            assert stored(corpus_tavern, chat) == [greeting, "hello", reply]
        assert len(scripted.requests) == 4  # swiping among stored replies asks the model nothing

        await send(pilot, chat, "next")
        assert shown(chat) == stored(corpus_tavern, chat) == [greeting, "hello", "Reply two.", "next", "After two."]
        assert chat.status.swipe == ""
        # the request for it carried swipe 2, not the others
        assert [m["content"] for m in scripted.requests[-1].messages if m["role"] == "assistant"][-1] == "Reply two."

        tree_screen = await open_tree(pilot)
        tree = tree_screen.tree
        assert tree_screen.current.preview == "After two."  # the shown last message
        await pilot.press("right")  # in swipe 2's branch: → moves to the next alternative
        assert tree_screen.current.preview == "Reply three." and tree_screen.current.position == (3, 4)
        assert not tree.nodes[tree_screen.current.ref].allow_expand  # nothing followed swipe 3
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen is chat and shown(chat)[-1] == "Reply three."
                         and chat.status.swipe == "swipe 3/4")
        assert shown(chat) == stored(corpus_tavern, chat) == [greeting, "hello", "Reply three."]

        # jumping to the message after swipe 2 brings its branch back, newest continuation and all
        tree_screen = await open_tree(pilot)
        assert tree_screen.current.preview == "Reply three."
        await pilot.press("left")
        assert tree_screen.current.preview == "Reply two."
        # Only swipe 2 goes on, so nothing nests: its continuation follows the four swipes, and it
        # says so (the path now runs through swipe 3, which nothing follows).
        assert "continues below" in str(tree_screen.tree.render_label(tree_screen.tree.cursor_node, Style(), Style()))
        await pilot.press("down", "down", "down")
        assert tree_screen.current.preview == "next"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen is chat and shown(chat)[-1] == "After two.")
        assert shown(chat) == stored(corpus_tavern, chat) == [greeting, "hello", "Reply two.", "next", "After two."]


async def test_tree_nests_only_at_branch_points(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    for reply in ("Reply one.", "Reply two.", "After two.", "Then."):
        scripted.enqueue(reply)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "hello")
        await pilot.press("ctrl+right")
        await settled(pilot, chat, "Reply two.")
        await send(pilot, chat, "next")
        await send(pilot, chat, "more")

        tree_screen = await open_tree(pilot)
        tree = tree_screen.tree
        top = [node.data.preview for node in tree.root.children]
        # Swipe 1 has no continuation: no fork, so the chat is one flat list, both swipes side by side.
        assert top[1:] == ["hello", "Reply one.", "Reply two.", "next", "After two.", "more", "Then."]
        assert not any(node.allow_expand for node in tree.root.children)
        assert tree_screen.current.preview == "Then."
        assert [n.data.active for n in tree.root.children[2:]] == [False, True, True, True, True, True]
        await pilot.press("left")  # from the end of the chat: the alternatives of the branch it sits in
        assert tree_screen.current.preview == "Reply one."
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat)
        assert shown(chat)[-1] == "Then."


async def test_rollback_keeps_the_later_messages_as_a_branch(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    for reply in ("Reply one.", "Reply two.", "Reply three."):
        scripted.enqueue(reply)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        greeting = stored(corpus_tavern, chat)[0]
        await send(pilot, chat, "hello")
        await send(pilot, chat, "more")
        tree_screen = await open_tree(pilot)
        await pilot.press("up", "up")
        assert tree_screen.current.preview == "Reply one."
        await pilot.press("r")
        await wait_until(pilot, lambda: app.screen is chat and shown(chat)[-1] == "Reply one.")
        assert shown(chat) == stored(corpus_tavern, chat) == [greeting, "hello", "Reply one."]

        await send(pilot, chat, "instead")
        assert shown(chat) == [greeting, "hello", "Reply one.", "instead", "Reply three."]
        timeline = corpus_tavern.timeline.timeline(chat.playthrough_id)
        kept = {v.preview: v for v in timeline.variants}
        assert not kept["more"].active and not kept["Reply two."].active  # still there, off the path
        assert kept["more"].position == (1, 2) and kept["instead"].position == (2, 2)

        tree_screen = await open_tree(pilot)
        tree = tree_screen.tree
        assert [n.data.preview for n in tree.root.children][1:] == ["hello", "Reply one.", "more", "instead"]
        assert not tree.nodes[kept["more"].ref].is_expanded and tree.nodes[kept["instead"].ref].is_expanded
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat)


async def test_new_playthrough_from_a_message_opens_it(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue("Reply one.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        first = chat.playthrough_id
        greeting = stored(corpus_tavern, chat)[0]
        await send(pilot, chat, "hello")
        tree_screen = await open_tree(pilot)
        await pilot.press("up")
        assert tree_screen.current.preview == "hello"
        await pilot.press("b")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and app.screen.playthrough_id != first
                         and bool(app.screen.transcript.boxes))
        branch = app.screen
        assert shown(branch) == [greeting, "hello"]
        assert [m.content for m in corpus_tavern.playthroughs.messages(first)] == [greeting, "hello", "Reply one."]
        marks = {v.preview: v.branches for v in corpus_tavern.timeline.timeline(first).variants}
        assert marks["hello"] == (branch.playthrough_id,)
        await pilot.press("escape")  # the branch replaced the chat: back goes home
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.is_mounted)


async def test_impersonate_then_enter_on_the_empty_prompt_answers(corpus_tavern: Tavern,
                                                                  scripted: ScriptedProvider) -> None:
    # `[tui] impersonate_direct = true`: F4 posts the line (the default fills the composer,
    # tests/tui/test_impersonate_and_cursor.py).
    corpus_tavern.settings = replace(corpus_tavern.settings, tui=replace(corpus_tavern.settings.tui,
                                                                         impersonate_direct=True))
    scripted.enqueue("I look around the glade.")
    scripted.enqueue("Seraphina nods.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        greeting = stored(corpus_tavern, chat)[0]
        await pilot.press("f4")
        await settled(pilot, chat, "I look around the glade.")
        box = chat.transcript.boxes[-1]
        last = corpus_tavern.playthroughs.messages(chat.playthrough_id)[-1]
        assert last.role == "user" and last.origin == "agent" and box.view == last
        assert box.has_class("-user") and not box.has_class("-streaming")

        await pilot.press("enter")
        await settled(pilot, chat, "Seraphina nods.")
        assert shown(chat) == stored(corpus_tavern, chat) == [greeting, "I look around the glade.", "Seraphina nods."]
        # a normal generation (SillyTavern's empty Send), not a regenerate
        assert [t.generation for t in corpus_tavern.traces.traces(chat.playthrough_id)] == ["impersonate", "normal"]


async def test_continue_and_regenerate_keys(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue("Reply one.")
    scripted.enqueue(" And more.")
    scripted.enqueue("Fresh reply.")
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        chat = await open_seraphina(pilot)
        greeting = stored(corpus_tavern, chat)[0]
        await pilot.press("ctrl+r")  # only the greeting: it swipes among greetings, no reply to redo
        await pilot.app.workers.wait_for_complete()
        await wait_until(pilot, lambda: not chat.generating)
        await wait_until(pilot, lambda: any(n.title == "Cannot regenerate" and n.severity == "warning"
                                            for n in notifications(seen)))
        assert chat.status.state == "idle" and shown(chat) == [greeting] and not scripted.requests

        await send(pilot, chat, "hello")
        await pilot.press("f3")
        await settled(pilot, chat, "Reply one. And more.", "swipe 2/2")  # the original is one swipe left
        assert shown(chat) == stored(corpus_tavern, chat) == [greeting, "hello", "Reply one. And more."]

        await pilot.press("ctrl+r")
        await settled(pilot, chat, "Fresh reply.", "swipe 3/3")
        assert shown(chat) == stored(corpus_tavern, chat) == [greeting, "hello", "Fresh reply."]
        await pilot.press("ctrl+left", "ctrl+left")
        await wait_until(pilot, lambda: shown(chat)[-1] == "Reply one." and chat.status.swipe == "swipe 1/3")


async def test_continuing_the_greeting_extends_it_in_place(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue(" She smiles.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        greeting = stored(corpus_tavern, chat)[0]
        await pilot.press("f3")
        await settled(pilot, chat, greeting + " She smiles.", "swipe 2/2")
        [box] = chat.transcript.boxes
        assert box.view == corpus_tavern.playthroughs.messages(chat.playthrough_id)[0] and not box.has_class("-partial")


async def test_ctrl_arrows_move_by_word_while_the_prompt_has_text(corpus_tavern: Tavern,
                                                                  scripted: ScriptedProvider) -> None:
    scripted.enqueue("Reply one.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "hello")
        await pilot.press(*"two words")
        await pilot.press("ctrl+left")
        assert chat.prompt.cursor_position == len("two ")
        await pilot.press("ctrl+right")
        await pilot.app.workers.wait_for_complete()
        assert not scripted.scripts and len(scripted.requests) == 1  # no swipe, no generation
        assert chat.prompt.value == "two words" and shown(chat)[-1] == "Reply one."


# -- a long chat, without the service --------------------------------------------------------


def _chain(length: int, fork_at: int) -> TimelineView:
    """A `length`-message chat whose message `fork_at` has one alternative, off the active path."""
    fork, other = (1, fork_at), (2, fork_at)
    variants: list[VariantView] = []
    for seq in range(1, length + 1):
        variants.append(VariantView((1, seq), (1, seq - 1) if seq > 1 else None, seq - 1,
                                    "assistant" if seq % 2 else "user", "agent", None, "assistant/message",
                                    (1, 2) if seq == fork_at else (1, 1), True, f"message {seq}",
                                    2 if seq == fork_at - 1 else int(seq < length)))
    # depth-first: the alternative comes after its sibling's whole subtree
    variants.append(VariantView(other, (1, fork_at - 1), fork_at - 1, "assistant", "agent", None,
                                "assistant/message", (2, 2), False, "the other reply", 0))
    siblings = {v.ref: [v.ref] for v in variants}
    siblings[fork] = siblings[other] = [fork, other]
    return TimelineView(1, 1, variants, [v.ref for v in variants if v.active], siblings)


def test_placements_of_a_long_chat_nest_only_where_it_forks() -> None:
    # A swipe nothing follows (the other reply) is no fork: the chat stays one flat list.
    timeline = _chain(5000, fork_at=10)
    placed = placements(timeline.variants)
    assert all(placed[(1, seq)] is None for seq in range(1, 5001)) and placed[(2, 10)] is None
    # Both alternatives of message 10 go on: each holds its own continuation, side by side.
    other_child = VariantView((2, 11), (2, 10), 10, "user", "agent", None, "user/message", (1, 1), False,
                              "went the other way", 0)
    forked = [v if v.ref != (2, 10) else replace(v, children=1) for v in timeline.variants] + [other_child]
    placed = placements(forked)
    assert placed[(1, 10)] is None and placed[(2, 10)] is None
    assert all(placed[(1, seq)] == (1, 10) for seq in range(11, 5001))
    assert placed[(2, 11)] == (2, 10)


@dataclass
class _Playthrough:
    id: int = 1
    character_name: str = "Seraphina"
    user_name: str = "You"
    created_at: datetime = datetime(2025, 1, 1, tzinfo=UTC)


class _LongChat:
    """The calls the tree screen makes (`playthroughs.playthrough`, `timeline.timeline`, and
    `groups.group_of` for its title: not a group chat), for a 5,000-message chat."""

    def __init__(self) -> None:
        self.timeline_view = _chain(5000, fork_at=10)
        self.playthroughs = SimpleNamespace(playthrough=self.playthrough)
        self.timeline = SimpleNamespace(timeline=self._timeline)
        self.groups = SimpleNamespace(group_of=lambda _playthrough_id: None)

    def playthrough(self, playthrough_id: int) -> _Playthrough:
        return _Playthrough(playthrough_id)

    def _timeline(self, playthrough_id: int) -> TimelineView:
        return self.timeline_view


async def test_a_5000_message_chat_opens_with_the_last_message_under_the_cursor() -> None:
    class TreeApp(App[None]):
        def get_theme_variable_defaults(self) -> dict[str, str]:
            return theming.app_variable_defaults(self.current_theme)  # the tree's colours use them

        def on_mount(self) -> None:
            self.push_screen(TreeScreen(_LongChat(), 1))  # type: ignore[arg-type]

    app = TreeApp()
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, TreeScreen) and app.screen.current is not None)
        tree = app.screen.query_one(VariantTree)
        assert app.screen.current.preview == "message 5000"
        assert tree.cursor_line == tree.last_line  # the other reply sits beside its sibling, not at the end
        assert tree.nodes[(2, 10)].line == tree.nodes[(1, 10)].line + 1
        assert max(_depth(node) for node in tree.nodes.values()) == 1  # no fork: one flat list
        await pilot.press("right")
        assert app.screen.current.preview == "the other reply"


def _depth(node: object) -> int:
    depth = 0
    while node.parent is not None:  # type: ignore[attr-defined]
        depth += 1
        node = node.parent  # type: ignore[attr-defined]
    return depth



async def test_edit_and_delete_from_the_tree(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    from textual.widgets import TextArea

    from tavern_tui.tui.modals.edit_message import EditMessageScreen

    scripted.enqueue("Reply one.")
    scripted.enqueue("Reply two.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        greeting = stored(corpus_tavern, chat)[0]
        await send(pilot, chat, "hello")
        await send(pilot, chat, "more")
        tree_screen = await open_tree(pilot)
        await pilot.press("up", "up")
        assert tree_screen.current.preview == "Reply one."
        await pilot.press("e")
        # (the modal is pushed before it composes: wait for its editor, not only the screen)
        await wait_until(pilot, lambda: isinstance(app.screen, EditMessageScreen) and bool(app.screen.query(TextArea)))
        editor = app.screen.query_one(TextArea)
        assert editor.text == "Reply one."
        editor.text = "Reply one, rewritten by me."
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen is tree_screen and tree_screen.current is not None
                         and tree_screen.current.edited)
        assert tree_screen.current.preview == "Reply one, rewritten by me."
        await workers_idle(pilot)  # the edit reloads the tree (in a worker) and puts the cursor back on it
        await pilot.press("down", "down")  # "Reply two."
        assert tree_screen.current.preview == "Reply two."
        await pilot.press("d")  # asks first (SillyTavern asks before deleting)
        # y must reach the question
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen.is_mounted)
        await pilot.press("y")
        await wait_until(pilot, lambda: tree_screen.current is not None and tree_screen.current.deleted)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is chat and shown(chat)[-1] == "more")
        assert shown(chat) == stored(corpus_tavern, chat) == [greeting, "hello", "Reply one, rewritten by me.", "more"]
        rewritten = corpus_tavern.playthroughs.messages(chat.playthrough_id)[2]
        assert rewritten.origin == "operator"


async def test_ctrl_delete_deletes_just_the_shown_swipe(corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    # Issue 24: SillyTavern's "delete swipe" removes the shown swipe and shows the one before it.
    for reply in ("Reply one.", "Reply two.", "Reply three."):
        scripted.enqueue(reply)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        greeting = stored(corpus_tavern, chat)[0]
        await send(pilot, chat, "hello")
        for reply in ("Reply two.", "Reply three."):
            await pilot.press("ctrl+right")
            await settled(pilot, chat, reply)
        await pilot.press("ctrl+left")
        # the transcript and the status line are redrawn by separate callbacks: wait for both
        await wait_until(pilot, lambda: shown(chat)[-1] == "Reply two." and chat.status.swipe == "swipe 2/3")
        await pilot.press("ctrl+delete")
        await wait_until(pilot, lambda: chat.status.swipe == "swipe 1/2" and shown(chat)[-1] == "Reply one.")
        assert shown(chat) == stored(corpus_tavern, chat) == [greeting, "hello", "Reply one."]
        await pilot.press("ctrl+right")
        # the deleted swipe is gone, the others stay
        await wait_until(pilot, lambda: shown(chat)[-1] == "Reply three." and chat.status.swipe == "swipe 2/2")


async def test_enter_on_the_empty_prompt_after_the_greeting_lets_the_model_speak(corpus_tavern: Tavern,
                                                                                 scripted: ScriptedProvider) -> None:
    scripted.enqueue("*Seraphina speaks first.* You are awake.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        greeting = stored(corpus_tavern, chat)[0]
        chat.prompt.focus()
        await pilot.press("enter")
        await settled(pilot, chat, "*Seraphina speaks first.* You are awake.")
        assert stored(corpus_tavern, chat) == [greeting, "*Seraphina speaks first.* You are awake."]
        assert scripted.requests[-1].messages[-1]["content"] == greeting  # no made-up turn of the person
