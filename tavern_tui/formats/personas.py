"""Provides `parse_personas`: reads SillyTavern persona files.

Rules: SillyTavern 1.18 `public/scripts/personas.js` (the "Backup" button writes
`{"personas": {avatar: name}, "persona_descriptions": {avatar: {description, position, depth,
role, lorebook, title, …}}, "default_persona": avatar}`; "Restore" reads the same). A single
persona object `{"name", "description", "lorebook"?}` is accepted too. Pure: no database.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tavern_tui.errors import FormatError
from tavern_tui.formats.jsontypes import loads_bounded


@dataclass(frozen=True, slots=True)
class STPersona:
    """One SillyTavern persona.

    Attributes:
        key: the avatar file name SillyTavern keys it by ("" for a single-persona file).
        name: the persona's name (`{{user}}`).
        description: its description text.
        lorebook: the name of the persona's own world book ("" = none).
        title: the optional title shown under the name.
    """

    key: str
    name: str
    description: str
    lorebook: str = ""
    title: str = ""


@dataclass(frozen=True, slots=True)
class ParsedPersonas:
    """A persona file: its personas (file order) and the default one's key ("" = none)."""

    personas: tuple[STPersona, ...]
    default: str = ""

    def chosen(self, name: str | None = None) -> STPersona:
        """The persona to import: the one named `name` (case-insensitive), else the default,
        else the only/first one.

        Raises:
            LookupError: `name` matches none (the message lists the names).
        """
        if name is not None:
            for persona in self.personas:
                if persona.name.lower() == name.lower() or persona.key == name:
                    return persona
            raise LookupError(f"no persona named {name!r}; the file has: "
                              + ", ".join(p.name for p in self.personas))
        return next((p for p in self.personas if p.key == self.default), self.personas[0])


def looks_like_personas(obj: Any) -> bool:
    """True for a SillyTavern persona backup (`personas` and/or `persona_descriptions` objects)."""
    return isinstance(obj, dict) and (isinstance(obj.get("persona_descriptions"), dict)
                                      or (isinstance(obj.get("personas"), dict) and "prompts" not in obj))


def _text(value: Any, file: str, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FormatError(file, f"is a {type(value).__name__}, not a string", field)
    return value


def parse_personas(data: bytes, file: str) -> ParsedPersonas:
    """Read a persona backup or a single persona object.

    Raises:
        FormatError: not UTF-8 JSON (with line and column), not an object, no persona in it,
            or a field of the wrong type (named as `persona_descriptions.<key>.description`).
    """
    try:
        obj = loads_bounded(data.decode("utf-8-sig"), file)
    except UnicodeDecodeError as exc:
        raise FormatError(file, f"not UTF-8 text (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise FormatError(file, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from exc
    if not isinstance(obj, dict):
        raise FormatError(file, "a persona file is a JSON object")
    if looks_like_personas(obj):
        names = obj.get("personas") if isinstance(obj.get("personas"), dict) else {}
        descriptions = obj.get("persona_descriptions") if isinstance(obj.get("persona_descriptions"), dict) else {}
        personas = []
        for key in list(dict.fromkeys([*names, *descriptions])):
            info = descriptions.get(key) or {}
            if not isinstance(info, dict):
                raise FormatError(file, "is not an object", f"persona_descriptions.{key}")
            name = _text(names.get(key), file, f"personas.{key}") or key.rsplit(".", 1)[0]
            personas.append(STPersona(key, name, _text(info.get("description"), file,
                                                        f"persona_descriptions.{key}.description"),
                                      _text(info.get("lorebook"), file, f"persona_descriptions.{key}.lorebook"),
                                      _text(info.get("title"), file, f"persona_descriptions.{key}.title")))
        if not personas:
            raise FormatError(file, "the backup holds no persona", "personas")
        default = obj.get("default_persona")
        return ParsedPersonas(tuple(personas), default if isinstance(default, str) else "")
    card_fields = [k for k in ("spec", "data", "first_mes", "mes_example", "personality", "scenario") if k in obj]
    if card_fields:
        raise FormatError(file, f"this is a character card ({card_fields[0]}), not a persona: import it with "
                                "`tavern import`")
    if "name" in obj and "description" in obj:
        return ParsedPersonas((STPersona("", _text(obj["name"], file, "name"),
                                         _text(obj["description"], file, "description"),
                                         _text(obj.get("lorebook"), file, "lorebook"),
                                         _text(obj.get("title"), file, "title")),))
    raise FormatError(file, "not a SillyTavern persona file: expected `personas`/`persona_descriptions` "
                            "(a persona backup) or `name` and `description`")
