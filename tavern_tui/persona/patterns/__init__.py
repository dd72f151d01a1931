"""Provides `MATCHERS`: the deterministic belief extractor's patterns, one matcher per kind of statement.

Rules: seed 002 (ADR-0079) decision 6 and DESIGN.md "Persona and nominations". Each matcher takes
a clause (`lexicon._Clause`) and returns candidates, [] (matched but rejected: stop), or None (not
this pattern: try the next); `extract.extract_beliefs` cuts a message into clauses and tries them
in `MATCHERS` order. Every pattern is anchored or uses disjoint classes, so a clause costs linear
time.

The matchers live by what a statement is about: `facts` (name, credentials, place, money, health
and beliefs, identity, what used to be), `tastes` (likes, dislikes, favourites, preferences) and
`story` (boundaries and how the story is to be kept); `common` holds the fragments they share.
"""

from __future__ import annotations

from tavern_tui.persona.patterns.facts import (
    _credentials,
    _finances,
    _health_etc,
    _identity,
    _location,
    _name,
    _used_to,
)
from tavern_tui.persona.patterns.story import _boundary, _keep_it
from tavern_tui.persona.patterns.tastes import _fan, _is_my_favourite, _like, _my_favourite, _prefer

__all__ = ["MATCHERS"]

MATCHERS = (_name, _credentials, _location, _finances, _used_to, _boundary, _keep_it, _my_favourite, _fan,
            _prefer, _like, _health_etc, _identity, _is_my_favourite)
"""The matchers in the order a clause tries them (the first that does not return None decides)."""
