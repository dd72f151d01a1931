"""Readers and writers for SillyTavern files: PNG chunks and character cards."""
