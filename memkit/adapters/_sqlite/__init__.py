"""The embedded SQLite store, one concern a module.

``_schema`` (migrations, opening a file), ``_sql`` (rows and the filter compiler),
``_vectors`` (embedder binding, vector cache), ``_keywords`` (keyword-index cache),
``_search`` (one search), ``_traces`` (trace steps as columns), ``_queries`` (the reads and
small writes that need only the connection) and ``_adapter``
(the :class:`SQLiteAdapter` that ties them to a worker thread).
"""

from memkit.adapters._sqlite._adapter import SQLiteAdapter

__all__ = ["SQLiteAdapter"]
