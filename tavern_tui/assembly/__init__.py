"""Prompt assembly: macros, strategies and placement (resources + activation + persona → request)."""
