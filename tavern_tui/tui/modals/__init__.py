"""Modal screens shared by several panes."""
