"""Provides `HomePlaythroughs`, the home screen's playthrough actions: ctrl+n makes a new
playthrough (an opening draft of the highlighted character, or a new chat of the highlighted
group), ctrl+e renames the highlighted playthrough, ctrl+y chooses the name its new lines are
written under, ctrl+a archives it (after a yes) or brings it back, and ctrl+u lists archived
characters and playthroughs too. Every service call runs in a worker (`call`).

Mixed into `HomeScreen` (before `TavernScreen`), as the chat screen's parts are; its keys are
listed in the home screen's BINDINGS. The narrow interface to the home screen: `tavern`, `call`,
`highlighted_character`, `highlighted_group`, `show_archived`, `refresh_characters`,
`refresh_playthroughs`, `_start_playthrough`, `_choose` and `_playthroughs` (the listed
playthroughs by id).
"""

from __future__ import annotations

from textual.message_pump import MessagePump
from textual.widgets import OptionList

from tavern_tui.tui.screens.home_rows import DRAFT_PREFIX
from tavern_tui.views import PlaythroughView

HIGHLIGHT_FIRST = "Highlight a playthrough first (Tab to the playthroughs list)."
"""What a playthrough action says when no playthrough is under the cursor."""


class HomePlaythroughs(MessagePump):
    """Mixed into the home screen: new, rename, play as, archive, and listing archived ones."""

    @property
    def highlighted_playthrough(self) -> PlaythroughView | None:
        """The playthrough under the playthroughs list's cursor (not a draft), if any."""
        option = self.query_one("#playthroughs", OptionList).highlighted_option
        if option is None or not option.id or option.id.startswith(DRAFT_PREFIX):
            return None
        return self._playthroughs.get(int(option.id))

    def action_new_playthrough(self) -> None:
        """Make an opening draft of the highlighted character and open it."""
        character, group = self.highlighted_character, self.highlighted_group
        if group is not None:  # a new chat with the same cast
            self.call(self.tavern.groups.new_playthrough, group.id, title="Cannot start a playthrough",
                      then=lambda created: self._choose(created.id))
            return
        if character is None:
            self.notify("Import a character first (press ctrl+o).", severity="warning")
            return
        self._start_playthrough(character)

    def action_rename_playthrough(self) -> None:
        """ctrl+e: ask for the highlighted playthrough's title (empty: back to the default one)."""
        chat = self.highlighted_playthrough
        if chat is None:
            self.notify(HIGHLIGHT_FIRST, severity="warning")
            return
        from tavern_tui.tui.modals.text_prompt import TextPrompt

        def answered(title: str | None) -> None:
            if title is None or title.strip() == chat.chat_title:
                return
            self.call(self.tavern.playthroughs.rename, chat.id, title, title="Cannot rename the playthrough",
                      then=lambda view: self._renamed(view))

        self.app.push_screen(TextPrompt(f"Rename {chat.title}", "New title (empty: its first line, else its date):",
                                        chat.chat_title), answered)

    def _renamed(self, view: PlaythroughView) -> None:
        self.notify(f"#{view.id} is now {view.chat_title!r}.", title="Renamed")
        self.refresh_playthroughs()

    def action_play_as(self) -> None:
        """ctrl+y: choose the name the highlighted playthrough's new lines are written under (an
        imported chat: the persona's or the file's; old lines keep theirs)."""
        chat = self.highlighted_playthrough
        if chat is None:
            self.notify(HIGHLIGHT_FIRST, severity="warning")
            return
        from tavern_tui.tui.modals.choose import ChooseScreen

        def choose(names: tuple[str, str]) -> None:
            default, imported = names
            if not imported or imported == default:
                self.notify(f"#{chat.id} plays as {chat.user_name}; its lines were all written under that name. "
                            "The persona (F8) names you in new playthroughs.", title="Play as")
                return
            labels = [f"{default} · your persona's name (the default)", f"{imported} · the imported chat's name"]
            self.app.push_screen(ChooseScreen(f"New lines of {chat.title} are written as…", labels,
                                              hint="Lines already written keep their name · Enter chooses · Esc "
                                                   "cancels", selected=1 if chat.user_name == imported else 0),
                                 lambda index: picked(index, imported))

        def picked(index: int | None, imported: str) -> None:
            if index is not None:
                self.call(self.tavern.playthroughs.play_as, chat.id, imported if index == 1 else "",
                          title="Cannot change the name", then=self._named)

        self.call(self.tavern.playthroughs.name_choices, chat.id, title="Cannot read the names", then=choose)

    def _named(self, view: PlaythroughView) -> None:
        self.notify(f"#{view.id}: new lines are written as {view.user_name}.", title="Play as")
        self.refresh_playthroughs()

    def action_archive_playthrough(self) -> None:
        """ctrl+a: archive the highlighted playthrough after a yes (hidden, nothing deleted), or
        bring an archived one back."""
        chat = self.highlighted_playthrough
        if chat is None:
            self.notify(HIGHLIGHT_FIRST, severity="warning")
            return
        if chat.archived:
            self.call(self.tavern.playthroughs.archive, chat.id, False, title="Cannot unarchive the playthrough",
                      then=lambda view: self._archived(view))
            return
        from tavern_tui.tui.modals.confirm import ConfirmScreen

        def answered(yes: bool | None) -> None:
            if yes:
                self.call(self.tavern.playthroughs.archive, chat.id, True, title="Cannot archive the playthrough",
                          then=lambda view: self._archived(view))

        self.app.push_screen(ConfirmScreen(f"Archive {chat.title} ({chat.chat_title})?\n\nIt leaves the lists; "
                                           "nothing is deleted. ctrl+u shows archived ones, ctrl+a there brings "
                                           "it back.", confirm="Archive"), answered)

    def _archived(self, view: PlaythroughView) -> None:
        self.notify(f"#{view.id} {view.chat_title!r} " + ("archived (ctrl+u shows it)." if view.archived
                                                          else "is back in the lists."), title="Archive")
        self.refresh_playthroughs()

    def action_toggle_archived(self) -> None:
        """ctrl+u: list archived characters and playthroughs too, or hide them again."""
        self.show_archived = not self.show_archived
        self.refresh_characters(shown="Archived ones are listed (marked)." if self.show_archived
                                else "Archived ones are hidden.")
