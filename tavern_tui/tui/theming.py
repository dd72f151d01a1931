"""Provides the theme data lookup (`themes/` folder), TOML → `Theme` loading and the app's CSS variables."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from textual.theme import Theme

import tavern_tui

DEFAULT_THEME = "tavern-dark"
"""The theme the app starts with."""

WIDE_AT = 100
"""Columns from which a screen is `-wide` (below: `-narrow`, `TavernApp.HORIZONTAL_BREAKPOINTS`); the
widgets that size their columns to the screen read the same width."""

APP_VARIABLES: dict[str, str] = {
    "speaker-user": "secondary",
    "speaker-character": "primary",
    "speaker-system": "text-muted",
    "mark-origin": "text-muted",
    "mark-stopped": "warning",
    "mark-error": "error",
    "reasoning-foreground": "text-muted",
    "message-user-background": "surface",
    "wi-fired": "success",
    "wi-skipped": "text-muted",
    "wi-over-budget": "warning",
    "wi-bound": "accent",
    "pane-border": "primary 50%",
    "pane-border-focus": "primary",
}
"""Variables the stylesheets (`app.tcss`, widgets' `DEFAULT_CSS`) use beyond Textual's own, each
with the Textual variable it falls back to, optionally followed by an alpha ("primary 50%").

`pane-border` / `pane-border-focus` are the colours of the shared `.pane` frame (`app.tcss`),
unfocused and focused.

A theme's `[variables]` table overrides them; the fallbacks make the stylesheet parse under any
theme (Textual refuses undeclared variables, and a variable's value cannot name another one).
"""


def app_variable_defaults(theme: Theme) -> dict[str, str]:
    """Values of `APP_VARIABLES` for `theme` when it does not set them itself: the fallback's
    colour, with its alpha when it has one ("#0178d4 50%")."""
    generated = theme.to_color_system().generate()
    values: dict[str, str] = {}
    for name, fallback in APP_VARIABLES.items():
        base, _, alpha = fallback.partition(" ")
        values[name] = f"{generated[base]} {alpha}" if alpha else generated[base]
    return values


_THEME_FIELDS = ("primary", "secondary", "warning", "error", "success", "accent", "foreground",
                 "background", "surface", "panel", "boost")


def themes_dir() -> Path:
    """The folder holding `app.tcss` and the theme TOML files.

    The wheel ships the repository's root `themes/` as `tavern_tui/_themes/`; a source checkout
    has it next to the package.

    Raises:
        FileNotFoundError: neither location has `app.tcss` (a broken install).
    """
    package = Path(tavern_tui.__file__).resolve().parent
    for candidate in (package / "_themes", package.parent / "themes"):
        if (candidate / "app.tcss").is_file():
            return candidate
    raise FileNotFoundError(f"tavern-tui themes not found (looked in {package / '_themes'} "
                            f"and {package.parent / 'themes'})")


def css_path() -> Path:
    """Path of the app stylesheet (`app.tcss`)."""
    return themes_dir() / "app.tcss"


def theme_from_toml(path: Path) -> Theme:
    """Build a Textual `Theme` from one TOML file.

    The file has `name`, the semantic colours (`primary` … `boost`), `dark`, and an optional
    `[variables]` table.

    Raises:
        ValueError: the file is not valid TOML or lacks `name`/`primary`, naming the file.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path.name}: cannot read theme: {exc}") from exc
    name, primary = data.get("name"), data.get("primary")
    if not isinstance(name, str) or not isinstance(primary, str):
        raise ValueError(f"{path.name}: a theme needs string `name` and `primary`")
    colours = {key: str(data[key]) for key in _THEME_FIELDS if key in data}
    variables = {str(k): str(v) for k, v in dict(data.get("variables") or {}).items()}
    return Theme(name=name, dark=bool(data.get("dark", True)), variables=variables, **colours)


@dataclass(slots=True)
class LoadedThemes:
    """The outcome of loading theme files.

    Attributes:
        themes: themes that loaded, in file-name order.
        failed: one plain message per file that did not load.
    """

    themes: list[Theme] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def load_themes(folder: Path | None = None) -> LoadedThemes:
    """Load every `*.toml` theme in `folder` (default: the shipped themes folder)."""
    result = LoadedThemes()
    for path in sorted((folder or themes_dir()).glob("*.toml")):
        try:
            result.themes.append(theme_from_toml(path))
        except ValueError as exc:
            result.failed.append(str(exc))
    return result
