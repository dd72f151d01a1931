"""Fixtures for provider tests: a running `LoopbackServer` per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.loopback import LoopbackServer


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    """A started loopback server, stopped after the test."""
    with LoopbackServer() as server:
        yield server
