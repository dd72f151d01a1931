"""The MVU variable macros' helpers, kept importable here: the macros themselves (`{{get_<scope>_variable}}`,
`{{getvar}}` over the message variables, `{{format_<scope>_variable}}`) are in `handlers.mvu`."""

from tavern_tui.assembly.macros.handlers.mvu import format_variables, read_variable, tavern_helper_variables

__all__ = ["format_variables", "read_variable", "tavern_helper_variables"]
