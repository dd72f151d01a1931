"""Provides `ImportService`: importing files and folders, each file sent to the importer of what
its content is (card, world book, preset, persona backup, SillyTavern chat, group definition or
group chat).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

from tavern_tui.errors import FormatError, TavernError
from tavern_tui.formats.chatlog import CHAT_SUFFIXES, looks_like_chat_jsonl
from tavern_tui.formats.jsontypes import loads_bounded
from tavern_tui.formats.sniff import GROUP, PERSONA, PRESET, WORLD_BOOK, sniff_bytes
from tavern_tui.scripts.regex_scripts import is_regex_file
from tavern_tui.service.chat_files import ChatFileService
from tavern_tui.service.group_files import GroupFileService, is_group_chat
from tavern_tui.service.library import LibraryService
from tavern_tui.service.lore import WorldInfoService
from tavern_tui.service.persona import PersonaService
from tavern_tui.service.presets import PresetService
from tavern_tui.service.scripts import ScriptService
from tavern_tui.views import ImportResult

logger = logging.getLogger(__name__)

CARD_SUFFIXES = (".png", ".json", ".charx")
"""File types a folder import picks up."""


def _unnamed_json(data: bytes) -> bool:
    """A JSON object without a `name`: no card importer could read it (a V1 card has one)."""
    try:
        obj = loads_bounded(data.decode("utf-8-sig"), "<sniff>")
    except (UnicodeDecodeError, ValueError, FormatError):
        return False
    return isinstance(obj, dict) and not ({"name", "char_name", "data"} & obj.keys())


_PRESET_MARKS = (b'"prompt_order"', b'"chat_completion_source"', b'"openai_max_context"', b'"prompts"')


def _broken_preset(data: bytes) -> bool:
    """A file that does not parse but carries a chat-completion preset's own keys near its start."""
    head = data[:65536]
    return sum(mark in head for mark in _PRESET_MARKS) >= 2 or b'"prompt_order"' in head


def _reason(error: TavernError | str, shown: str) -> str:
    """The error's text without the leading file name (it is said once)."""
    text = str(error)
    return text[len(shown) + 2:] if text.startswith(shown + ": ") else text


def _iter_card_files(paths: Iterable[str | Path]) -> Iterable[tuple[str, Path | None]]:
    """(shown name, path) per file to import; a folder's .png/.json/.jsonl files, its subfolders'
    too (a SillyTavern data folder keeps chats in one folder per character; issue 21 item 5),
    hidden ones left out; path None for a folder with none."""
    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            # A SillyTavern data folder's `group chats/` after its `groups/`: a chat needs its group.
            found = sorted((p for p in path.rglob("*")
                            if p.is_file() and p.suffix.lower() in (*CARD_SUFFIXES, *CHAT_SUFFIXES)
                            and not any(part.startswith(".") for part in p.relative_to(path).parts)),
                           key=lambda p: ("group chats" in p.relative_to(path).parts, p))
            if not found:
                yield (str(given), None)
            yield from ((str(p), p) for p in found)
        else:
            yield (str(given), path)



def _regex_json(data: bytes) -> bool:
    """A SillyTavern regex export (`findRegex` and `scriptName` in each object)?"""
    if data.lstrip()[:1] not in (b"{", b"["):
        return False
    try:
        return is_regex_file(loads_bounded(data.decode("utf-8-sig"), "regex file"))
    except (UnicodeDecodeError, ValueError, FormatError):
        return False


class ImportService:
    """Imports of files and folders (`tavern.imports`).

    Args:
        library, lore, presets, persona, chat_files: the importer of each kind of file.
        scripts: regex exports. group_files: group definitions and group chats (without it,
            a group chat is imported as a one-character chat and a definition is refused).
    """

    def __init__(self, library: LibraryService, lore: WorldInfoService, presets: PresetService,
                 persona: PersonaService, chat_files: ChatFileService, *, scripts: ScriptService | None = None,
                 group_files: GroupFileService | None = None) -> None:
        self.scripts = scripts
        self.group_files = group_files
        self.library = library
        self.lore = lore
        self.presets = presets
        self.persona = persona
        self.chat_files = chat_files

    def import_paths(self, paths: Sequence[str | Path], *, character: str | None = None,
                     group: str | None = None) -> list[ImportResult]:
        """Import character cards, world books, presets, persona backups, SillyTavern chats
        (.jsonl), group definitions (`groups/<id>.json`) and group chats from files and folders
        (a folder: every .png/.json/.charx/.jsonl in it). What a file is comes from its content
        (`formats.sniff`, `formats.chatlog.looks_like_chat_jsonl`; a chat whose lines carry
        `original_avatar` is a group chat).

        Args:
            character: the character (id or name) imported chats are with; default: the
                name the chat file gives.
            group: the group (id or name) imported chats are of: each becomes a playthrough of
                it (`GroupFileService.import_group_chat_bytes`). Without it a group chat goes to
                the imported group whose `chats` list its file name, else fails saying to pass it.

        Each file is parsed completely before anything is stored, and stored in one transaction,
        so a broken file stores nothing. Importing the same bytes again stores nothing new.

        Returns:
            One result per file, in order; failures carry `error` instead of raising.
        """
        results: list[ImportResult] = []
        for shown, path in _iter_card_files(paths):
            if path is None:
                results.append(ImportResult(shown, "character",
                                            error=f"{shown}: no .png, .json, .charx or .jsonl files in this folder"))
                continue
            if not path.exists():
                results.append(ImportResult(shown, "character", error=f"{shown}: no such file or folder"))
                continue
            try:
                data = path.read_bytes()
            except OSError as exc:
                results.append(ImportResult(shown, "character", error=f"{shown}: cannot read: {exc.strerror}"))
                continue
            try:
                results.append(self._import_bytes(data, shown, path, character, group))
            except TavernError as exc:
                results.append(ImportResult(shown, "unknown", error=str(exc)))
            except Exception as exc:  # noqa: BLE001 - one bad file never stops the rest of a folder
                logger.exception("importing %s failed", shown)
                results.append(ImportResult(shown, "unknown", error=(
                    f"{shown}: could not be imported ({type(exc).__name__}: {str(exc)[:200]}); nothing of it was "
                    "stored; please report this file")))
        return results

    def _import_bytes(self, data: bytes, shown: str, path: Path, character: str | None,
                      group: str | None = None) -> ImportResult:
        """One file's import, by what its content is (see `import_paths`)."""
        is_chat_file = path.suffix.lower() in CHAT_SUFFIXES
        kind = None if is_chat_file else sniff_bytes(data)
        # Before the chat rule: a definition written on one line also has `chat_metadata`.
        if self.group_files is not None and kind == GROUP:
            return self.group_files.import_group_bytes(data, shown)
        if is_chat_file or looks_like_chat_jsonl(data):
            if self.group_files is not None and (group is not None or is_group_chat(data)):
                return self.group_files.import_group_chat_bytes(data, shown, group=group)
            return self.chat_files.import_chat_bytes(data, shown, character=character)
        if self.scripts is not None and _regex_json(data):
            return self.scripts.import_regex_bytes(data, shown)
        if kind == WORLD_BOOK:
            return self.lore.import_world_book_bytes(data, shown)
        if kind == PRESET:
            return self.presets.import_preset_bytes(data, shown)
        if kind == PERSONA:
            return self.persona.import_persona_bytes(data, shown)
        if kind is None and _broken_preset(data):
            # A preset that does not parse is a broken preset, not "not a PNG or JSON card" (issue 21 item 6).
            try:
                result = self.presets.import_preset_bytes(data, shown)
            except TavernError as exc:
                return ImportResult(shown, "preset", error=f"{shown}: a broken preset: {_reason(exc, shown)}")
            if result.error is None:
                return result
            return ImportResult(shown, "preset", error=f"{shown}: a broken preset: {_reason(result.error, shown)}")
        if kind is None and _unnamed_json(data):
            return ImportResult(shown, "unknown", error=(
                f"{shown}: not a file tavern-tui knows: expected a character card, world book, chat-completion "
                "preset, persona backup or SillyTavern chat (.jsonl)"))
        return self.library.import_card_bytes(data, shown)

