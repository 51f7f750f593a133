"""The conformance suite every memkit adapter passes: ours, and yours.

Subclass :class:`ProviderConformance` in a test module and give it a
``make_provider`` fixture that returns a zero-argument callable building a
provider (each call on the same storage, so persistence can be checked)::

    import pytest
    from memkit.testing import ProviderConformance

    class TestMyAdapter(ProviderConformance):
        persistent = True

        @pytest.fixture
        def make_provider(self, tmp_path):
            return lambda: MyAdapter(tmp_path / "store")

Tests use fresh random namespaces, so a shared server is fine. Where an
adapter deliberately differs, name the test in ``differences`` with the reason:
the test is then expected to fail (strict xfail), so the note cannot go stale.

An optional capability (``SupportsGet``, ``SupportsRecalls``, ...) the adapter does
not implement is not skipped: its tests check that it is wholly absent (none of its
methods) and that :class:`memkit.Memory` refuses it with ``NotImplementedError``, and
:func:`absence_report` lists what each adapter lacks (memkit's own ``conftest.py``
prints it at the end of the run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memkit.testing._falkordb import FalkorDBServer
from memkit.testing._neo4j import NEO4J_CURRENT, NEO4J_LTS, Neo4jServer
from memkit.testing._postgres import PostgresServer

if TYPE_CHECKING:
    from memkit.testing._conformance import ProviderConformance, absence_report

__all__ = [
    "NEO4J_CURRENT", "NEO4J_LTS", "FalkorDBServer", "Neo4jServer", "PostgresServer", "ProviderConformance",
    "absence_report",
]


def __getattr__(name: str) -> Any:
    # The conformance suite is pytest code; the servers are not. Importing it on first use keeps
    # ``from memkit.testing import FalkorDBServer`` working where pytest is not installed.
    if name in ("ProviderConformance", "absence_report"):
        from memkit.testing import _conformance

        return getattr(_conformance, name)
    raise AttributeError(f"module 'memkit.testing' has no attribute {name!r}")
