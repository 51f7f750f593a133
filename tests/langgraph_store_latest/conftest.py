"""Run the newest LangGraph store suites against :class:`memkit.langgraph.MemkitStore`.

Vendored unchanged from the source distributions on PyPI (MIT, LICENSE beside each):

* ``langgraph_checkpoint/``: ``tests/test_store.py`` and ``tests/embed_test_utils.py`` of
  langgraph-checkpoint 4.3.2 (the suite of LangGraph's ``InMemoryStore`` and of ``BaseStore``);
* ``langgraph_checkpoint_sqlite/``: ``tests/test_store.py`` and ``tests/test_async_store.py`` of
  langgraph-checkpoint-sqlite 3.1.2 (the suites of ``SqliteStore`` and ``AsyncSqliteStore``).

They need langchain-core 1.x, which does not install beside the ``[mem0]`` extra's langchain 0.3, so
they run in a venv of their own (``make langgraph-latest``, ``.venv-langgraph``); the main suite does
not recurse into this folder (pyproject's ``norecursedirs``).

Each test module's ``InMemoryStore``, ``SqliteStore`` and ``AsyncSqliteStore`` is replaced by a
MemkitStore over a fresh memkit store, once over ``memory://`` and once over a SQLite file (the
``backend`` parameter). ``SqliteStore.from_conn_string(conn, index=...)`` opens that store whatever
``conn`` names (a test the suite runs on ``:memory:`` and on a file runs once: its ``:memory:`` variant),
with SqliteStore's ``text_fields`` passed as LangGraph's ``fields``; ``setup()`` does nothing, as memkit
makes its schema when it opens a store.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from memkit.langgraph import MemkitStore

# The vendored files import their helpers by their own package layout (``tests.*``).
pytest.register_assert_rewrite("langgraph_checkpoint_sqlite.test_store")
sys.modules.setdefault("tests.embed_test_utils", importlib.import_module("langgraph_checkpoint.embed_test_utils"))
sys.modules.setdefault("tests.test_store", importlib.import_module("langgraph_checkpoint_sqlite.test_store"))

_HERE = Path(__file__).parent


def _index(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """SqliteStore's index config as LangGraph's ``IndexConfig`` (its only distance is cosine, as memkit's)."""
    if config is None:
        return None
    index = {k: v for k, v in config.items() if k in ("dims", "embed")}
    if config.get("text_fields") is not None:
        index["fields"] = config["text_fields"]
    return index


@pytest.fixture(params=["memory", "sqlite"], autouse=True)
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    opened: list[MemkitStore] = []
    counter = iter(range(1_000_000))

    def url() -> str:
        return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/lg-{next(counter)}.db"

    class Store(MemkitStore):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(url(), **kwargs)
            opened.append(self)

    class SyncStore(Store):
        @classmethod
        @contextmanager
        def from_conn_string(cls, conn_string: str, *, index: Any = None, ttl: Any = None) -> Iterator[Store]:
            yield cls(index=_index(index), ttl=ttl)

        def setup(self) -> None:
            pass

    class AsyncStore(Store):
        @classmethod
        @asynccontextmanager
        async def from_conn_string(
            cls, conn_string: str, *, index: Any = None, ttl: Any = None
        ) -> AsyncIterator[Store]:
            yield cls(index=_index(index), ttl=ttl)

        async def setup(self) -> None:
            pass

    for name, shim in (("InMemoryStore", Store), ("SqliteStore", SyncStore), ("AsyncSqliteStore", AsyncStore)):
        if hasattr(request.module, name):
            monkeypatch.setattr(request.module, name, shim)
    yield request.param
    for store in opened:
        store.close()


# What MemkitStore does differently from LangGraph's stores, by design, keyed by (file, test name):
# each is a strict xfail, so if MemkitStore ever passes one the run says so.
_PER_FIELD = (
    "memkit embeds one text per item (the indexed fields joined), not one vector per field with max"
    " pooling, so two items matching in different fields do not get the same score"
)
_DIFFERENT: dict[tuple[str, str], str] = {
    ("langgraph_checkpoint/test_store.py", "test_embed_with_path"): _PER_FIELD,
    ("langgraph_checkpoint_sqlite/test_store.py", "test_embed_with_path"): _PER_FIELD,
    ("langgraph_checkpoint_sqlite/test_async_store.py", "test_embed_with_path"): _PER_FIELD,
    ("langgraph_checkpoint_sqlite/test_store.py", "test_scores"): (
        "memkit ranks keyword and semantic legs fused by default and its score is the fused one;"
        " MemkitStore(search_mode='semantic') ranks and scores by cosine similarity, as SqliteStore does"
    ),
    ("langgraph_checkpoint_sqlite/test_store.py", "test_filter_keys_with_hyphens_and_digits"): (
        "a filter key is one key of the value, dots and all, as in LangGraph's InMemoryStore and"
        " PostgresStore; SqliteStore alone reads 'user.access-level' as a path into nested dicts"
    ),
    ("langgraph_checkpoint_sqlite/test_store.py", "test_sql_injection_vulnerability"): (
        "memkit takes any filter key (it never splices one into SQL), as LangGraph's InMemoryStore and"
        " PostgresStore do; SqliteStore alone refuses keys outside [A-Za-z0-9_.-] with a ValueError"
    ),
    ("langgraph_checkpoint_sqlite/test_store.py", "test_vector_store_initialization"): (
        "it reads SqliteStore's own attributes (embeddings, index_config['text_fields'], conn with its"
        " vector tables); MemkitStore keeps LangGraph's IndexConfig and memkit's schema"
    ),
    ("langgraph_checkpoint_sqlite/test_async_store.py", "test_no_running_loop"): (
        "MemkitStore's sync methods run on memkit's own event loop, so they work inside a running loop"
        " too; AsyncSqliteStore refuses them there because its connection belongs to the caller's loop"
    ),
}

# Tests of SqliteStore's own SQL building (its migrations, its GLOB escaping, its query text): they
# never reach a store, so they say nothing about MemkitStore and are not run.
_NOT_A_STORE = {
    ("langgraph_checkpoint_sqlite/test_store.py", "test_nonnull_migrations"),
    ("langgraph_checkpoint_sqlite/test_store.py", "test_escape_glob_literal"),
    ("langgraph_checkpoint_sqlite/test_store.py", "test_namespace_match_pattern"),
    ("langgraph_checkpoint_sqlite/test_store.py", "test_list_namespaces_prefix_uses_indexable_condition"),
}


# SqliteStore's own parameters choosing ":memory:" or a file for SqliteStore's data: MemkitStore's store
# is the ``backend`` parameter's, so a test's "file" variant would run its ":memory:" variant again.
_WHERE_SQLITE_KEEPS_DATA = ("store", "conn_type", "conn_string")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    for item in items:
        if _HERE not in item.path.parents:
            kept.append(item)
            continue
        key = (item.path.relative_to(_HERE).as_posix(), getattr(item, "originalname", item.name))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if key in _NOT_A_STORE or "file" in (params.get(name) for name in _WHERE_SQLITE_KEEPS_DATA):
            dropped.append(item)
            continue
        reason = _DIFFERENT.get(key)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True))
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
