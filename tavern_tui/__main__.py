"""`python -m tavern_tui` runs the command line."""

from tavern_tui.cli import entry

raise SystemExit(entry())
