"""Provides sticky / cooldown / delay: the per-branch `TimedState` and its per-step evaluation.

Rule: SillyTavern 1.18 `WorldInfoTimedEffects` (public/scripts/world-info.js; format-digest
§b.6). Effects are counted in messages: `chat_length` is the number of scanned (non-hidden)
messages including the input being sent, SillyTavern's `chat.length` in `checkWorldInfo`.

- An effect is `{start, end, protected, hash}`, keyed by (book name, uid). Sticky and cooldown
  are set when an entry activates (`start = chat_length`, `end = start + N`) unless one is
  already running; re-triggering does not extend it.
- At the next step an effect is dropped if the chat did not advance (`chat_length <= start`,
  not protected: the reply was swiped or deleted), if its entry changed (hash differs: SillyTavern
  looks entries up by hash; the effect then waits out its end unapplied), if the entry no
  longer has that effect, or when it ends (`chat_length >= end`). A sticky that ends starts the
  entry's cooldown at once, protected.
- Delay N: the entry cannot activate while `chat_length < N` (not stored).

The state is immutable: `evaluate_timed` returns a working copy, `TimedWork.finish` the new
state to store after the step. A fork starts from its parent's state.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tavern_tui.lore.model import WorldInfoEntry

LORE_STATE_KIND = "lore/state"
"""Event kind holding a branch's world-info timed effects after a step (body: `TimedState` JSON)."""

EntryKey = tuple[str, "int | str"]
"""(book name, entry uid): SillyTavern's `${world}.${uid}`."""


@dataclass(frozen=True)
class TimedEffect:
    """One running sticky or cooldown window, in chat-length units (messages)."""

    start: int
    end: int
    protected: bool
    entry_hash: str


@dataclass(frozen=True)
class TimedState:
    """Sticky and cooldown windows per entry (SillyTavern `chat_metadata.timedWorldInfo`).

    Store one per session branch after each real step (`ActivationResult.new_timed_state`);
    a fork inherits its parent's. Round-trips through `to_json` / `from_json`.
    """

    sticky: Mapping[EntryKey, TimedEffect] = field(default_factory=dict)
    cooldown: Mapping[EntryKey, TimedEffect] = field(default_factory=dict)

    def to_json(self) -> dict[str, list[dict[str, Any]]]:
        """`{"sticky": [{book, uid, start, end, protected, hash}, …], "cooldown": […]}`."""
        def dump(effects: Mapping[EntryKey, TimedEffect]) -> list[dict[str, Any]]:
            return [{"book": book, "uid": uid, "start": e.start, "end": e.end, "protected": e.protected,
                     "hash": e.entry_hash} for (book, uid), e in effects.items()]
        return {"sticky": dump(self.sticky), "cooldown": dump(self.cooldown)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> TimedState:
        """Inverse of `to_json`; None or {} gives the empty state.

        Raises:
            ValueError: a malformed record (missing field or wrong type).
        """
        if not data:
            return cls()

        def load(items: Iterable[Any], kind: str) -> dict[EntryKey, TimedEffect]:
            out: dict[EntryKey, TimedEffect] = {}
            for item in items or ():
                try:
                    uid = item["uid"]
                    if not isinstance(uid, (int, str)) or isinstance(uid, bool):
                        raise TypeError("uid")
                    effect = TimedEffect(int(item["start"]), int(item["end"]), bool(item["protected"]),
                                         str(item["hash"]))
                    out[(str(item["book"]), uid)] = effect
                except (KeyError, TypeError, ValueError) as error:
                    raise ValueError(f"bad {kind} timed effect {item!r}: {error}") from None
            return out

        return cls(load(data.get("sticky", ()), "sticky"), load(data.get("cooldown", ()), "cooldown"))


def entry_hash(entry: WorldInfoEntry) -> str:
    """A fingerprint of every field of the entry, so an edit ends its effects (SillyTavern
    `getStringHash(JSON.stringify(entry))`)."""
    text = json.dumps(asdict(entry), sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class TimedWork:
    """The working copy of the timed state during one activation, plus what is active now."""

    chat_length: int
    sticky: dict[EntryKey, TimedEffect]
    cooldown: dict[EntryKey, TimedEffect]
    sticky_active: set[EntryKey] = field(default_factory=set)
    cooldown_active: set[EntryKey] = field(default_factory=set)
    delayed: set[EntryKey] = field(default_factory=set)
    hashes: dict[EntryKey, str] = field(default_factory=dict)

    def finish(self, activated: Iterable[tuple[EntryKey, WorldInfoEntry]]) -> TimedState:
        """Start sticky/cooldown for newly activated entries (`setTimedEffects`) and return the
        state to store. Entries with a running window of that type keep it unchanged."""
        for key, entry in activated:
            if not (entry.sticky or entry.cooldown):  # most entries: nothing to start
                continue
            for kind, store in (("sticky", self.sticky), ("cooldown", self.cooldown)):
                length = getattr(entry, kind)
                if length and key not in store:
                    store[key] = TimedEffect(self.chat_length, self.chat_length + int(length), False,
                                             self._hash(key, entry))
        return TimedState(dict(self.sticky), dict(self.cooldown))

    def _hash(self, key: EntryKey, entry: WorldInfoEntry) -> str:
        if key not in self.hashes:
            self.hashes[key] = entry_hash(entry)
        return self.hashes[key]


def evaluate_timed(state: TimedState, entries: Mapping[EntryKey, WorldInfoEntry], chat_length: int,
                   delaying: Mapping[EntryKey, WorldInfoEntry] | None = None) -> TimedWork:
    """Apply SillyTavern's `checkTimedEffects` to a copy of `state`.

    Args:
        state: the stored state from the previous step (not modified).
        entries: every entry of this activation by (book, uid).
        chat_length: messages in the chat including the input (SillyTavern `chat.length`).
        delaying: the entries of `entries` with a `delay`, if the caller knows them (saves a walk
            over every entry).

    Returns:
        The working copy with `sticky_active`, `cooldown_active` and `delayed` filled in.
    """
    work = TimedWork(chat_length, dict(state.sticky), dict(state.cooldown))
    for kind in ("sticky", "cooldown"):
        store = work.sticky if kind == "sticky" else work.cooldown
        active = work.sticky_active if kind == "sticky" else work.cooldown_active
        for key, effect in list(store.items()):
            entry = entries.get(key)
            if entry is not None and work._hash(key, entry) != effect.entry_hash:
                entry = None  # edited: SillyTavern finds entries by hash, so it is "not found"
            if chat_length <= effect.start and not effect.protected:
                del store[key]  # the chat did not advance (swipe / delete)
                continue
            if entry is None:
                if chat_length >= effect.end:
                    del store[key]
                continue
            if not getattr(entry, kind):
                del store[key]
                continue
            if chat_length >= effect.end:
                del store[key]
                if kind == "sticky" and entry.cooldown:
                    work.cooldown[key] = TimedEffect(chat_length, chat_length + int(entry.cooldown), True,
                                                     effect.entry_hash)
                    work.cooldown_active.add(key)
                continue
            active.add(key)
    for key, entry in (entries if delaying is None else delaying).items():
        if entry.delay and chat_length < entry.delay:
            work.delayed.add(key)
    return work
