"""Provides the app's screens: home (characters, playthroughs), chat, and the import modal."""
