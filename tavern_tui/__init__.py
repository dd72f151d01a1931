"""tavern-tui: a terminal roleplay client for SillyTavern resources."""

__version__ = "0.1.0"
