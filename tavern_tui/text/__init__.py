"""Text utilities every layer may use: token counting (`tokens`) and name substitution (`names`).

The floor of the layers (DESIGN.md "Layers"): it imports only `tavern_tui.errors`, the standard
library and third-party packages, so lore, persona and assembly can all point down to it.
"""
