"""Builders shared by the lore tests: entries, books, contexts, scripted rolls."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tavern_tui.lore.activation import activate
from tavern_tui.lore.context import ActivationContext, ScanMessage, SourcedBook
from tavern_tui.lore.model import WorldBook, WorldInfoEntry
from tavern_tui.lore.result import ActivationResult
from tavern_tui.lore.settings import WorldInfoSettings


def entry(uid: int | str, keys: Sequence[str] = (), content: str | None = None, **fields: Any) -> WorldInfoEntry:
    """An entry with SillyTavern defaults; content defaults to "content <uid>"."""
    return WorldInfoEntry(uid=uid, key=list(keys), content=f"content {uid}" if content is None else content,
                          **fields)


def book(*entries: WorldInfoEntry, name: str = "book", **fields: Any) -> WorldBook:
    return WorldBook(name=name, entries=list(entries), **fields)


def context(*history: str | tuple[str, str], input: str | None = None, **fields: Any) -> ActivationContext:
    """History oldest first: "text" (said by Alice) or (name, text); refs are 1-based positions."""
    messages = []
    for position, item in enumerate(history, start=1):
        name, text = ("Alice", item) if isinstance(item, str) else item
        messages.append(ScanMessage(name, text, position))
    fields.setdefault("user_name", "User")
    fields.setdefault("char_name", "Alice")
    return ActivationContext(messages=messages, input=input, **fields)


def scripted(*rolls: float) -> Callable[[], float]:
    """A random source that returns `rolls` in turn and fails the test if asked for more."""
    queue = list(rolls)

    def roll() -> float:
        assert queue, "the activation asked for more random rolls than the test scripted"
        return queue.pop(0)

    return roll


def no_rolls() -> float:
    raise AssertionError("no random roll expected")


def run(books: WorldBook | SourcedBook | Iterable[WorldBook | SourcedBook], ctx: ActivationContext | None = None,
        settings: WorldInfoSettings | None = None, **kwargs: Any) -> ActivationResult:
    if isinstance(books, (WorldBook, SourcedBook)):
        books = [books]
    kwargs.setdefault("rng", no_rolls)
    return activate(list(books), ctx or context(), settings or WorldInfoSettings(), **kwargs)


def fired(result: ActivationResult) -> set[int | str]:
    return {a.uid for a in result.activated}


def reason(result: ActivationResult, uid: int | str, book_name: str = "book") -> str:
    return result.decision(book_name, uid).reason.value
