"""Provides the Textual user interface (the only package that imports textual); start it with `tui.app.run`."""
