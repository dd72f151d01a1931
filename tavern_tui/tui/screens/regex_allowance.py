"""Provides `ScriptAllowance`: SillyTavern's question about a card's embedded regex scripts, asked
before anything is sent, with the sends of the screen held until it is answered."""

from __future__ import annotations

from collections.abc import Callable

from tavern_tui.tui.modals.confirm import ConfirmScreen
from tavern_tui.tui.screens.base import TavernScreen


def allowance_question(character_name: str, names: list[str]) -> str:
    """The question's text: the character, its scripts (12 at most) and what allowing does."""
    listed = "\n".join(f"  • {name}" for name in names[:12]) + ("\n  …" if len(names) > 12 else "")
    return (f"{character_name} has {len(names)} embedded regex script(s):\n{listed}\n\n"
            "They rewrite what is sent and shown (status bars, hidden update blocks). Allow them "
            "for this character?")


class ScriptAllowance:
    """Asks once per character per run whether its card's regex scripts may run ("Allow" is kept in
    the database; until then they never run), and holds a screen's sends until the answer is in:
    the first request then already goes through the scripts allowed.

    Args:
        screen: the screen asking (its `call` runs the service calls off the event loop).
        allowed: called on the event loop once the person allowed the scripts (e.g. to re-show text),
            with a callback to call when that is done: held sends go after it, not into a rebuild.
    """

    def __init__(self, screen: TavernScreen, allowed: Callable[[Callable[[], None]], object] | None = None) -> None:
        self.screen = screen
        self.allowed = allowed
        self.settled = False
        """True once no answer is awaited (asked and answered, asked before, or nothing to ask)."""
        self._waiting: list[Callable[[], object]] = []

    def check(self, character_id: int, character_name: str) -> None:
        """Read whether the card has scripts not yet allowed (in a worker) and ask if so."""
        self.screen.call(self.screen.tavern.scripts.needs_allowance, character_id,
                         title="Cannot read the card's regex scripts",
                         then=lambda names: self._ask(character_id, character_name, names),
                         failed=lambda _: self._settle())

    def then(self, action: Callable[[], object]) -> None:
        """Run `action` now when the question is settled, else once it is answered."""
        if self.settled:
            action()
        else:
            self._waiting.append(action)

    def _ask(self, character_id: int, character_name: str, names: list[str]) -> None:
        app = self.screen.app
        asked: set[int] | None = getattr(app, "regex_asked", None)
        if asked is None:
            asked = set()
            app.regex_asked = asked  # type: ignore[attr-defined]
        if not names or character_id in asked:
            self._settle()
            return
        asked.add(character_id)

        def answered(allow: bool | None) -> None:
            if not allow:
                self._settle()
                return
            self.screen.call(self.screen.tavern.scripts.set_allowed, character_id,
                             title="Cannot allow the regex scripts", then=lambda _: self._allowed(),
                             failed=lambda _: self._settle())

        app.push_screen(ConfirmScreen(allowance_question(character_name, names), confirm="Allow"), answered)

    def _allowed(self) -> None:
        if self.allowed is not None:
            self.allowed(self._settle)
        else:
            self._settle()

    def _settle(self) -> None:
        if self.settled:
            return
        self.settled = True
        waiting, self._waiting = self._waiting, []
        for action in waiting:
            action()
