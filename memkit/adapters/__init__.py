"""The adapters behind :class:`memkit.MemoryProvider`.

Imported lazily: ``from memkit.adapters import Neo4jAdapter`` only needs the
``neo4j`` driver when you ask for that name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from memkit.store._registry import adapter_modules

if TYPE_CHECKING:
    from memkit.adapters._falkordb._adapter import FalkorDBAdapter
    from memkit.adapters._mem0._adapter import Mem0Adapter
    from memkit.adapters._memory._adapter import InMemoryAdapter, MockMemoryAdapter
    from memkit.adapters._neo4j._adapter import Neo4jAdapter
    from memkit.adapters._sqlite import SQLiteAdapter

__all__ = ["FalkorDBAdapter", "InMemoryAdapter", "Mem0Adapter", "MockMemoryAdapter", "Neo4jAdapter", "SQLiteAdapter"]

# The one adapter registry is the factory's: a backend registered there is importable here.
_LAZY = adapter_modules()


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memkit.adapters' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
