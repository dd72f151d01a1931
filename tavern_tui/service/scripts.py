"""Regex scripts of a playthrough: global ones imported from SillyTavern regex files, a card's own
(run only once the person allowed them for that character, as SillyTavern asks), and the
transcript's display text they produce (`tavern.scripts`; issue 18 items 3 and 5)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from tavern_tui.errors import NotFound
from tavern_tui.scripts.panels import display_text
from tavern_tui.scripts.regex_scripts import (
    Placement,
    RegexScript,
    ScriptFormatError,
    ScriptSet,
    card_scripts,
    load_regex_file,
    parse_script,
    script_set,
)
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.views import ImportResult, MessageView


class ScriptService:
    """Global regex scripts, card-script allowances and display text.

    Args:
        ctx: the service context (store); library: card lookup.
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService) -> None:
        self.ctx = ctx
        self.library = library

    # --- global scripts ------------------------------------------------------------------------

    def import_regex_bytes(self, data: bytes, shown: str) -> ImportResult:
        """Store the scripts of a SillyTavern regex export as global scripts (all or none).

        Returns:
            kind "regex_scripts", `name` the script names joined; `error` when the file is malformed
            (names file, field and reason; nothing stored).
        """
        try:
            scripts = load_regex_file(data, shown)
        except ScriptFormatError as error:
            return ImportResult(shown, "regex_scripts", error=str(error))
        with self.ctx.store.unit_of_work() as uow:
            known = {stored for _id, _name, stored, _src in uow.regex.scripts()}
            ids = []
            for script in scripts:
                text = json.dumps(script.to_json(), ensure_ascii=False, sort_keys=True)
                if text not in known:
                    ids.append(uow.regex.add(script.name, text, shown))
        names = ", ".join(s.name or s.id for s in scripts)
        return ImportResult(shown, "regex_scripts", ids[0] if ids else None, names, duplicate=not ids)

    def global_scripts(self) -> list[tuple[int, RegexScript]]:
        """The global scripts with their ids, in run order (`ServiceContext.per_version`: every
        build reads them)."""
        return list(self.ctx.per_version(("global-scripts",), self._read_global_scripts))

    def _read_global_scripts(self) -> tuple[tuple[int, RegexScript], ...]:
        with self.ctx.store.unit_of_work(write=False) as uow:
            rows = uow.regex.scripts()
        return tuple((row_id, parse_script(json.loads(data), f"regex script {row_id}", "global"))
                     for row_id, _name, data, _source in rows)

    def remove_global(self, script_id: int) -> None:
        """Delete a global script. Raises NotFound."""
        with self.ctx.store.unit_of_work() as uow:
            uow.regex.remove(script_id)

    # --- card scripts --------------------------------------------------------------------------

    def _record(self, character_id: int) -> Any:
        with self.ctx.store.unit_of_work(write=False) as uow:
            record = uow.characters.get(character_id)
        if record is None:
            raise NotFound(f"no character {character_id}")
        return record

    def card_scripts(self, character_id: int, record: Any = None) -> list[RegexScript]:
        """The character card's own regex scripts (unreadable ones left out). `record`: the
        character's record when the caller has just read it (a step's assembly)."""
        card = self.library.card(record if record is not None else self._record(character_id))
        return card_scripts(card.data, card.name)[0]

    def allowed(self, character_id: int, record: Any = None) -> bool:
        """Whether the person allowed this character's card scripts (`record` as for `card_scripts`)."""
        record = record if record is not None else self._record(character_id)
        with self.ctx.store.unit_of_work(write=False) as uow:
            return uow.regex.allowed(record.original_sha256)

    def set_allowed(self, character_id: int, allowed: bool = True) -> None:
        """Allow (or withdraw) a character's card scripts; kept across restarts."""
        record = self._record(character_id)
        with self.ctx.store.unit_of_work() as uow:
            uow.regex.set_allowed(record.original_sha256, allowed)

    def needs_allowance(self, character_id: int) -> list[str]:
        """Names of the card's scripts when it has some and they are not allowed yet (the TUI asks
        once, as SillyTavern does); [] otherwise."""
        scripts = self.card_scripts(character_id)
        if not scripts or self.allowed(character_id):
            return []
        return [s.name or s.id for s in scripts]

    def script_set(self, character_id: int, record: Any = None) -> ScriptSet:
        """What a playthrough with this character runs: global scripts, then the card's if allowed
        (`record` as for `card_scripts`)."""
        card = self.card_scripts(character_id, record)
        return script_set([s for _id, s in self.global_scripts()], card,
                          self.allowed(character_id, record) if card else False)

    # --- display -------------------------------------------------------------------------------

    def shown_text(self, character_id: int, text: str, role: str = "assistant", depth: int = 0) -> str:
        """What the transcript would show for one message `text` of `role` at display `depth` (0: the
        newest, as an opening draft's greeting): as `display_views`, the raw text when no script changes it."""
        scripts = self.script_set(character_id)
        if not scripts:
            return text
        placement = Placement.USER_INPUT if role == "user" else Placement.AI_OUTPUT
        shown = scripts.for_display(text, placement, depth)
        return display_text(shown.text) if shown.applied else text

    def display_views(self, character_id: int, views: list[MessageView]) -> list[MessageView]:
        """`views` (the newest messages of a transcript, oldest first) with `display` set where the
        scripts change what is shown: `markdownOnly` scripts and those with neither flag, at
        SillyTavern's display depth (the user/assistant messages after it: `usableMessages.length
        - indexOf - 1`), then HTML turned into readable text and each page that needs its own
        script folded into a panel (`scripts.panels.display_text`). A `display` already set (MVU's
        derived text) is what the scripts read."""
        scripts = self.script_set(character_id)
        if not scripts:
            return views
        chat = [i for i, v in enumerate(views) if v.role in ("user", "assistant")]
        out = list(views)
        for position, index in enumerate(chat):
            view = views[index]
            depth = len(chat) - position - 1
            placement = Placement.USER_INPUT if view.role == "user" else Placement.AI_OUTPUT
            source = view.display if view.display is not None else view.content  # MVU's derived text first
            shown = scripts.for_display(source, placement, depth)
            text = display_text(shown.text) if shown.applied else shown.text
            if text != view.content:
                out[index] = replace(view, display=text)
        return out
