"""Provides `PersonaScreen`: the persona's entries (sent on every call) and the nominations
learned from what the person said, to affirm or decline; with its editor, confirm and history modals.

Rules: seed 002 (ADR-0079) decisions 4-8 and 12, DESIGN.md "Persona and nominations": only the
owner's acts write persona text (add, edit, remove, affirm), every write carries the version
this pane read (`expected_version`), and credential-shaped text is refused before it is stored.
The pane calls only the `Tavern` persona operations (`service_persona.PersonaOps`), each in a
thread worker that posts its result back as a Message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import DataTable, Static

from tavern_tui.errors import Conflict, TavernError
from tavern_tui.persona.model import DEFAULT_CEILING, Belief, PersonaDocument, PersonaEntry, RenderedPersona
from tavern_tui.tui.labels import clip, plural
from tavern_tui.tui.modals.confirm import ConfirmScreen
from tavern_tui.tui.screens.base import TavernScreen
from tavern_tui.tui.screens.persona.editor import PersonaEditor
from tavern_tui.tui.screens.persona.history import PersonaHistoryScreen
from tavern_tui.tui.screens.persona.labels import (
    TEXT_WIDTH,
    _marks_cell,
    conflict_note,
    entry_marks,
    provenance_label,
    sent_summary,
    support_content,
    text_width,
)
from tavern_tui.tui.screens.persona.snapshot import PersonaSnapshot, read_snapshot
from tavern_tui.tui.widgets.fit_footer import FitFooter, ProviderSource, ScreenKeys
from tavern_tui.tui.widgets.screen_title import ScreenTitle
from tavern_tui.tui.widgets.table_rows import fill_rows, room_for

if TYPE_CHECKING:
    from tavern_tui.service import Tavern


class PersonaScreen(TavernScreen[None]):
    """The persona (F8 in the chat, p on the home screen): what is sent as {{user}} on every call.

    Top, the persona's version and name and a line saying that its entries go to the model on
    every call. Then the entries (id, text, provenance `owner` or `affirmed #belief`,
    sensitivity, marks: `stale` when the belief an entry came from was superseded, `left out`
    when it is above the playthrough's sensitivity ceiling (the default ceiling without one),
    `blocked` where an injection hit is sent as [BLOCKED]). Below, the outstanding nominations
    (statement, confidence, supporting messages, sensitivity), learned from what the person
    said and never sent unless affirmed, and the highlighted one's supporting messages
    (`session:seq` and text).

    Keys: `a` adds an entry, `e` edits the highlighted one, Delete/`x` removes it (after a
    confirm), `r` renames the persona, `h` shows the history; `s` shows the next persona
    (issue 20 item 6: several personas), `u` plays as the one shown (from a chat: locks the chat
    to it, SillyTavern's chat-locked persona; from home: makes it the default), `c` makes a new
    persona; `y` affirms the highlighted
    nomination (its statement becomes an `affirmed` entry), `n` declines it (never nominated
    again); Tab/Shift+Tab move between the lists; Esc goes back.

    Every write carries the version this pane read: a stale one is refused (nothing written),
    said, and the pane reloads. Rules: seed 002 (ADR-0079) decisions 4-8 and 12.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="persona.back"),
        Binding("a", "add", "Add", id="persona.add"),
        Binding("e", "edit", "Edit", id="persona.edit"),
        Binding("delete,x", "remove", "Remove", id="persona.remove", key_display="x"),
        Binding("r", "rename", "Name", id="persona.rename", show=False),
        Binding("h", "history", "History", id="persona.history"),
        Binding("s", "switch", "Switch", id="persona.switch"),
        Binding("u", "use", "Use", id="persona.use"),
        Binding("c", "create", "New persona", id="persona.create", show=False),
        Binding("y", "affirm", "Affirm", id="persona.affirm"),
        Binding("n", "decline", "Decline", id="persona.decline"),
        Binding("tab", "app.focus_next", "Next list", id="persona.next_pane"),
        Binding("shift+tab", "app.focus_previous", "Previous list", show=False),
    ]

    COMMANDS: ClassVar[set[ProviderSource]] = {ScreenKeys}

    FOOTER_DROP = ("quit", "app.focus_next", "history", "use")
    """The keys the footer hides first on a narrow terminal (80 columns keeps Back, Add, Edit,
    Remove, History, Affirm and Decline); they still work and the command palette lists them."""

    @dataclass
    class Loaded(Message):
        """A read worker finished: the snapshot (None and the error's text when reading failed).
        `token` orders the reads; an older one than the last requested is ignored."""

        token: int
        snapshot: PersonaSnapshot | None
        error: str = ""

    @dataclass
    class Written(Message):
        """A write worker finished: what to say on success, or the service's refusal."""

        title: str
        note: str
        error: BaseException | None = None

    entries = getters.query_one("#persona-entries", DataTable)
    nomination_table = getters.query_one("#nominations", DataTable)

    def __init__(self, tavern: Tavern, playthrough_id: int | None = None) -> None:
        super().__init__(tavern, playthrough_id)
        self.snapshot: PersonaSnapshot | None = None
        """What the pane shows (None until the first read lands)."""
        self.busy = False
        """A write runs, or its reload has not landed yet: other writes wait."""
        self.loads = 0
        """Reads shown so far (tests wait on it)."""
        self.persona_id: int | None = None
        """The persona shown (None until the first read: the one the chat plays as)."""
        self._token = 0

    def compose(self) -> ComposeResult:
        yield ScreenTitle("Persona", id="persona-title", markup=False)
        yield Static("", id="persona-note", markup=False)
        with Vertical(id="persona-body"):
            table = DataTable(id="persona-entries", cursor_type="row", zebra_stripes=True, classes="pane")
            table.border_title = "Entries · sent on every call"
            yield table
            nominations = DataTable(id="nominations", cursor_type="row", zebra_stripes=True)
            nominations.border_title = "Nominations · learned from what you said, never sent until affirmed"
            yield nominations
            with VerticalScroll(id="nomination-support", can_focus=False) as support:
                support.border_title = "Supporting messages"
                yield Static("", id="support-body", markup=False)
        yield FitFooter(drop=self.FOOTER_DROP)

    def on_mount(self) -> None:
        self.entries.add_column("#", key="id")
        self.entries.add_column("Entry", key="text")
        self.entries.add_column("From", key="provenance")
        self.entries.add_column("Sensitivity", key="sensitivity")
        self.entries.add_column("Marks", key="marks")
        self.nomination_table.add_column("#", key="id")
        self.nomination_table.add_column("Statement", key="statement")
        self.nomination_table.add_column("Confidence", key="confidence")
        self.nomination_table.add_column("Messages", key="messages")
        self.nomination_table.add_column("Sensitivity", key="sensitivity")
        self.query_one("#persona-note", Static).update(self.note)
        self.entries.focus()
        self.reload()

    @property
    def note(self) -> str:
        """The line under the title: entries are sent on every call; nominations never are."""
        where = f"playthrough #{self.playthrough_id}'s" if self.playthrough_id is not None \
            else f"a new playthrough's ({DEFAULT_CEILING})"
        return (f"Entries are sent to the model on every call as {{{{user}}}}'s persona; “left out” ones are above "
                f"{where} sensitivity ceiling. Nominations are never sent: y affirms one into an entry, n declines it.")

    # -- reading ------------------------------------------------------------------------------

    def reload(self) -> None:
        """Re-read the persona and the nominations in a thread worker."""
        self._token += 1
        self._read(self._token)

    @work(thread=True, exclusive=True, group="persona-read", exit_on_error=False, description="read the persona")
    def _read(self, token: int) -> None:
        try:
            self.post_message(self.Loaded(token, read_snapshot(self.tavern, self.playthrough_id, self.persona_id)))
        except TavernError as exc:
            self.post_message(self.Loaded(token, None, str(exc)))

    def on_persona_screen_loaded(self, message: PersonaScreen.Loaded) -> None:
        """Show the newest read (an older one that lands late is dropped)."""
        if message.token != self._token:
            return
        self.busy = False
        if message.snapshot is None:
            self.notify(message.error, title="Cannot read the persona", severity="error")
            self.refresh_bindings()
            return
        entry, nomination = self.selected_entry, self.selected_nomination  # kept under the cursors
        if self.snapshot is not None and message.snapshot.shown is not None and self.snapshot.shown is not None \
                and message.snapshot.shown.id != self.snapshot.shown.id:
            entry = nomination = None  # another persona: its own cursors
        self.snapshot = snapshot = message.snapshot
        if snapshot.shown is not None:
            self.persona_id = snapshot.shown.id
        doc = snapshot.document
        name = doc.name or "no name ({{user}} is the playthrough's user name)"
        name += self._persona_marks(snapshot)
        if snapshot.rendered is not None:
            sent = snapshot.rendered
            summary = sent_summary(len(sent.entry_ids), len(doc.entries)) + (f" (~{sent.tokens} tokens)"
                                                                             if doc.entries else "")
        else:
            summary = f"{plural(len(doc.entries), 'entry', 'entries')} · over a cap: sessions will not open"
        self.query_one("#persona-title", Static).update(f"Persona v{doc.version} · {name} · {summary}")
        self.query_one("#persona-note", Static).update(
            Content.assemble((snapshot.render_error, "bold $error"), "\n", self.note) if snapshot.render_error
            else Content(self.note))
        self._fill_entries(doc, snapshot.rendered, entry.id if entry else None)
        self._fill_nominations(snapshot.nominations, nomination.id if nomination else None)
        self.loads += 1
        self.refresh_bindings()

    @staticmethod
    def _persona_marks(snapshot: PersonaSnapshot) -> str:
        """" (2 of 3 · default · this chat's, locked)": where the shown persona stands (its place
        among several; "this chat plays as Ann" when the chat plays another)."""
        shown = snapshot.shown
        if shown is None:
            return ""
        ids = [p.id for p in snapshot.personas]
        marks = [f"{ids.index(shown.id) + 1} of {len(ids)}"] if shown.id in ids and len(ids) > 1 else []
        if shown.default:
            marks.append("default")
        if snapshot.playing is not None and snapshot.playing.id == shown.id and snapshot.locked:
            marks.append("this chat's, locked")
        elif snapshot.playing is not None and snapshot.playing.id != shown.id:
            marks.append(f"this chat plays as {snapshot.playing.name or 'the unnamed persona'}")
        return f" ({' · '.join(marks)})" if marks else ""

    def _fill_entries(self, doc: PersonaDocument, rendered: RenderedPersona | None, keep: int | None) -> None:
        table = self.entries
        # A str cell is markup: the person's text goes in as Text.
        rows = [[str(entry.id), "", Text(provenance_label(entry)), entry.sensitivity,
                 _marks_cell(entry_marks(entry, rendered))] for entry in doc.entries]
        # What the other columns leave (a trial at 80 columns: the text cut at 28 beside an empty
        # Marks column), within the wide screen's measure.
        width = min(TEXT_WIDTH, room_for(table, 1, rows, text_width(self.app.size.width)))
        for row, entry in zip(rows, doc.entries, strict=True):
            row[1] = Text(clip(entry.text, width))
        fill_rows(table, ((str(entry.id), row) for entry, row in zip(doc.entries, rows, strict=True)))
        table.border_subtitle = "empty: nothing is sent · a adds an entry" if not doc.entries else \
            plural(len(doc.entries), "entry", "entries")
        ids = [e.id for e in doc.entries]
        if keep in ids:
            table.move_cursor(row=ids.index(keep), animate=False)

    def _fill_nominations(self, nominations: Sequence[Belief], keep: int | None) -> None:
        table = self.nomination_table
        width = text_width(self.app.size.width)
        fill_rows(table, ((str(belief.id), [str(belief.id), Text(clip(belief.statement, width)),
                                            f"{belief.confidence:.2f}", str(belief.corroborations),
                                            belief.sensitivity])
                          for belief in nominations))
        table.border_subtitle = plural(len(nominations), "outstanding nomination") if nominations else "none"
        ids = [b.id for b in nominations]
        if keep in ids:
            table.move_cursor(row=ids.index(keep), animate=False)
        self._show_support()

    @property
    def selected_entry(self) -> PersonaEntry | None:
        """The entry under the entry list's cursor."""
        if self.snapshot is None or not self.snapshot.document.entries:
            return None
        entries = self.snapshot.document.entries
        row = self.entries.cursor_row
        return entries[row] if 0 <= row < len(entries) and self.entries.row_count == len(entries) else None

    @property
    def selected_nomination(self) -> Belief | None:
        """The nomination under the nomination list's cursor."""
        if self.snapshot is None or not self.snapshot.nominations:
            return None
        nominations = self.snapshot.nominations
        row = self.nomination_table.cursor_row
        ok = 0 <= row < len(nominations) and self.nomination_table.row_count == len(nominations)
        return nominations[row] if ok else None

    @on(DataTable.RowHighlighted, "#nominations")
    def _nomination_highlighted(self) -> None:
        self._show_support()

    @on(DataTable.RowHighlighted, "#persona-entries")
    def _entry_highlighted(self) -> None:
        self.refresh_bindings()

    def _show_support(self) -> None:
        body = self.query_one("#support-body", Static)
        belief = self.selected_nomination
        if belief is None or self.snapshot is None:
            body.update(Content.styled(
                "No outstanding nominations. They are learned from what you say in chats: a statement about "
                "yourself, said in two separate messages, is offered here.", "dim"))
            return
        body.update(support_content(belief, self.snapshot.supports.get(belief.id, ())))

    @property
    def support_text(self) -> str:
        """The supporting-messages panel as shown (plain)."""
        content = self.query_one("#support-body", Static).content
        return content.plain if isinstance(content, Content) else str(content)

    # -- writing ------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "switch":
            return True if self.snapshot is not None and len(self.snapshot.personas) > 1 else None
        if action in ("add", "rename", "edit", "remove", "affirm", "decline", "use", "create"):
            if self.snapshot is None or self.busy:
                return None
            if action in ("edit", "remove"):
                return True if self.selected_entry is not None else None
            if action in ("affirm", "decline"):
                return True if self.selected_nomination is not None else None
        return True

    @property
    def version(self) -> int:
        """The persona version this pane read (what its writes expect)."""
        return self.snapshot.document.version if self.snapshot is not None else 0

    def _conflict(self, exc: Conflict) -> None:
        self.notify(conflict_note(exc), title="The persona changed", severity="warning", timeout=8)

    def _editor_closed(self, done: Callable[[PersonaDocument], str]) -> Callable[[PersonaDocument | Conflict | None],
                                                                                  None]:
        def closed(result: PersonaDocument | Conflict | None) -> None:
            if result is None:
                return
            if isinstance(result, Conflict):
                self._conflict(result)
            else:
                self.notify(done(result), title="Persona")
            self.busy = True
            self.reload()
        return closed

    def action_add(self) -> None:
        """Open the editor on a new entry; Save adds it (at the version read)."""
        version, persona = self.version, self.persona_id

        def save(text: str, sensitivity: str, _stale: bool) -> PersonaDocument:
            return self.tavern.persona.edit_persona(version, add=text, sensitivity=sensitivity, where="new entry",
                                                    persona=persona)

        self.app.push_screen(
            PersonaEditor("New persona entry", save, hint="Sent to the model on every call, as you write it. "
                          "Secrets (keys, passwords, tokens) are refused."),
            self._editor_closed(lambda doc: f"Added entry {doc.entries[-1].id}: persona is now v{doc.version}."))

    def action_edit(self) -> None:
        """Open the editor on the highlighted entry; Save writes the whole list, ids kept."""
        entry, snapshot = self.selected_entry, self.snapshot
        if entry is None or snapshot is None:
            return
        doc = snapshot.document

        def save(text: str, sensitivity: str, stale: bool) -> PersonaDocument:
            if (text, sensitivity, stale) == (entry.text, entry.sensitivity, entry.stale):
                raise TavernError("nothing changed")
            items = [{"id": e.id, "text": e.text, "sensitivity": e.sensitivity, "stale": e.stale} for e in doc.entries]
            for item in items:
                if item["id"] == entry.id:
                    item.update(text=text, sensitivity=sensitivity, stale=stale)
            return self.tavern.persona.edit_persona(doc.version, entries=items, where="persona edit",
                                                    persona=self.persona_id)

        hint = ("Changing the text makes it yours: the link to its belief is cleared." if entry.provenance == "affirmed"
                else "Sent to the model on every call, as you write it. Secrets are refused.")
        self.app.push_screen(
            PersonaEditor(f"Entry {entry.id} · {provenance_label(entry)}", save, text=entry.text,
                          sensitivity=entry.sensitivity, stale=entry.stale if entry.stale else None, hint=hint),
            self._editor_closed(lambda written: f"Saved entry {entry.id}: persona is now v{written.version}."))

    def action_rename(self) -> None:
        """Open the editor on the persona's name ({{user}})."""
        version, persona = self.version, self.persona_id
        name = self.snapshot.document.name if self.snapshot is not None else ""

        def save(text: str, _sensitivity: str, _stale: bool) -> PersonaDocument:
            return self.tavern.persona.edit_persona(version, name=text, where="persona name", persona=persona)

        self.app.push_screen(
            PersonaEditor("Persona name ({{user}})", save, text=name, sensitivity=None, multiline=False,
                          hint="The name chats playing as this persona use for you from their next step; "
                               "lines already written keep the name they were written under."),
            self._editor_closed(lambda doc: f"Renamed to {doc.name}: persona is now v{doc.version}."))

    def action_remove(self) -> None:
        """Ask, then remove the highlighted entry (an affirmed entry's belief loses its mark)."""
        entry = self.selected_entry
        if entry is None:
            return
        version = self.version
        after = f" Belief #{entry.belief_id} stays learned, no longer marked as in the persona." \
            if entry.provenance == "affirmed" and entry.belief_id is not None else ""
        question = f"Remove entry {entry.id}?\n\n“{clip(entry.text, 200)}”\n\nIt is no longer sent.{after}"

        def remove() -> str:
            doc = self.tavern.persona.edit_persona(version, remove=entry.id, where="remove", persona=self.persona_id)
            return f"Removed entry {entry.id}: persona is now v{doc.version}."

        def answered(yes: bool | None) -> None:
            if yes:
                self._write("Persona", remove)

        self.app.push_screen(ConfirmScreen(question), answered)

    def action_affirm(self) -> None:
        """Affirm the highlighted nomination: its statement becomes an `affirmed` entry."""
        belief = self.selected_nomination
        if belief is None:
            return
        version = self.version

        def affirm() -> str:
            doc = self.tavern.persona.affirm(belief.id, expected_version=version)
            note = self.tavern.persona.affirm_name_note(belief, doc)  # a name belief leaves the name as it was
            return f"Affirmed: {belief.statement} (persona v{doc.version})" + ("\n" + note if note else "")

        self._write("Nomination", affirm)

    def action_decline(self) -> None:
        """Decline the highlighted nomination: its key is never nominated again."""
        belief = self.selected_nomination
        if belief is None:
            return

        def decline() -> str:
            self.tavern.persona.decline(belief.id)
            return f"Declined: {belief.statement} (never nominated again)"

        self._write("Nomination", decline)

    def _write(self, title: str, act: Callable[[], str]) -> None:
        self.busy = True
        self.refresh_bindings()
        self._run_write(title, act)

    @work(thread=True, exclusive=True, group="persona-write", exit_on_error=False, description="write the persona")
    def _run_write(self, title: str, act: Callable[[], str]) -> None:
        try:
            self.post_message(self.Written(title, act()))
        except Exception as exc:  # said on screen; the pane reloads either way
            self.post_message(self.Written(title, "", exc))

    def on_persona_screen_written(self, message: PersonaScreen.Written) -> None:
        """Say what happened (a conflict plainly) and reload both lists."""
        error = message.error
        if error is None:
            self.notify(message.note, title=message.title)
        elif isinstance(error, Conflict):
            self._conflict(error)
        else:
            shown = str(error) if isinstance(error, TavernError) else f"{type(error).__name__}: {error}"
            self.notify(shown, title="Not written", severity="error", timeout=8)
        self.reload()

    def action_history(self) -> None:
        """Show every revision of the persona shown (read-only)."""
        self.app.push_screen(PersonaHistoryScreen(self.tavern, self.persona_id))

    def action_switch(self) -> None:
        """Show the next persona (only shows it; `u` plays as it)."""
        if self.snapshot is None or len(self.snapshot.personas) < 2:
            return
        ids = [p.id for p in self.snapshot.personas]
        at = ids.index(self.persona_id) if self.persona_id in ids else -1
        self.persona_id = ids[(at + 1) % len(ids)]
        self.reload()

    def action_use(self) -> None:
        """Play as the persona shown: lock this chat to it (from a chat), or make it the default."""
        persona, playthrough = self.persona_id, self.playthrough_id
        if persona is None:
            return

        def use() -> str:
            view = self.tavern.persona.use_persona(persona, playthrough)
            name = view.name or "(no name)"
            if playthrough is not None:
                return f"This chat is locked to {name}: your next lines are written as {name}."
            return f"{name} is the default persona: new chats and chats without a lock play as it."

        self._write("Persona", use)

    def action_create(self) -> None:
        """Ask for a name, make a persona with it and show it."""
        def save(text: str, _sensitivity: str, _stale: bool) -> PersonaDocument:
            view = self.tavern.persona.new_persona(text, where="new persona")
            self.persona_id = view.id
            return self.tavern.persona.persona(view.id)

        self.app.push_screen(
            PersonaEditor("New persona: its name ({{user}})", save, sensitivity=None, multiline=False,
                          hint="A persona of its own: entries, history and nominations. u plays as it."),
            self._editor_closed(lambda doc: f"Made persona {doc.name}."))

    def action_back(self) -> None:
        """Return to where the pane was opened."""
        self.dismiss(None)
