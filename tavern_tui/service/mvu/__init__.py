"""Provides `MvuService` (`tavern.mvu`): MVU state records of a playthrough, initialised and committed.

Rules: issue 18 item 1, `tavern_tui.mvu` (the pure rules) and `mvu.records` (how records live in the log).
A card with no MVU material ([InitVar] entries, greeting `<initvar>`) never gets a record. The first record is
committed before the first generation (`ensure_initialised`, from the step's prelude), attached to the greeting
shown; each settled assistant reply then commits one record computed from the record before it, as one
`state/commit` (origin "reply") naming its base: the append is a compare-and-set on the session's state commits
(`append_if_unchanged`), and a stale read is recomputed, never merged. Previews read `head` (computed, never
committed). A swipe is a fork before the reply, so it computes from the message before it; switching swipes
moves the head, and the record follows.

One module per responsibility, composed (no mixins): `views` (`MvuView`, `MvuBound`, `stat_hash`, the
limits), `material` (`MvuMaterial`: the card's books, greetings and macros, the initial record planned),
`reading` (`MvuReading`: the head record, the snapshot and texts a request is built from), `committing`
(`MvuCommits`: the initial record, a reply's and a tool's updates) and `files` (`tavern mvu …`'s file tools,
no store). `service` (`MvuService`) holds one of each and delegates.
"""

from tavern_tui.service.mvu.files import apply_text, card_books, init_from_card, parse_text
from tavern_tui.service.mvu.service import MvuService
from tavern_tui.service.mvu.views import MIN_REPLY, MvuBound, MvuView, stat_hash

__all__ = ["MIN_REPLY", "MvuBound", "MvuService", "MvuView", "apply_text", "card_books", "init_from_card",
           "parse_text", "stat_hash"]
