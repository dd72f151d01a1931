"""Provides `ImportScreen`, the import picker (a `DirectoryTree` and a path field with Tab
completion, several files at once; issue 21 item 5), `split_paths`, which reads what the field
holds (quoted or backslash-escaped paths, as drag-and-drop pastes them), and the import's
one-toast report (`summarise`, `notify_warnings`; item 6).
"""

from __future__ import annotations

import glob
import os
import shlex
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import DirectoryTree, Input, OptionList, Static
from textual.widgets.option_list import Option

from tavern_tui.tui.labels import plural
from tavern_tui.tui.messages import ImportFinished
from tavern_tui.views import ImportResult

if TYPE_CHECKING:
    from tavern_tui.service import Tavern

KIND_NOUNS = {"character": "character", "world_book": "world book", "preset": "preset", "persona": "persona",
              "chat": "chat", "unknown": "file"}
"""How a result's kind is said ("4 world books, 1 chat")."""


def _one(token: str) -> str:
    if token.startswith("file://"):
        return unquote(urlparse(token).path)  # some terminals paste a dropped file as a URI
    return token


def split_paths(text: str) -> list[str]:
    """The paths in what the person typed or pasted: one path (spaces and all) when the whole text
    names an existing file or folder; else shell words, so `'My Cards/a.png' b\\ c.json` and a
    drag-and-drop's quoted or backslash-escaped paths read as the files they name; `file://` URIs
    become paths. A text shlex cannot split (an unclosed quote) is taken as one path."""
    text = text.strip()
    if not text:
        return []
    if Path(text).expanduser().exists():
        return [text]
    try:
        words = shlex.split(text, posix=True)
    except ValueError:
        return [text.strip("'\"")]
    return [_one(w) for w in words if w]


def complete_path(text: str) -> tuple[str, list[str]]:
    """Tab completion of the last path in `text`: (the new text, the matches).

    One match is filled in (a folder with its trailing "/"); several are filled to their common
    prefix; the last word is quoted when it holds a space.
    """
    words = split_paths(text) if text.strip() else [""]
    head_text = text[: len(text) - len(text.lstrip())]
    last = words[-1] if words else ""
    before = words[:-1]
    matches = sorted(glob.glob(glob.escape(os.path.expanduser(last)) + "*"))
    if not matches:
        return text, []
    if len(matches) == 1:
        chosen = matches[0] + ("/" if os.path.isdir(matches[0]) else "")
    else:
        chosen = os.path.commonprefix(matches)
    if last.startswith("~"):
        home = os.path.expanduser("~")
        chosen = "~" + chosen[len(home):] if chosen.startswith(home) else chosen
    joined = [shlex.quote(w) if (" " in w or "'" in w) else w for w in [*before, chosen]]
    return head_text + " ".join(joined), matches


class ImportScreen(ModalScreen[str | None]):
    """Asks for one or more paths; dismisses with what the field holds (read by `split_paths`),
    or None when cancelled (Esc).

    Enter in the tree adds the highlighted file to the field (a folder opens; ctrl+a adds the
    folder itself); Tab completes the field's last path; Enter in the field imports.

    | id | part |
    | --- | --- |
    | `import-box` | the framed box (`$primary` round border on `$surface`, at most 100 wide) |
    | `import-tree` | the folder tree, starting in the current folder |
    | `import-path` | the path field |
    | `import-hint` | the keys' hint (muted), or what Tab found |

    Args:
        title, placeholder: what to ask for (anything importable by default; the lore pane asks for books).
        root: where the tree starts (default the current folder).
    """

    DEFAULT_CSS = """
    ImportScreen {
        align: center middle;
        background: $background 60%;
        &:ansi { background: $background 60%; }  /* ModalScreen's would make it transparent */
    }

    ImportScreen #import-box {
        width: 100;
        max-width: 100%;
        height: auto;
        max-height: 100%;
        padding: 0 1;
        border: round $primary;
        border-title-color: $primary;
        background: $surface;
    }

    ImportScreen #import-tree { height: 14; max-height: 50vh; margin-bottom: 1; }

    ImportScreen #import-hint {
        color: $text-muted;
    }
    """

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="import.cancel"),
        Binding("tab", "complete", "Complete path", id="import.complete", priority=True, show=False),
        Binding("ctrl+a", "add_folder", "Add folder", id="import.add_folder", show=False),
    ]

    def __init__(self, title: str = "Import",
                 placeholder: str = "card, world book, preset, persona, chat, folder; several: space apart",
                 root: str | Path = ".") -> None:
        super().__init__()
        self._title = title
        self._placeholder = placeholder
        self._root = Path(root).expanduser().resolve()  # the tree's root line names the folder, not "."

    def compose(self) -> ComposeResult:
        with Vertical(id="import-box") as box:
            box.border_title = Content(self._title)  # a str is markup
            yield DirectoryTree(self._root, id="import-tree")
            yield Input(placeholder=self._placeholder, id="import-path")
            yield Static(HINT, id="import-hint", markup=False)

    def on_mount(self) -> None:
        # The root line names its folder (DirectoryTree shows the path as given: "." said nothing).
        self.query_one("#import-tree", DirectoryTree).root.set_label(self._root.name or str(self._root))
        self.query_one("#import-path", Input).focus()

    @property
    def field(self) -> Input:
        """The path field."""
        return self.query_one("#import-path", Input)

    def _add(self, path: Path) -> None:
        quoted = shlex.quote(str(path))
        current = self.field.value.rstrip()
        self.field.value = f"{current} {quoted}".strip() if current else quoted
        self.field.cursor_position = len(self.field.value)
        self.query_one("#import-hint", Static).update(f"{len(split_paths(self.field.value))} chosen · " + HINT)

    @on(DirectoryTree.FileSelected, "#import-tree")
    def _file_chosen(self, event: DirectoryTree.FileSelected) -> None:
        self._add(event.path)

    def action_add_folder(self) -> None:
        """Add the folder under the tree's cursor (its files and subfolders' are imported)."""
        node = self.query_one("#import-tree", DirectoryTree).cursor_node
        if node is not None and node.data is not None:
            path = Path(node.data.path)
            self._add(path if path.is_dir() else path.parent)

    def action_complete(self) -> None:
        """Tab: complete the field's last path (in the tree, Tab moves on as usual)."""
        if self.focused is not self.field:
            self.focus_next()
            return
        new, matches = complete_path(self.field.value)
        hint = self.query_one("#import-hint", Static)
        if not matches:
            hint.update("no file or folder starts so · " + HINT)
            return
        self.field.value = new
        self.field.cursor_position = len(new)
        hint.update(HINT if len(matches) == 1 else
                    f"{len(matches)} match: " + ", ".join(Path(m).name for m in matches[:6])
                    + (" …" if len(matches) > 6 else ""))

    @on(Input.Submitted, "#import-path")
    def _submitted(self, event: Input.Submitted) -> None:
        path = event.value.strip()
        self.dismiss(path or None)

    def action_cancel(self) -> None:
        """Close without importing."""
        self.dismiss(None)


HINT = "Enter imports · Tab completes · Enter in the tree adds a file, ctrl+a its folder · Esc cancels"


class CharacterPicker(ModalScreen[int | None]):
    """Asks which character an imported chat is with (the chat's own is not in the library);
    dismisses with the character's id, or None (Esc)."""

    DEFAULT_CSS = """
    CharacterPicker { align: center middle; background: $background 60%; }
    CharacterPicker #picker-box { width: 80; max-width: 100%; height: auto; max-height: 80%;
        border: round $primary; border-title-color: $primary; background: $surface; padding: 0 1; }
    CharacterPicker OptionList { height: auto; max-height: 20; }
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="picker.cancel")]

    def __init__(self, file: str, reason: str, characters: list[tuple[int, str]]) -> None:
        super().__init__()
        self._file, self._reason, self._characters = file, reason, characters

    def compose(self) -> ComposeResult:
        with Vertical(id="picker-box") as box:
            box.border_title = Content(f"Which character is {Path(self._file).name} with?")
            yield Static(self._reason, markup=False)
            yield OptionList(*(Option(name, id=str(cid)) for cid, name in self._characters), id="picker-list",
                             markup=False)

    @on(OptionList.OptionSelected, "#picker-list")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(int(event.option.id or 0))

    def action_cancel(self) -> None:
        """Do not import the chat."""
        self.dismiss(None)


def summarise(results: list[ImportResult]) -> tuple[str, str]:
    """(one line, severity) for a whole import: what each file became, by kind ("Imported 4 world
    books, 1 chat"), then what was there already and what failed. A file imported before is never
    counted as imported."""
    new = Counter(r.kind for r in results if r.ok and not r.duplicate)
    again = sum(1 for r in results if r.ok and r.duplicate)
    failed = sum(1 for r in results if not r.ok)
    parts = []
    if new:
        parts.append("Imported " + ", ".join(plural(n, KIND_NOUNS.get(kind, kind)) for kind, n in new.items()))
    if again:
        parts.append(f"{again} already imported")
    if failed:
        parts.append(f"{failed} failed")
    severity = "error" if failed and not new else ("warning" if failed else "information")
    return " · ".join(parts) or "Nothing imported", severity


def notify_warnings(screen: Screen, results: list[ImportResult]) -> None:
    """Sum up what an import stored with warnings in one short toast; every warning goes in full
    to the notifications screen (ctrl+l), one entry per file (issue 21 item 6: never a toast
    taller than the screen)."""
    # A file imported before stored nothing now: its warnings were reported the first time.
    warned = [r for r in results if r.ok and r.warnings and not r.duplicate]
    if not warned:
        return
    record = getattr(screen.app, "record_notice", None)
    for result in warned:
        if record is not None:
            record("warning", f"Imported {result.name or result.path} with warnings", "\n".join(result.warnings))
    count = sum(len(r.warnings) for r in warned)
    files = plural(len(warned), "file")
    first = Path(warned[0].path).name
    screen.notify(f"{plural(count, 'warning')} in {files} ({first}{' …' if len(warned) > 1 else ''}). "
                  "ctrl+l lists them.", title="Imported with warnings", severity="warning", timeout=8)


def notify_failures(screen: Screen, results: list[ImportResult]) -> None:
    """One toast for the files that failed (the first named), the full list on ctrl+l."""
    failed = [r for r in results if not r.ok and not r.needs_character]
    if not failed:
        return
    record = getattr(screen.app, "record_notice", None)
    if record is not None:
        for result in failed[1:]:  # the first is in the toast, which the app keeps too
            record("error", "Import failed", result.error or result.path)
    first = failed[0].error or failed[0].path
    first = first if len(first) <= 160 else first[:159] + "…"
    more = f" (+{len(failed) - 1} more, ctrl+l lists them)" if len(failed) > 1 else ""
    screen.notify(first + more, title="Import failed", severity="error", timeout=10)


def import_results(tavern: Tavern, path: str, kind: str, character: str | None = None) -> ImportFinished:
    """Import what `path` names (one or more paths, `split_paths`) through the service (call it
    from a thread worker) and wrap the results.

    A failure of the store itself still reaches the person as a result naming the file.
    """
    paths = split_paths(path) or [path]
    try:
        results = tavern.imports.import_paths(paths, character=character)
    except Exception as exc:  # noqa: BLE001 - shown to the person, never swallowed silently
        results = [ImportResult(path, kind, error=f"{path}: {exc}")]
    return ImportFinished(results)
