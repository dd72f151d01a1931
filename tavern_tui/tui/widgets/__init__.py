"""Provides the small widgets the screens compose: message boxes, the transcript, the status line."""
