"""Provides `Forks`: the synchronous preludes of the generating steps (regenerate, continue, reply,
a group member's turn): the fork and head move a variant starts from, and the `Generation` it runs.
Each runs SQL: the runner calls it in a worker thread.

Rules: SillyTavern behaviour followed (format-digest §d): swiping right past the last reply
generates a new one; continue extends the last reply (its continue nudge, format-digest §c); a swipe
of a tool turn re-runs the whole turn (issue 19).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tavern_tui.engine.events import EventKind
from tavern_tui.engine.step import OPENING_SOURCE, Generation
from tavern_tui.errors import TavernError
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.timeline import TimelineService

CONTINUE_NUDGE = "[Continue your last message without repeating its original content.]"
"""SillyTavern's default `continue_nudge_prompt` (format-digest §c utility prompts)."""


class Forks:
    """The preludes of the generating steps (`StepRunner` runs them off the event loop).

    Args:
        ctx: the shared settings and store.
        timeline: the variant tree, its forks and head moves.
    """

    def __init__(self, ctx: ServiceContext, timeline: TimelineService) -> None:
        self.ctx = ctx
        self.timeline = timeline

    def spoken_by(self, generation: Generation, speaker: int | None) -> Generation:
        """`generation` replying as the character `speaker` (None: the playthrough's own). Runs SQL:
        call it in a worker. Raises NotFound (no such character)."""
        if speaker is None:
            return generation
        with self.ctx.store.unit_of_work(write=False) as uow:
            name = uow.characters.get(speaker).name
        return replace(generation, author_id=speaker, author_name=name)

    def for_regenerate(self, playthrough_id: int) -> Generation:
        """`regenerate`'s prelude (a worker thread: it reads the tree and may fork): when the
        chat ends with a reply, the head moves to a fork before it and a swipe is generated;
        else a regenerate of the missing reply. Raises TavernError as `regenerate`."""
        timeline, _members = self.timeline.variant_tree(playthrough_id)
        last = self.timeline.last_visible(timeline)
        if last is None:
            return Generation("regenerate")
        row = timeline.variants[last].row
        if row.source == OPENING_SOURCE:
            raise TavernError("the greeting swipes among the card's greetings; there is no reply to regenerate")
        if row.role != "assistant":
            return Generation("regenerate")
        last = _tool_turn_start(timeline, last)
        parent = timeline.variants[last].parent
        if parent is None:
            # The model spoke first (no greeting, nothing before it): its swipe is a fork at the
            # very start, as a greeting's is.
            with self.ctx.store.unit_of_work() as uow:
                root = uow.playthroughs.get(playthrough_id).root_session_id
            origin = self.ctx.store.events.ancestry(root)[0][0]
            self.timeline.set_head(playthrough_id, self.timeline.fork(playthrough_id, None, root_session=origin))
            return Generation("swipe")
        _view, shown = self.timeline.last_message(playthrough_id)  # a group member's reply: the same member again
        # The fork is made (with its carried edits) before the head moves onto it.
        self.timeline.set_head(playthrough_id, self.timeline.fork(playthrough_id, parent, timeline))
        return _authored(Generation("swipe"), shown)

    def check_reply(self, playthrough_id: int) -> None:
        """`reply`'s prelude (a worker thread: it reads the chat's last message). Raises
        TavernError when the chat does not end with the person's message."""
        _view, shown = self.timeline.last_message(playthrough_id)
        if shown is None or shown.role != "user":
            raise TavernError("nothing to answer: the chat does not end with your message")

    def for_continue(self, playthrough_id: int) -> Generation:
        """`continue_reply`'s prelude (a worker thread: it reads the tree and forks): the head
        moves to a fork before the last reply, and the continue generation carries its text.
        Raises TavernError as `continue_reply`."""
        timeline, _members = self.timeline.variant_tree(playthrough_id)
        last = self.timeline.last_visible(timeline)
        _view, shown = self.timeline.last_message(playthrough_id)
        if last is None or shown is None or shown.role != "assistant":
            raise TavernError("continue extends the last reply, and the chat does not end with one")
        parent = timeline.variants[last].parent
        if parent is None:
            with self.ctx.store.unit_of_work() as uow:
                root = uow.playthroughs.get(playthrough_id).root_session_id
            origin = self.ctx.store.events.ancestry(root)[0][0]
            session_id = self.timeline.fork(playthrough_id, None, root_session=origin)
        else:
            session_id = self.timeline.fork(playthrough_id, parent, timeline)
        self.timeline.set_head(playthrough_id, session_id)  # last: the fork is complete
        generation = Generation("continue", continue_text=shown.content, continues=shown.ref,
                                instruction=CONTINUE_NUDGE)
        return _authored(generation, shown)


def _tool_turn_start(timeline: Any, last: Any) -> Any:
    """The first reply of the tool turn `last` ends (issue 19: a swipe of a tool turn re-runs the
    whole turn, calls included, as a new variant): from the final reply, back over each run of
    `tool/result`s and the assistant message that made those calls. `last` itself for a plain reply."""
    ref = last
    while True:
        parent = timeline.variants[ref].parent
        if parent is None or timeline.variants[parent].row.kind != EventKind.TOOL_RESULT:
            return ref
        while parent is not None and timeline.variants[parent].row.kind == EventKind.TOOL_RESULT:
            parent = timeline.variants[parent].parent
        if parent is None or timeline.variants[parent].row.role != "assistant":
            return ref
        ref = parent


def _authored(generation: Generation, message: Any) -> Generation:
    """`generation` replying as the character who wrote `message` (a surface message; a group
    member's reply names it: `character_id`, `name` in its body); unchanged for the playthrough's
    own character's."""
    body = message.body if message is not None else None
    if isinstance(body, dict) and isinstance(body.get("character_id"), int):
        return replace(generation, author_id=body["character_id"], author_name=str(body.get("name") or ""))
    return generation
