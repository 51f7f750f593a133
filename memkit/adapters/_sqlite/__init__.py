"""The embedded SQLite store, one concern a module.

``_schema`` (migrations, opening a file), ``_sql`` (rows and the filter compiler),
``_vectors`` (embedder binding, vector cache), ``_keywords`` (keyword-index cache),
``_search`` (one search), ``_traces`` (trace steps as columns), ``_queries`` (the reads and
small writes that need only the connection), ``_adapter``
(the :class:`SQLiteAdapter` that ties them to a worker thread) and ``_reads`` (the one-shot
reads of the command line, on the caller's thread).

:class:`SQLiteAdapter` loads on first use: the one-shot reads need none of its imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memkit.adapters._sqlite._adapter import SQLiteAdapter

__all__ = ["SQLiteAdapter"]


def __getattr__(name: str) -> Any:
    if name == "SQLiteAdapter":
        return importlib.import_module("memkit.adapters._sqlite._adapter").SQLiteAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
