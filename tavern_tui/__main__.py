"""`python -m tavern_tui` runs the command line."""

from tavern_tui.cli import main

raise SystemExit(main())
