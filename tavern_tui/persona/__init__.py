"""Persona document, beliefs, consolidation, nominations and safety scans (seed 002; DESIGN.md)."""
