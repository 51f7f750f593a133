"""The PostgreSQL store (``postgresql://``), one concern a module.

``_adapter`` (the :class:`PostgresAdapter`), ``_loop`` (its connection pool's event loop),
``_schema`` (migrations), ``_sql`` (the dialect and statements), ``_writes`` (memories and trace
rows in one transaction), ``_search`` (one search), ``_keyword`` and ``_index`` (the keyword leg),
``_dense`` (the semantic leg over pgvector), ``_traces`` (trace steps as columns) and ``_recalls``
(recalls and marks).
"""
