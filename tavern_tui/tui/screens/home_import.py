"""Provides `HomeImport`, the home screen's card import: ctrl+o asks for a path, the files are
imported in a thread worker, then one line says what each became (failures and warnings in a
toast each), the lists are re-read with the cursor on a new character, and a chat whose
character is not in the library asks which one it belongs to and is imported again.

Mixed into `HomeScreen` (before `TavernScreen`); its handler is a named one
(`on_import_finished`: Textual finds named handlers on any class of the screen's MRO). The
narrow interface to the home screen: `tavern`, `refresh_characters` and `_all` (every
character, whatever the filter shows).
"""

from __future__ import annotations

from textual import work
from textual.message_pump import MessagePump

from tavern_tui.tui.messages import ImportFinished
from tavern_tui.views import ImportResult

# The import modal and its helpers load on first use: the home screen paints without them.


class HomeImport(MessagePump):
    """Mixed into the home screen: importing character cards (and chats, world books) from a path."""

    def action_import_cards(self) -> None:
        """Ask for a path, then import it in a thread worker."""
        from tavern_tui.tui.modals.import_screen import ImportScreen

        def chosen(path: str | None) -> None:
            if path:
                self.notify(f"Importing {path}…", title="Importing", timeout=2)
                self._import(path)

        self.app.push_screen(ImportScreen(), chosen)

    @work(thread=True, group="import", exit_on_error=False, description="import cards")
    def _import(self, path: str, character: str | None = None) -> None:
        # Runs off the UI thread: reads files and writes SQLite, then hands the results back.
        from tavern_tui.tui.modals.import_screen import import_results

        self.post_message(import_results(self.tavern, path, "character", character))

    def on_import_finished(self, message: ImportFinished) -> None:
        """Refresh the lists and say in one line what each file became ("Imported 4 world books,
        1 chat"); failures and warnings in one toast each, in full on ctrl+l. The cursor moves
        only to a character that is new; a chat whose character is missing asks for it."""
        from tavern_tui.tui.modals.import_screen import notify_failures, notify_warnings, summarise

        new_characters = [r for r in message.results if r.ok and not r.duplicate and r.kind == "character"]
        self.refresh_characters(select=new_characters[0].id if new_characters else None)
        if message.results:
            line, severity = summarise(message.results)
            self.notify(line, title="Import", severity=severity)  # type: ignore[arg-type]
        notify_failures(self, message.results)
        notify_warnings(self, message.results)
        for result in message.results:
            if result.needs_character:
                self._ask_character(result)
        if not message.results:
            self.notify("No .png, .json or .jsonl files found there.", title="Import", severity="warning")

    def _ask_character(self, result: ImportResult) -> None:
        """Offer the character list for a chat whose character is not in the library, then
        import it again with the one picked (the CLI's `--character`)."""
        from tavern_tui.tui.modals.import_screen import CharacterPicker

        characters = [(c.id, c.name) for c in self._all]
        if not characters:
            self.notify(result.error or result.path, title="Import failed", severity="error", timeout=10)
            return

        def picked(character_id: int | None) -> None:
            if character_id is not None:
                self._import(result.path, str(character_id))

        self.app.push_screen(CharacterPicker(result.path, result.error or "", characters), picked)
